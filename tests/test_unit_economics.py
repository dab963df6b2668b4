"""``tenantcost unit-economics``: golden figures computed independently, and invariants.

The golden case is one hour of a small SaaS: an API split by requests, a worker split by CPU
seconds, idle, overhead and reserve; twelve clients, ten of them in a catalog of three plans
(one catalog client without cost, one client with cost but not in the catalog). Every
expected figure is computed here from the raw inputs with :class:`fractions.Fraction` and
Python's own rounding (``round`` of a Fraction rounds half to even), without importing
tenantcost: the largest-remainder splits, the residual's proportional share, prorated
revenue, margins, percentiles by linear interpolation, price floors and concentration.
The property tests drive the pure core (``tenantcost.economics``) with hypothesis.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.config.pricing import ResidualPolicy
from tenantcost.economics import (
    GroupBy,
    MonthCosts,
    Policy,
    compute,
    concentration,
    distribution,
    project,
)
from tenantcost.windows import Period

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
M = 10**6
WINDOW = ("2026-11-03T10:00:00Z", "2026-11-03T11:00:00Z")

# --------------------------------------------------------------------------- the inputs

API_COST = Fraction("10.000000")
WORKER_COST = Fraction("3.000000")
IDLE, OVERHEAD, RESERVE = Fraction("2.5"), Fraction("0.7"), Fraction("0.3")
# client: (api requests, worker requests, worker cpu seconds)
USAGE = {
    "c01": (52000, 10, "120.5"),
    "c02": (31000, 0, "40"),
    "c03": (9000, 3, "3.3"),
    "c04": (4000, 0, "0"),
    "c05": (2500, 1, "7.7"),
    "c06": (1200, 0, "0"),
    "c07": (700, 0, "1.1"),
    "c08": (333, 0, "0"),
    "c09": (111, 0, "0"),
    "c10": (77, 0, "0.9"),
    "c11": (5000, 0, "11"),  # not in the catalog
}
# client, plan, monthly revenue, start, end (inclusive)
CATALOG = [
    ("c01", "enterprise", "900.00", "2025-01-01", ""),
    ("c02", "enterprise", "600.00", "", ""),
    ("c03", "pro", "150.00", "2026-11-11", ""),  # 20 of 30 days
    ("c04", "pro", "120.00", "", "2026-11-20"),  # 20 days
    ("c05", "pro", "99.99", "", ""),
    ("c06", "pro", "", "", ""),  # revenue unknown
    ("c07", "free", "0", "", ""),
    ("c08", "free", "0", "", ""),
    ("c09", "free", "0", "", ""),
    ("c10", "free", "0.5", "", ""),
    ("c12", "pro", "50.00", "", ""),  # a contract, no cost this month
    ("c13", "pro", "70.00", "2026-01-01", "2026-10-31"),  # ended: not in November
]
TARGET = Fraction(3, 4)
FLOOR = Fraction(1, 2)
DAYS = 30


def write_inputs(folder: Path) -> Path:
    """Costs, usage, catalog and a rule file with a ``pricing:`` section."""
    rows = [
        ("saas", "deployment", "api", "", "10.000000"),
        ("saas", "deployment", "worker", "", "3.000000"),
        ("", "", "", "__idle__", "2.5"),
        ("ingress", "deployment", "edge-proxy", "", "0.7"),
        ("saas", "deployment", "capacity-reserve", "", "0.3"),
    ]
    head = "window_start,window_end,cluster,namespace,controller_kind,controller,name,total_cost\n"
    body = "".join(f"{WINDOW[0]},{WINDOW[1]},one,{ns},{kind},{ctl},{name},{cost}\n"
                   for ns, kind, ctl, name, cost in rows)  # fmt: skip
    (folder / "costs.csv").write_text(head + body)
    usage = ["window_start,window_end,service,client,requests,cpu_seconds"]
    for client, (api, worker_requests, cpu) in USAGE.items():
        usage.append(f"{WINDOW[0]},{WINDOW[1]},api,{client},{api},1")
        usage.append(f"{WINDOW[0]},{WINDOW[1]},worker,{client},{worker_requests},{cpu}")
    (folder / "usage.csv").write_text("\n".join(usage) + "\n")
    catalog = ["client,plan,monthly_revenue,start,end"]
    catalog += [",".join(row) for row in CATALOG]
    (folder / "catalog.csv").write_text("\n".join(catalog) + "\n")
    (folder / "rules.yaml").write_text(
        """currency: USD
sources: {costs: [costs.csv], usage: [usage.csv]}
rules:
  - id: r1
    effective_from: "2026-11-01"
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: requests}
      - {match: {controller: worker}, class: shared, service: worker, key: cpu_seconds}
      - {match: {controller: edge-proxy}, class: overhead}
      - {match: {controller: capacity-reserve}, class: reserve}
      - {match: {name: __idle__}, class: idle}
pricing:
  residual: proportional
  margin_floor: 0.5
  target_margin: 0.6
"""
    )
    return folder / "rules.yaml"


# --------------------------------------------------------------------------- expected figures


def largest_remainder(parent: int, weights: dict[str, Fraction]) -> dict[str, int]:
    """floor(P w / W), then one unit each to the largest remainders, ties by name."""
    total = sum(weights.values())
    exact = {k: Fraction(parent) * w / total for k, w in weights.items() if w > 0}
    parts = {k: math.floor(v) for k, v in exact.items()}
    left = parent - sum(parts.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - parts[k]), k))[:left]:
        parts[k] += 1
    return {k: parts.get(k, 0) for k in weights}


def percentile(values: list[int], q: Fraction) -> int:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    exact = ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    return round(exact)


def expected() -> dict[str, object]:
    api = largest_remainder(int(API_COST * M), {c: Fraction(u[0]) for c, u in USAGE.items()})
    cpu = {c: Fraction(u[2]) for c, u in USAGE.items()}
    worker = largest_remainder(int(WORKER_COST * M), cpu)
    cost = {c: api[c] + worker[c] for c in USAGE}
    residual = int((IDLE + OVERHEAD + RESERVE) * M)
    share = largest_remainder(residual, {c: Fraction(v) for c, v in cost.items()})
    all_in = {c: cost[c] + share[c] for c in cost}
    requests = {c: u[0] + u[1] for c, u in USAGE.items()}
    return {"cost": cost, "all_in": all_in, "requests": requests, "residual": residual}


def active_days(start: str, end: str) -> int:
    first = max(pd.Timestamp(start or "2026-11-01"), pd.Timestamp("2026-11-01"))
    last = min(pd.Timestamp(end or "2026-11-30"), pd.Timestamp("2026-11-30"))
    return max((last - first).days + 1, 0)


def revenue_of(row: tuple[str, ...]) -> int | None:
    if row[2] == "":
        return None
    return round(Fraction(row[2]) * M * active_days(row[3], row[4]) / DAYS)


# --------------------------------------------------------------------------- golden test


def run_json(rules: Path, *extra: str) -> dict[str, object]:
    result = runner.invoke(
        app,
        ["unit-economics", "--config", str(rules), "--catalog", str(rules.parent / "catalog.csv"),
         "--month", "2026-11", "--format", "json", *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    rules = write_inputs(tmp_path_factory.mktemp("golden"))
    return rules, run_json(rules, "--as-of", "2026-12-01", "--target-margin", "0.75")


def close(value: float | None, exact: Fraction) -> bool:
    return value is not None and abs(value - float(exact)) <= 2e-9


def test_document_states_its_money_like_allocate(golden):
    rules, doc = golden
    allocate = runner.invoke(app, ["allocate", "--config", str(rules), "--format", "json"])
    assert doc["money"] == json.loads(allocate.stdout)["money"]
    assert doc["month"] == "2026-11"
    assert set(doc) >= {"money", "month", "plans", "clients", "concentration", "not_in_catalog"}


def test_clients_golden(golden):
    _, doc = golden
    exp = expected()
    clients = {c["client"]: c for c in doc["clients"]}
    assert set(clients) == set(USAGE) | {"c12"}  # c13's contract ended; c11 is kept
    catalog = {row[0]: row for row in CATALOG}
    for client, row in clients.items():
        cost = exp["cost"].get(client, 0)
        all_in = exp["all_in"].get(client, 0)
        assert (row["cost"], row["all_in_cost"]) == (cost, all_in), client
        revenue = revenue_of(catalog[client]) if client in catalog else None
        assert row["revenue"] == revenue, client
        if revenue is None:
            assert row["margin"] is None and row["margin_pct"] is None
            continue
        assert row["margin"] == revenue - all_in
        if revenue:
            assert close(row["margin_pct"], Fraction(revenue - all_in, revenue)), client
    floor = sorted(
        c
        for c, r in clients.items()
        if r["revenue"] is not None
        and r["margin"] * FLOOR.denominator < FLOOR.numerator * r["revenue"]
    )
    assert doc["under_margin_floor"] == floor
    assert "c07" in floor and "c01" not in floor  # a free plan has no margin to speak of


def test_residual_and_not_in_catalog(golden):
    _, doc = golden
    exp = expected()
    assert doc["residual"] == {"amount": exp["residual"], "distributed": exp["residual"],
                               "undistributed": 0}  # fmt: skip
    assert doc["not_in_catalog"] == [
        {"client": "c11", "cost": exp["cost"]["c11"], "all_in_cost": exp["all_in"]["c11"]}
    ]
    assert doc["totals"]["all_in_cost"] == sum(exp["cost"].values()) + exp["residual"]


def test_plans_golden(golden):
    _, doc = golden
    exp = expected()
    plans = {p["plan"]: p for p in doc["plans"]}
    assert sorted(plans) == ["enterprise", "free", "pro"]
    for plan, row in plans.items():
        members = [r for r in CATALOG if r[1] == plan and r[0] in USAGE]
        costs = [exp["cost"][r[0]] for r in members]
        all_in = [exp["all_in"][r[0]] for r in members]
        assert row["clients"] == len(members)
        assert row["cost"] == sum(costs) and row["all_in_cost"] == sum(all_in)
        assert row["cost_per_client"] == {
            "mean": round(Fraction(sum(costs), len(costs))),
            "p50": percentile(costs, Fraction(1, 2)),
            "p90": percentile(costs, Fraction(9, 10)),
            "max": max(costs),
        }, plan
        revenues = [revenue_of(r) for r in CATALOG if r[1] == plan and active_days(r[3], r[4])]
        revenue = sum(v for v in revenues if v is not None)
        assert row["revenue"] == revenue and row["margin"] == revenue - sum(all_in)
        if revenue:
            assert close(row["margin_pct"], Fraction(revenue - sum(all_in), revenue))
        requests = sum(exp["requests"][r[0]] for r in members)
        keep = 1 - TARGET
        assert row["price_floor"]["per_client"] == round(Fraction(sum(all_in), len(all_in)) / keep)
        assert row["price_floor"]["per_1000_requests"] == round(
            Fraction(sum(all_in)) * 1000 / requests / keep
        )


def test_concentration_golden(golden):
    _, doc = golden
    costs = sorted(expected()["cost"].values())
    n, total = len(costs), sum(costs)
    gini = Fraction(2 * sum(i * x for i, x in enumerate(costs, 1)) - (n + 1) * total, n * total)
    top1 = Fraction(sum(costs[-math.ceil(n / 100) :]), total)
    top10 = Fraction(sum(costs[-math.ceil(n / 10) :]), total)
    got = doc["concentration"]
    assert got["clients"] == 11 and got["top_10pct_clients"] == 2
    assert close(got["gini"], gini) and close(got["top_1pct"], top1)
    assert close(got["top_10pct"], top10)


def test_unit_costs_are_own_amount_over_own_measure(golden):
    _, doc = golden
    exp_api = largest_remainder(int(API_COST * M), {c: Fraction(u[0]) for c, u in USAGE.items()})
    c01 = next(c for c in doc["clients"] if c["client"] == "c01")
    api = next(u for u in c01["unit_costs"] if u["source"] == "api")
    assert api["per"] == "per 1,000 requests"
    assert api["unit_cost"] == round(Fraction(exp_api["c01"]) * 1000 / USAGE["c01"][0])
    enterprise = next(p for p in doc["plans"] if p["plan"] == "enterprise")
    worker = next(u for u in enterprise["unit_costs"] if u["source"] == "worker")
    cpu = Fraction(USAGE["c01"][2]) + Fraction(USAGE["c02"][2])
    assert worker["per"] == "per CPU-hour"
    assert worker["measure"] == float(cpu)
    assert abs(worker["unit_cost"] - Fraction(worker["amount"]) * 3600 / cpu) <= Fraction(1, 2)


def test_month_in_progress_is_projected(golden):
    rules, _ = golden
    doc = run_json(rules, "--as-of", "2026-11-03T12:00:00Z")
    projection = doc["projection"]
    assert projection["hours_covered"] == 1.0 and projection["hours_in_month"] == 720.0
    assert projection["method"].startswith("run rate")
    exp = expected()
    c01 = next(c for c in projection["clients"] if c["client"] == "c01")
    assert c01["all_in_cost"] == exp["all_in"]["c01"] * 720  # one hour covered: exact
    assert doc["pricing"]["target_margin"] == 0.6  # the rule file's, without --target-margin


def test_month_not_started_is_refused(golden):
    rules, _ = golden
    result = runner.invoke(
        app,
        ["unit-economics", "--config", str(rules), "--catalog", str(rules.parent / "catalog.csv"),
         "--month", "2026-11", "--as-of", "2026-10-31T00:00:00Z"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --as-of 2026-10-31T00:00:00+00:00 is before")


def test_segment_grouping_and_other_formats(golden, tmp_path):
    rules, _ = golden
    catalog = rules.parent / "catalog.csv"
    base = ["unit-economics", "--config", str(rules), "--catalog", str(catalog),
            "--month", "2026-11", "--as-of", "2026-12-01"]  # fmt: skip
    doc = json.loads(runner.invoke(app, [*base, "--by", "segment", "--format", "json"]).stdout)
    assert doc["by"] == "segment" and [s["segment"] for s in doc["segments"]] == [None]
    csv = runner.invoke(app, [*base, "--format", "csv"])
    assert csv.exit_code == 0 and csv.stdout.splitlines()[0].startswith("client,name,plan")
    table = runner.invoke(app, [*base, "--out", str(tmp_path / "out")])
    assert table.exit_code == 0 and "price floor per client (60 % margin)" in table.stdout
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["clients.csv", "plans.csv", "unit_costs.csv", "unit_economics.html",
                       "unit_economics.json"]  # fmt: skip
    page = (tmp_path / "out" / "unit_economics.html").read_text()
    # strip plot: catalog clients with cost (10); scatter: clients with revenue (9 + c12)
    assert page.count('class="dot"') == 10 + 10
    assert "not in catalog" in page


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--target-margin", "1"], "--target-margin: expected a fraction"),
        (["--by", "region"], "--by: expected plan or segment, got 'region'"),
        (["--format", "xml"], "--format: expected one of table, json, csv, html"),
    ],
)
def test_bad_options(golden, args, fragment):
    rules, _ = golden
    result = runner.invoke(
        app,
        ["unit-economics", "--config", str(rules), "--catalog", str(rules.parent / "catalog.csv"),
         "--month", "2026-11", *args],
    )  # fmt: skip
    assert result.exit_code == 2 and fragment in result.stderr


def test_month_is_required(golden):
    rules, _ = golden
    result = runner.invoke(
        app, ["unit-economics", "--config", str(rules), "--catalog", str(rules.parent / "c.csv")]
    )
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == "error: unit-economics needs --month YYYY-MM (the month to price)"
    )


# --------------------------------------------------------------------------- properties

MONTH = Period.month("2026-11")
CLIENT_IDS = [f"k{i:02d}" for i in range(40)]


@st.composite
def month_and_catalog(draw: st.DrawFn) -> tuple[MonthCosts, pd.DataFrame]:
    chosen = draw(st.lists(st.sampled_from(CLIENT_IDS), min_size=0, max_size=25, unique=True))
    costs = draw(st.lists(st.integers(0, 10**12), min_size=len(chosen), max_size=len(chosen)))
    in_catalog = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    plans = draw(st.lists(st.sampled_from(["a", "b", ""]), min_size=len(chosen),
                          max_size=len(chosen)))  # fmt: skip
    revenue = draw(st.lists(st.integers(0, 10**12), min_size=len(chosen), max_size=len(chosen)))
    frame = pd.DataFrame({"client": chosen, "cost": np.array(costs, dtype="int64")})
    month = MonthCosts(
        month=MONTH,
        currency="USD",
        costs=frame.loc[frame["cost"] > 0].reset_index(drop=True),
        lines=pd.DataFrame(columns=["client", "kind", "source", "key", "measure", "amount"]),
        requests=pd.DataFrame({"client": chosen, "requests": [1000.0] * len(chosen)}),
        residual=draw(st.integers(0, 10**13)),
        hours_covered=draw(st.sampled_from([1.0, 24.0, 720.0])),
    )
    keep = np.array(in_catalog, dtype=bool)
    catalog = pd.DataFrame(
        {
            "client": pd.Series(chosen, dtype="str")[keep],
            "name": "",
            "plan": pd.Series(plans, dtype="str")[keep],
            "segment": "s",
            "account_manager": "",
            "currency": "USD",
            "has_revenue": True,
            "monthly_revenue": np.array(revenue, dtype="int64")[keep],
            "start": pd.NaT,
            "end": pd.NaT,
        }
    ).reset_index(drop=True)
    catalog[["start", "end"]] = catalog[["start", "end"]].astype("datetime64[ns]")
    return month, catalog


POLICIES = st.sampled_from(list(ResidualPolicy))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(month_and_catalog(), POLICIES)
def test_all_in_is_attributed_plus_distributed_residual(data, residual_policy):
    month, catalog = data
    result = compute(month, catalog, Policy(residual_policy, Fraction(7, 10)))
    clients = result.clients
    assert int(clients["all_in_cost"].sum()) == int(month.costs["cost"].sum()) + result.distributed
    with_cost = bool((month.costs["cost"] > 0).any())
    if residual_policy == ResidualPolicy.NONE or not with_cost:
        assert result.distributed == 0
    else:
        assert result.distributed == month.residual
    assert (clients["residual_share"] >= 0).all()
    # Never dropped: every client with cost is a row, in the catalog or listed as not.
    assert set(month.costs["client"]) <= set(clients["client"])
    assert set(result.not_in_catalog) == set(month.costs["client"]) - set(catalog["client"])
    gini = result.concentration["gini"]
    assert gini is None or 0 <= gini <= 1
    for top in ("top_1pct", "top_10pct"):
        share = result.concentration[top]
        assert share is None or 0 < share <= 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(month_and_catalog(), POLICIES, st.randoms(use_true_random=False))
def test_order_independence(data, residual_policy, rnd):
    month, catalog = data
    policy = Policy(residual_policy, Fraction(7, 10), Fraction(1, 3), GroupBy.PLAN)
    first = compute(month, catalog, policy)
    order = list(range(len(month.costs)))
    rnd.shuffle(order)
    cat_order = list(range(len(catalog)))
    rnd.shuffle(cat_order)
    shuffled = MonthCosts(**{**month.__dict__, "costs": month.costs.iloc[order]})
    second = compute(shuffled, catalog.iloc[cat_order].reset_index(drop=True), policy)
    columns = ["client", "cost", "residual_share", "all_in_cost", "revenue", "margin"]
    a = first.clients[columns].sort_values("client").reset_index(drop=True)
    b = second.clients[columns].sort_values("client").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(first.groups, second.groups)
    assert first.concentration == second.concentration


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("xyz"), st.integers(0, 10**15)), min_size=1, max_size=40))
def test_percentiles_match_numpy_linear(pairs):
    groups = pd.Series([g for g, _ in pairs])
    values = pd.Series([v for _, v in pairs], dtype="int64")
    stats = distribution(groups, values)
    for group in stats.index:  # a few groups: the reference is numpy per group
        mine = values[groups == group].to_numpy()
        exact = [Fraction(int(v)) for v in mine]
        assert stats.loc[group, "p50"] == percentile([int(v) for v in exact], Fraction(1, 2))
        assert stats.loc[group, "p90"] == percentile([int(v) for v in exact], Fraction(9, 10))
        assert abs(stats.loc[group, "p90"] - np.percentile(mine, 90)) <= 1 + 1e-6 * mine.max()
        assert stats.loc[group, "max"] == mine.max()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 10**15), min_size=1, max_size=60))
def test_gini_bounds(costs):
    result = concentration(np.array(costs, dtype="int64"))
    assert 0 <= result["gini"] <= (len(costs) - 1) / len(costs) + 1e-9
    if len(set(costs)) == 1:
        assert result["gini"] == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(month_and_catalog(), POLICIES)
def test_projection_scales_by_run_rate(data, residual_policy):
    month, catalog = data
    result = compute(month, catalog, Policy(residual_policy, Fraction(7, 10)))
    projection = project(result, pd.Timestamp("2026-11-15T00:00:00Z"))
    assert projection is not None
    factor = Fraction(720) / Fraction(month.hours_covered)
    for got, base in zip(projection.clients["all_in_cost"], result.clients["all_in_cost"],
                         strict=True):  # fmt: skip
        assert got == round(Fraction(int(base)) * factor)
    assert project(result, pd.Timestamp("2026-12-01T00:00:00Z")) is None


# --------------------------------------------------------------------------- report --catalog


def test_report_catalog_adds_the_finance_page_only(tmp_path):
    example = ROOT / "examples" / "saas-three-clients"
    base = ["report", "--config", str(example / "rules.yaml"), "--month", "2026-11",
            "--format", "html", "--generated-at", "2026-11-03T11:00:00Z"]  # fmt: skip
    plain = runner.invoke(app, [*base, "--out", str(tmp_path / "plain")])
    assert plain.exit_code == 0, plain.output
    with_catalog = runner.invoke(
        app,
        [*base, "--out", str(tmp_path / "fin"), "--catalog", str(example / "catalog.csv")],
    )
    assert with_catalog.exit_code == 0, with_catalog.output
    page = (tmp_path / "fin" / "unit-economics.html").read_text()
    assert page.count('class="point-label"') == 3  # clients labelled on the finance page
    assert "Projection: the month is in progress" in page  # --generated-at is the as-of
    index = (tmp_path / "fin" / "index.html").read_text()
    assert '<a href="unit-economics.html">HTML</a>' in index
    assert "unit-economics" not in (tmp_path / "plain" / "index.html").read_text()
    names = {"client-a": "Acme Analytics", "client-b": "Bolt Imports", "client-c": "Cobalt Labs"}
    for sheet in (tmp_path / "fin" / "clients").iterdir():
        # The figures are unchanged; the catalog only names the client (issue 36 §8).
        client, name = sheet.stem, names[sheet.stem]
        plain_sheet = (tmp_path / "plain" / "clients" / sheet.name).read_text()
        expected_sheet = (
            plain_sheet.replace(str(tmp_path / "plain"), str(tmp_path / "fin"))
            .replace(f"<title>Cost sheet {client},", f"<title>Cost sheet {name} ({client}),")
            .replace(f"<h1>Cost sheet: {client}</h1>", f"<h1>Cost sheet: {name} ({client})</h1>")
            .replace(f"<strong>{client}</strong></dd>", f"<strong>{client}</strong> ({name})</dd>")
        )
        assert sheet.read_text() == expected_sheet


# --------------------------------------------------------------------------- the store


def _store_cli(*args: str) -> object:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_from_db_gives_the_figures_of_the_files(store_url: str, tmp_path: Path) -> None:
    """Rules, inputs and the catalog loaded into a store (SQLite and PostgreSQL), the month
    run: ``--from-db`` gives the document ``unit-economics`` gives on the files."""
    rules = write_inputs(tmp_path)
    where = ["--db", store_url, "--data", str(tmp_path / "data")]
    _store_cli("db", "upgrade", *where)
    _store_cli("rules", "load", str(rules), *where)
    _store_cli("ingest", "usage", "--usage", str(tmp_path / "usage.csv"), *where)
    _store_cli("ingest", "costs", "--costs", str(tmp_path / "costs.csv"), *where)
    loaded = runner.invoke(app, ["catalog", "load", str(tmp_path / "catalog.csv"), *where])
    assert loaded.exit_code == 0, loaded.output
    assert "stored as the store's catalog, 12 clients (load 1," in loaded.stdout
    again = runner.invoke(app, ["catalog", "load", str(tmp_path / "catalog.csv"), *where])
    assert "already the store's catalog" in again.stdout
    options = ["--month", "2026-11", "--as-of", "2026-12-01", "--format", "json"]
    missing = runner.invoke(app, ["unit-economics", "--from-db", *options, *where])
    assert missing.exit_code == 2
    assert "2026-11 has no run in the store: `tenantcost run --month 2026-11` first" in (
        missing.stderr
    )
    _store_cli("run", "--month", "2026-11", *where)
    stored = json.loads(_store_cli("unit-economics", "--from-db", *options, *where).stdout)
    files = run_json(rules, "--as-of", "2026-12-01")
    assert stored == files
    refused = runner.invoke(
        app, ["unit-economics", "--from-db", "--config", str(rules), *options, *where]
    )
    assert refused.exit_code == 2
    assert "--from-db reads the stored run: leave out --config" in refused.stderr
