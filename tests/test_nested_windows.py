"""Nested windows: usage finer than the costs (hourly usage, daily costs) is rolled up exactly.

OpenCost's CSV export has one row per container and day and ``/allocation`` answers daily
steps unless asked otherwise, while applications export usage per hour. These tests run the
real export sample with hourly usage, compare daily and hourly costs of the same day, and check
that coarser or boundary-crossing usage stays an error that says what would fix it.
"""

from __future__ import annotations

import json
import shutil
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tenantcost.allocate import allocate, allocate_stream
from tenantcost.cli import app
from tenantcost.errors import InputError, InputWarning
from tenantcost.readers.costs import read_costs
from tenantcost.reconcile import cascade
from tenantcost.report.confidence import RULE, assess, key_amounts, usage_figures
from tenantcost.split import connect
from tenantcost.usage_source import FrameUsage
from tenantcost.windows import Period, auto_chunk, chunk_bounds

from .factories import costs, rules

ROOT = Path(__file__).resolve().parent
SAMPLE = ROOT / "data" / "opencost" / "opencost-website_export-sample.csv"
DAY = pd.Timestamp("2023-01-01T00:00:00Z")
runner = CliRunner()

SAMPLE_RULES = """
currency: USD
rules:
  - id: export-2023
    effective_from: "2023-01-01"
    workloads:
      - {match: {namespace: opencost, controller: opencost}, class: shared, service: opencost,
         key: requests}
    idle: keep
    unmatched: error
"""


def hourly_usage(
    days: int,
    per_hour: dict[str, dict[str, float]],
    *,
    start: pd.Timestamp = DAY,
    service: str = "opencost",
    hours: range | None = None,
) -> pd.DataFrame:
    """Canonical hourly usage: every client of ``per_hour`` with the same values each hour."""
    slots = list(hours if hours is not None else range(24 * days))
    metrics = sorted({m for values in per_hour.values() for m in values})
    records = [
        {
            "window_start": start + pd.Timedelta(hours=h),
            "window_end": start + pd.Timedelta(hours=h + 1),
            "service": service,
            "client": client,
            **{m: float(values.get(m, 0.0)) for m in metrics},
        }
        for h in slots
        for client, values in per_hour.items()
    ]
    frame = pd.DataFrame.from_records(records)
    frame["origin"] = [f"usage.csv:row {i + 2}" for i in range(len(frame))]
    for column in ("window_start", "window_end"):
        frame[column] = frame[column].astype("datetime64[ns, UTC]")
    for column in ("service", "client", "origin"):
        frame[column] = frame[column].astype("str")
    return frame


def totals(result) -> dict[str, int]:
    return {str(c): int(a) for c, a in result.client_totals().itertuples(index=False)}


def write_usage_csv(frame: pd.DataFrame, path: Path) -> Path:
    out = frame.drop(columns="origin")
    out.to_csv(path, index=False, date_format="%Y-%m-%dT%H:%M:%SZ")
    return path


# --------------------------------------------------------------------------- the export sample


def test_export_sample_with_hourly_usage_is_rolled_up_per_day() -> None:
    """Two daily rows of the sample, 48 hours of usage: each day split by the day's requests."""
    cost = read_costs([SAMPLE])
    assert sorted(cost["window_start"].unique()) == [DAY, DAY + pd.Timedelta(days=1)]
    usage = hourly_usage(2, {"a": {"requests": 3}, "b": {"requests": 1}})
    r = allocate(cost, usage, rules(SAMPLE_RULES))
    # 0.010493746736011505 USD a day = 10494 micro-units; 3:1 gives 7870.5 / 2623.5 and the
    # tie on the remainder goes to the first client by name: 7871 / 2623, twice.
    assert totals(r) == {"a": 2 * 7871, "b": 2 * 2623}
    assert r.windows == 2 and r.hours == 48.0
    shared = r.lines[r.lines["kind"] == "shared"].sort_values(["window_start", "client"])
    assert shared["measure"].tolist() == [72.0, 24.0, 72.0, 24.0]  # the day's requests
    assert shared["total_measure"].tolist() == [96.0] * 4
    assert (shared["window_end"] - shared["window_start"] == pd.Timedelta(days=1)).all()
    assert cascade(r).gap == 0


def test_export_sample_and_hourly_usage_through_the_cli(tmp_path: Path) -> None:
    shutil.copy(SAMPLE, tmp_path / "costs.csv")
    (tmp_path / "rules.yaml").write_text(SAMPLE_RULES)
    usage = hourly_usage(2, {"a": {"requests": 3}, "b": {"requests": 1}, "": {"requests": 4}})
    write_usage_csv(usage, tmp_path / "usage.csv")
    result = runner.invoke(app, [
        "allocate", "--config", str(tmp_path / "rules.yaml"), "--costs",
        str(tmp_path / "costs.csv"), "--usage", str(tmp_path / "usage.csv"), "--format", "json",
    ])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    # Half of each day's requests carried no client id: that half stays unattributed.
    assert {c["client"]: c["amount"] for c in doc["clients"]} == {"a": 2 * 3935, "b": 2 * 1312}
    assert doc["unattributed"] == 2 * 5247 and doc["gap"] == 0
    assert [d["cause"] for d in doc["unattributed_detail"]] == ["usage without client id"]


def test_parquet_usage_is_rolled_up_like_csv_usage(tmp_path: Path) -> None:
    """The Parquet path (scanned per chunk by DuckDB) rolls up exactly like in-memory usage."""
    shutil.copy(SAMPLE, tmp_path / "costs.csv")
    (tmp_path / "rules.yaml").write_text(SAMPLE_RULES)
    usage = hourly_usage(2, {"a": {"requests": 0.1}, "b": {"requests": 0.2}, "c": {"requests": 1}})
    write_usage_csv(usage, tmp_path / "usage.csv")
    table = usage.drop(columns="origin")
    pq.write_table(pa.Table.from_pandas(table, preserve_index=False), tmp_path / "usage.parquet")
    outputs = []
    for name in ("usage.csv", "usage.parquet"):
        result = runner.invoke(app, [
            "allocate", "--config", str(tmp_path / "rules.yaml"), "--costs",
            str(tmp_path / "costs.csv"), "--usage", str(tmp_path / name), "--format", "json",
            "--chunk", "6h",
        ])
        assert result.exit_code == 0, result.output
        outputs.append(json.loads(result.stdout))
    assert outputs[0]["clients"] == outputs[1]["clients"]
    assert sum(c["amount"] for c in outputs[0]["clients"]) == 2 * 10494


# --------------------------------------------------------------------------- daily vs hourly


def hourly_split(micros: int) -> list[int]:
    """A day's cost spread evenly over 24 hours in exact micro-units (the first hours +1)."""
    base, extra = divmod(micros, 24)
    return [base + (1 if h < extra else 0) for h in range(24)]


TWO_POOLS = """
currency: USD
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {namespace: saas, controller: api}, class: shared, service: api, key: requests}
      - {match: {namespace: saas, controller: worker}, class: shared, service: worker,
         key: cpu_seconds}
      - {match: {name: __idle__}, class: idle}
    external:
      - {name: search, amount: 0.065, per: hour, key: requests, services: [api, worker]}
    idle: proportional
    unmatched: error
"""
NOV = pd.Timestamp("2026-11-01T00:00:00Z")
ONE = {"requests": 1.0, "cpu_seconds": 0.0}


def day_costs(api: int, worker: int, idle: int, *, hourly: bool) -> pd.DataFrame:
    """The same day's costs as one daily window per workload, or as 24 hourly windows."""
    parts = {("saas", "api", ""): api, ("saas", "worker", ""): worker, ("", "", "__idle__"): idle}
    rows = []
    for (ns, ctl, name), micros in parts.items():
        spans = hourly_split(micros) if hourly else [micros]
        length = pd.Timedelta(hours=1) if hourly else pd.Timedelta(days=1)
        for i, amount in enumerate(spans):
            start = NOV + i * length
            rows.append({"namespace": ns, "controller": ctl, "name": name,
                         "window_start": start, "window_end": start + length,
                         "total_cost": amount / 1e6})
    return costs(rows)


def flat_usage(clients: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """Flat hourly usage of both services: (requests, cpu_seconds) per client and hour."""
    api = hourly_usage(1, {c: {"requests": r, "cpu_seconds": 0.0} for c, (r, _) in clients.items()},
                       start=NOV, service="api")
    worker = hourly_usage(1, {c: {"requests": 0.0, "cpu_seconds": s}
                              for c, (_, s) in clients.items()}, start=NOV, service="worker")
    frame = pd.concat([api, worker], ignore_index=True)
    frame["origin"] = [f"usage.csv:row {i + 2}" for i in range(len(frame))]
    return frame


client_usage = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d", ""]),
    st.tuples(st.integers(0, 10**9), st.integers(0, 10**6)).map(
        lambda t: (t[0] / 1000, t[1] / 100)
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    client_usage,
    st.integers(0, 10**12),
    st.integers(0, 10**12),
    st.integers(0, 10**9),
)
def test_daily_and_hourly_costs_of_one_day_give_the_same_totals(
    clients: dict[str, tuple[float, float]], api: int, worker: int, idle: int
) -> None:
    """Flat usage: each hour is the day in small, so the totals differ only by rounding,
    less than one micro-unit per window and pool (each window is rounded on its own).
    Idle is kept: shared in proportion to each window's rounded amounts, it would carry the
    rounding of tiny pools into shares."""
    usage = flat_usage(clients)
    ruleset = rules(TWO_POOLS.replace("idle: proportional", "idle: keep"))
    daily = allocate(day_costs(api, worker, idle, hourly=False), usage, ruleset)
    hourly = allocate(day_costs(api, worker, idle, hourly=True), usage, ruleset)
    assert daily.windows == 1 and hourly.windows == 24
    assert daily.reference_total == hourly.reference_total
    a, b = totals(daily), totals(hourly)
    pools = 3  # api, worker and search, each rounded per window
    for client in set(a) | set(b):
        assert abs(a.get(client, 0) - b.get(client, 0)) <= 24 * pools, client
    for r in (daily, hourly):
        assert cascade(r).gap == 0
    unattributed = [int(r.unattributed["amount"].sum()) for r in (daily, hourly)]
    assert abs(unattributed[0] - unattributed[1]) <= 24 * pools


def test_daily_and_hourly_costs_agree_exactly_on_round_figures() -> None:
    usage = flat_usage({"a": (3, 1.0), "b": (1, 3.0)})
    ruleset = rules(TWO_POOLS)
    daily = allocate(day_costs(2_400_000, 4_800_000, 0, hourly=False), usage, ruleset)
    hourly = allocate(day_costs(2_400_000, 4_800_000, 0, hourly=True), usage, ruleset)
    # api 3:1, worker 1:3, search 24 x 0.065 by requests 3:1: every hour is exact.
    assert totals(daily) == totals(hourly) == {"a": 4_170_000, "b": 4_590_000}


# --------------------------------------------------------------------------- exactness


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c", ""]), st.integers(0, 23),
                  st.integers(0, 10**12), st.integers(0, 10**6)),
        min_size=1, max_size=60, unique_by=lambda t: (t[0], t[1]),
    ),
    st.randoms(use_true_random=False),
    st.sampled_from(["requests", "cpu_seconds", "even"]),
)
def test_rolled_up_usage_equals_usage_summed_by_hand(rows, rnd, key) -> None:
    """Hourly usage with daily costs gives exactly the result of daily usage summed by hand
    (integer micro-unit values, so the hand sum is exact too), in any row order."""
    records = [{"window_start": NOV + pd.Timedelta(hours=h),
                "window_end": NOV + pd.Timedelta(hours=h + 1), "service": "api", "client": c,
                "requests": q / 1e6, "cpu_seconds": s / 1e6} for c, h, q, s in rows]
    hourly = pd.DataFrame.from_records(records)
    hourly["origin"] = [f"usage.csv:row {i + 2}" for i in range(len(hourly))]
    hourly[["window_start", "window_end"]] = hourly[["window_start", "window_end"]].astype(
        "datetime64[ns, UTC]")
    micro = hourly.assign(requests=np.rint(hourly["requests"] * 1e6).astype("int64"),
                          cpu_seconds=np.rint(hourly["cpu_seconds"] * 1e6).astype("int64"))
    daily = micro.groupby(["service", "client"], as_index=False)[["requests", "cpu_seconds"]].sum()
    daily = daily.assign(window_start=NOV, window_end=NOV + pd.Timedelta(days=1),
                         requests=daily["requests"] / 1e6,
                         cpu_seconds=daily["cpu_seconds"] / 1e6, origin="daily")
    cost = day_costs(987_654_321, 0, 0, hourly=False)
    text = TWO_POOLS
    expected = allocate(cost, daily, rules(text), key=key)
    shuffled = hourly.sample(frac=1.0, random_state=rnd.randint(0, 2**31)).reset_index(drop=True)
    got = allocate(cost.iloc[::-1].reset_index(drop=True), shuffled, rules(text), key=key)
    columns = ["client", "source", "kind", "amount"]
    order = ["client", "kind", "source"]
    pd.testing.assert_frame_equal(
        got.lines.sort_values(order).reset_index(drop=True)[columns],
        expected.lines.sort_values(order).reset_index(drop=True)[columns],
    )
    assert int(got.unattributed["amount"].sum()) == int(expected.unattributed["amount"].sum())
    assert cascade(got).gap == 0


def test_large_measures_are_summed_exactly_in_micro_units() -> None:
    """24 hours of 0.1 requests is 2.4 (a float sum gives 2.4000000000000004), and
    24 x 1e9 requests plus a millionth each keeps its last digit."""
    assert sum([0.1] * 24) != 2.4 and sum([1e9 + 0.000001] * 24) != 24_000_000_000.000024
    usage = hourly_usage(1, {"a": {"requests": 0.1, "cpu_seconds": 0},
                             "b": {"requests": 1e9 + 0.000001, "cpu_seconds": 0}},
                         start=NOV, service="api")
    r = allocate(day_costs(1_000_000, 0, 0, hourly=False), usage, rules(TWO_POOLS))
    shared = r.lines[(r.lines["kind"] == "shared")].set_index("client")
    assert shared.loc["a", "measure"] == 2.4
    assert shared.loc["b", "measure"] == 24_000_000_000.000024


# --------------------------------------------------------------------------- even and weights


EVEN_WEIGHTS = """
currency: USD
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {namespace: saas, controller: api}, class: shared, service: api, key: even}
      - match: {namespace: saas, controller: worker}
        class: shared
        service: worker
        key: {weights: {a: 2, b: 1, c: 1}}
      - {match: {name: __idle__}, class: idle}
    idle: keep
    unmatched: error
"""


def test_even_and_weights_count_the_clients_active_in_the_cost_window() -> None:
    """``a`` used the services for 3 hours, ``b`` all day, ``c`` sent only zero rows: a and b
    count once each for the day, however many hours they were active; c does not count."""
    frames = []
    for service in ("api", "worker"):
        frames += [
            hourly_usage(1, {"a": {"requests": 5}}, start=NOV, service=service, hours=range(3)),
            hourly_usage(1, {"b": {"requests": 1}}, start=NOV, service=service),
            hourly_usage(1, {"c": {"requests": 0}}, start=NOV, service=service),
        ]
    usage = pd.concat(frames, ignore_index=True)
    cost = costs([
        {"namespace": "saas", "controller": c, "window_start": NOV,
         "window_end": NOV + pd.Timedelta(days=1), "total_cost": 0.9}
        for c in ("api", "worker")
    ])
    r = allocate(cost, usage, rules(EVEN_WEIGHTS))
    by = r.lines.groupby(["source", "client"])["amount"].sum().to_dict()
    assert {k: v for k, v in by.items() if k[0] == "api"} == {("api", "a"): 450_000,
                                                             ("api", "b"): 450_000}
    assert {k: v for k, v in by.items() if k[0] == "worker"} == {("worker", "a"): 600_000,
                                                                ("worker", "b"): 300_000}
    shared = r.lines.set_index(["source", "client"])
    assert shared.loc[("api", "a"), "measure"] == 1.0  # one client, not three hours
    assert shared.loc[("worker", "a"), "measure"] == 2.0  # its weight, once
    assert cascade(r).gap == 0


def test_reconciliation_closes_for_every_key() -> None:
    usage = flat_usage({"a": (3, 1.5), "b": (1, 0.25), "": (2, 1.0)})
    cost = day_costs(1_000_001, 2_000_003, 77_777, hourly=False)
    for key in (None, "requests", "cpu_seconds", "even"):
        r = allocate(cost, usage, rules(TWO_POOLS), key=key)
        assert cascade(r).gap == 0, key
        assert int(r.unattributed["amount"].sum()) > 0, key  # the client-less usage
    r = allocate(day_costs(900_000, 900_000, 0, hourly=False),
                 pd.concat([flat_usage({"a": (1, 1), "b": (1, 1)})]), rules(EVEN_WEIGHTS))
    assert cascade(r).gap == 0


# --------------------------------------------------------------------------- errors


def test_coarser_usage_is_an_error_that_says_what_to_give() -> None:
    cost = day_costs(1_000_000, 0, 0, hourly=True)
    usage = hourly_usage(1, {"a": ONE}, start=NOV, service="api", hours=range(1))
    usage["window_end"] = NOV + pd.Timedelta(days=1)  # one daily usage row
    with pytest.raises(InputError) as err:
        allocate(cost, usage, rules(TWO_POOLS))
    msg = str(err.value)
    assert "usage window [2026-11-01T00:00:00+00:00, 2026-11-02T00:00:00+00:00)" in msg
    assert "(from usage.csv:row 2) is coarser than cost window" in msg
    assert "give hourly (or finer) usage, or costs with daily windows" in msg


def test_usage_crossing_a_cost_window_boundary_is_an_error() -> None:
    cost = day_costs(1_000_000, 0, 0, hourly=False)
    usage = hourly_usage(1, {"a": ONE}, start=NOV + pd.Timedelta(minutes=30),
                         service="api")
    with pytest.raises(InputError) as err:
        allocate(cost, usage, rules(TWO_POOLS))
    msg = str(err.value)
    assert "usage window [2026-11-01T23:30:00+00:00, 2026-11-02T00:30:00+00:00)" in msg
    assert "is not aligned with cost window [2026-11-01T00:00:00+00:00" in msg
    assert "never cross its boundary" in msg and "hourly usage starting on the full hour" in msg


def test_usage_from_a_gap_into_a_cost_window_is_an_error() -> None:
    cost = day_costs(1_000_000, 0, 0, hourly=False)
    usage = hourly_usage(1, {"a": ONE}, start=NOV - pd.Timedelta(hours=2),
                         service="api", hours=range(1))
    usage["window_end"] = NOV + pd.Timedelta(hours=1)
    with pytest.raises(InputError, match="is not aligned with cost window"):
        allocate(cost, usage, rules(TWO_POOLS), period=Period(NOV - pd.Timedelta(days=1),
                                                               NOV + pd.Timedelta(days=1)))


def test_overlapping_usage_windows_of_one_service_are_an_error() -> None:
    """A daily row next to hourly rows of the same day would count those hours twice."""
    cost = day_costs(1_000_000, 0, 0, hourly=False)
    hourly = hourly_usage(1, {"a": ONE}, start=NOV, service="api")
    daily = hourly_usage(1, {"b": ONE}, start=NOV, service="api", hours=range(1))
    daily["window_end"] = NOV + pd.Timedelta(days=1)
    usage = pd.concat([hourly, daily], ignore_index=True)
    with pytest.raises(InputError) as err:
        allocate(cost, usage, rules(TWO_POOLS))
    msg = str(err.value)
    assert "usage windows of service 'api' overlap" in msg
    assert "[2026-11-01T00:00:00+00:00, 2026-11-01T01:00:00+00:00)" in msg
    assert "counted twice" in msg


def test_other_services_may_use_another_window_length() -> None:
    """Hourly api usage and daily worker usage both nest in (or equal) the daily costs."""
    cost = day_costs(1_000_000, 2_000_000, 0, hourly=False)
    api = hourly_usage(1, {"a": {"requests": 1, "cpu_seconds": 0}}, start=NOV, service="api")
    worker = hourly_usage(1, {"b": {"requests": 0, "cpu_seconds": 5}}, start=NOV,
                          service="worker", hours=range(1))
    worker["window_end"] = NOV + pd.Timedelta(days=1)
    r = allocate(cost, pd.concat([api, worker], ignore_index=True), rules(TWO_POOLS))
    assert totals(r) == {"b": 2_000_000, "a": 1_000_000 + 24 * 65_000}


def _cli_case(tmp_path: Path, usage: pd.DataFrame) -> object:
    shutil.copy(SAMPLE, tmp_path / "costs.csv")
    (tmp_path / "rules.yaml").write_text(SAMPLE_RULES)
    write_usage_csv(usage, tmp_path / "usage.csv")
    return runner.invoke(app, [
        "allocate", "--config", str(tmp_path / "rules.yaml"), "--costs",
        str(tmp_path / "costs.csv"), "--usage", str(tmp_path / "usage.csv"),
    ])


def test_cli_errors_for_coarse_and_crossing_usage_exit_2(tmp_path: Path) -> None:
    two_days = hourly_usage(1, {"a": ONE}, hours=range(1))
    two_days["window_end"] = DAY + pd.Timedelta(days=2)
    crossing = hourly_usage(1, {"a": ONE}, start=DAY + pd.Timedelta(minutes=30))
    for usage, fragments in (
        (two_days, ["is coarser than cost window", "costs with 2-day windows", "row 2"]),
        # refused by the reader: 00:30-01:30 crosses an hour boundary off the hour
        (crossing, ["crosses an hour boundary", "usage.csv, row 2, column 'window_start'"]),
    ):
        result = _cli_case(tmp_path, usage)
        assert result.exit_code == 2, result.output
        err = result.stderr.strip()
        assert err.startswith("error: ") and "\n" not in err and "Traceback" not in result.output
        for fragment in fragments:
            assert fragment in err, (fragment, err)


# --------------------------------------------------------------------------- orphans, chunks


def test_hours_inside_a_cost_window_are_not_orphans() -> None:
    """Days 1 and 3 have costs, day 2 not: only day 2's 24 hourly windows have no cost."""
    cost = pd.concat([day_costs(1_000_000, 0, 0, hourly=False).assign(
        window_start=NOV + pd.Timedelta(days=d), window_end=NOV + pd.Timedelta(days=d + 1))
        for d in (0, 2)], ignore_index=True)
    usage = hourly_usage(3, {"a": ONE}, start=NOV, service="api")
    with pytest.warns(InputWarning, match=r"24 usage window\(s\) have no cost rows \(first: "
                      r"\[2026-11-02T00:00:00\+00:00, 2026-11-02T01:00:00\+00:00\) from "
                      r"usage.csv:row 26\)"):
        r = allocate(cost, usage, rules(TWO_POOLS))
    assert totals(r) == {"a": 2_000_000 + 48 * 65_000}


def test_chunks_grow_to_whole_cost_windows() -> None:
    period = Period(NOV, NOV + pd.Timedelta(days=2))
    days = pd.DataFrame({"window_start": [NOV, NOV + pd.Timedelta(days=1)],
                         "window_end": [NOV + pd.Timedelta(days=1), NOV + pd.Timedelta(days=2)]})
    assert chunk_bounds(period, pd.Timedelta(hours=6), days) == [
        (NOV, NOV + pd.Timedelta(days=1)), (NOV + pd.Timedelta(days=1), period.end)]
    assert len(chunk_bounds(period, pd.Timedelta(hours=6))) == 8  # no cost windows: as asked
    hours = pd.DataFrame({"window_start": [NOV + pd.Timedelta(hours=h) for h in range(48)],
                          "window_end": [NOV + pd.Timedelta(hours=h + 1) for h in range(48)]})
    assert len(chunk_bounds(period, pd.Timedelta(hours=6), hours)) == 8
    assert auto_chunk(10_000_000, period, budget=1_000_000, window=pd.Timedelta(days=1)) == (
        pd.Timedelta(days=1))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([1, 2, 3, 6, 24]), min_size=1, max_size=40),
    st.sampled_from(["1h", "2h", "5h", "6h", "1D", "36h"]),
)
def test_chunk_bounds_cover_the_period_and_never_cut_a_cost_window(lengths, chunk) -> None:
    """Cost windows of mixed lengths back to back: the chunks tile the period exactly, and
    no chunk bound falls strictly inside a cost window."""
    ends = NOV + pd.to_timedelta(np.cumsum(lengths), unit="h")
    starts = ends - pd.to_timedelta(lengths, unit="h")
    windows = pd.DataFrame({"window_start": starts, "window_end": ends})
    period = Period(NOV, ends[-1])
    bounds = chunk_bounds(period, pd.Timedelta(chunk), windows)
    assert bounds[0][0] == period.start and bounds[-1][1] == period.end
    assert all(a[1] == b[0] for a, b in pairwise(bounds))
    assert all(start < end for start, end in bounds)
    for _, edge in bounds[:-1]:
        assert not ((windows["window_start"] < edge) & (edge < windows["window_end"])).any()


@pytest.mark.parametrize("chunk", ["1h", "6h", "1D"])
def test_chunk_size_does_not_change_nested_figures(chunk: str) -> None:
    cost = pd.concat([day_costs(1_000_003, 2_000_001, 5, hourly=False).assign(
        window_start=NOV + pd.Timedelta(days=d), window_end=NOV + pd.Timedelta(days=d + 1))
        for d in range(3)], ignore_index=True)
    usage = pd.concat([flat_usage({"a": (3, 1.0), "b": (1, 2.0), "": (1, 0.5)}).assign(
        window_start=lambda f, d=d: f["window_start"] + pd.Timedelta(days=d),
        window_end=lambda f, d=d: f["window_end"] + pd.Timedelta(days=d)) for d in range(3)],
        ignore_index=True)
    ruleset = rules(TWO_POOLS)
    whole = allocate(cost, usage, ruleset)
    streamed = allocate_stream(cost, FrameUsage(usage), ruleset, detail="window",
                               chunk=pd.Timedelta(chunk))
    assert streamed.chunks == 3
    columns = ["window_start", "client", "kind", "source", "amount"]
    order = ["window_start", "client", "kind", "source"]
    pd.testing.assert_frame_equal(
        whole.lines.sort_values(order).reset_index(drop=True)[columns],
        streamed.lines.sort_values(order).reset_index(drop=True)[columns],
    )


# --------------------------------------------------------------------------- confidence


def test_hours_without_usage_mean_the_same_with_daily_costs() -> None:
    """Usage in 20 of 24 hours: with hourly costs 4 windows have no usage (unattributed);
    with daily costs the day is split by 20 hours' usage, and the same 4 hours are still
    hours without usage data."""
    usage = hourly_usage(1, {"a": {"requests": 3, "cpu_seconds": 0}}, start=NOV,
                         service="api", hours=range(20))
    ruleset = rules(TWO_POOLS)
    grades = []
    for hourly in (False, True):
        cost = day_costs(2_400_000, 0, 0, hourly=hourly)
        r = allocate(cost, usage, ruleset)
        figures = usage_figures(FrameUsage(usage), connect(), ruleset, r.period, cost)
        assert figures.uncovered_hours.to_dict() == ({} if hourly else {"api": 4.0})
        confidence = assess(r, key_amounts({RULE: r}), figures, ruleset, ruleset.confidence)
        grades.append(confidence["a"].missing)
        assert confidence["a"].missing_hours_by_service == {"api": 4.0}
    assert grades[0] == grades[1] and grades[0].value == 4 / 24
