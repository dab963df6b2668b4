"""Numbers near every limit of ``tenantcost.limits``: exact below, one clear line above.

Below a limit a split must conserve its pool to the micro-unit, give every client exactly
``floor(P * w / W)`` or one more (the largest exact remainders, ties by client name) and not
depend on row order; above it, each reader refuses the value with one line naming the file,
the row (or JSON path) and the column, and the CLI exits 2 without a traceback.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.errors import InputError
from tenantcost.limits import (
    MAX_AMOUNT_TOTAL,
    MAX_COST_PER_ROW,
    MAX_MICROS_PER_ROW,
    MAX_POOL_MEASURE,
    MAX_USAGE_VALUE,
)
from tenantcost.money import checked_sum, checked_total, running_total, to_micros
from tenantcost.readers.costs import read_costs
from tenantcost.readers.usage import read_usage
from tenantcost.split import MEASURE_SCALE, SplitTables, connect, run_split

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
T0 = pd.Timestamp("2026-11-01T00:00:00Z")
SLOW = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# --------------------------------------------------------------------------- the split


def exact_split(parent: int, weights: dict[str, int]) -> dict[str, int]:
    """The rule in plain integers: floors, then leftover units to the largest remainders."""
    recipients = {c: w for c, w in weights.items() if w > 0}
    total = sum(recipients.values())
    base = {c: parent * w // total for c, w in recipients.items()}
    rest = {c: parent * w % total for c, w in recipients.items()}
    leftover = parent - sum(base.values())
    for client in sorted(recipients, key=lambda c: (-rest[c], c))[:leftover]:
        base[client] += 1
    return base


def quantised(value: float) -> int:
    """A usage value as the engine's measure: round_half_even(value * 10^6) of the double."""
    return int(np.rint(np.float64(value) * MEASURE_SCALE))


def engine_split(
    pools: list[tuple[int, list[tuple[str, float]]]], seed: int = 0
) -> dict[tuple[int, str], int]:
    """Run the DuckDB split on pools of (amount, [(client, usage value)]), rows shuffled."""
    pool_rows, usage_rows = [], []
    for i, (parent, recipients) in enumerate(pools):
        start, end = T0 + pd.Timedelta(hours=i), T0 + pd.Timedelta(hours=i + 1)
        pool_rows.append((i, start, end, 0, parent, "v", "api", "shared", "requests"))
        usage_rows += [(start, end, "api", c, float(u), f"row {len(usage_rows)}") for c, u in
                       recipients]
    usage = pd.DataFrame(usage_rows, columns=["window_start", "window_end", "service", "client",
                                              "requests", "origin"])
    usage = usage.sample(frac=1, random_state=seed).reset_index(drop=True)
    empty_time = pd.Series([], dtype="datetime64[ns, UTC]")
    tables = SplitTables(
        pools=pd.DataFrame(pool_rows, columns=["pool", "window_start", "window_end", "spec",
                                               "amount", "rule_id", "source", "kind", "key"]),
        specs=pd.DataFrame([(0, "column", "requests", "sum")],
                           columns=["spec", "key_kind", "key_column", "agg"]),
        spec_services=pd.DataFrame([(0, "api")], columns=["spec", "service"]),
        spec_weights=pd.DataFrame({"spec": pd.Series([], dtype="int64"),
                                   "client": pd.Series([], dtype="str"),
                                   "weight": pd.Series([], dtype="int64")}),
        direct=pd.DataFrame({"window_start": empty_time, "window_end": empty_time,
                             "client": pd.Series([], dtype="str"),
                             "amount": pd.Series([], dtype="int64")}),
        idle_pools=pd.DataFrame({"pool": pd.Series([], dtype="int64"),
                                 "window_start": empty_time, "window_end": empty_time,
                                 "amount": pd.Series([], dtype="int64"),
                                 "rule_id": pd.Series([], dtype="str"),
                                 "method": pd.Series([], dtype="str")}),
    )
    con = connect()
    con.register("u", usage)
    run_split(con, tables, "SELECT * FROM u", ["requests"])
    rows = con.execute("SELECT k.pool, c.client, k.amount FROM keyed k "
                       "JOIN t_clients c ON c.cid = k.client").fetchall()
    return {(int(p), str(c)): int(a) for p, c, a in rows}


near_top_amount = st.one_of(
    st.integers(min_value=MAX_AMOUNT_TOTAL - 10**6, max_value=MAX_AMOUNT_TOTAL),
    st.integers(min_value=10**11, max_value=10**13),  # a million currency units a window
    st.integers(min_value=0, max_value=MAX_AMOUNT_TOTAL),
)
near_top_usage = st.one_of(
    st.integers(min_value=int(MAX_USAGE_VALUE) - 10**6, max_value=int(MAX_USAGE_VALUE)),
    st.integers(min_value=0, max_value=int(MAX_USAGE_VALUE)),
    st.integers(min_value=0, max_value=64 * 10**6).map(lambda m: m / 64),  # exact fractions
)
pool_strategy = st.tuples(
    near_top_amount,
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f", ""]), near_top_usage),
             min_size=1, max_size=7, unique_by=lambda t: t[0]),
)


@SLOW
@given(pools=st.lists(pool_strategy, min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_split_near_the_limits_is_exact_conserving_and_order_free(pools, seed):
    got = engine_split(pools, seed=seed)
    assert got == engine_split(pools, seed=seed + 1), "the result depends on row order"
    for i, (parent, recipients) in enumerate(pools):
        weights = {c: quantised(u) for c, u in recipients}
        parts = {c: a for (p, c), a in got.items() if p == i}
        if sum(weights.values()) == 0:
            assert not parts
            continue
        assert parts == exact_split(parent, weights)
        assert sum(parts.values()) == parent


def test_largest_pool_with_largest_measures_is_exact():
    """P at MAX_AMOUNT_TOTAL over a million-row-sized measure total: 128-bit steps suffice."""
    top = int(MAX_USAGE_VALUE)
    recipients = [("a", top), ("b", top - 1), ("c", 1 / 64), ("d", 3)]
    got = engine_split([(MAX_AMOUNT_TOTAL, recipients), (MAX_AMOUNT_TOTAL - 1, recipients)])
    for pool, parent in enumerate((MAX_AMOUNT_TOTAL, MAX_AMOUNT_TOTAL - 1)):
        parts = {c: a for (p, c), a in got.items() if p == pool}
        assert parts == exact_split(parent, {c: quantised(u) for c, u in recipients})


def test_ties_go_to_the_client_name_first_in_order():
    # Three equal weights: 10 units = 3 + 3 + 3, the leftover unit to 'a' whatever the order.
    got = engine_split([(10, [("c", 5.0), ("a", 5.0), ("b", 5.0)])], seed=7)
    assert got == {(0, "a"): 4, (0, "b"): 3, (0, "c"): 3}


def test_a_float_ratio_moves_micro_units_where_the_exact_split_does_not():
    """Why the split is in integers: ``P * (w / W)`` in doubles errs by more than a unit once
    ``P`` passes 2^53 micro-units (9e9 currency units), and can misorder remainders below."""
    parent, weights = MAX_AMOUNT_TOTAL - 1, {"a": 1, "b": 2}
    exact = exact_split(parent, weights)
    floats = {c: int(np.floor(parent * (w / 3))) for c, w in weights.items()}
    assert floats != {c: parent * w // 3 for c, w in weights.items()}
    got = engine_split([(parent, [("a", 1e-6), ("b", 2e-6)])])
    assert {c: a for (_, c), a in got.items()} == exact


def test_a_pool_measure_beyond_its_limit_is_an_input_error():
    value = MAX_POOL_MEASURE / MEASURE_SCALE  # one row: 1e21 units, past what readers allow
    with pytest.raises(InputError, match="beyond the 1e21 one split holds exactly") as info:
        engine_split([(10**6, [("a", value), ("b", value)])])
    assert info.value.column == "requests"


# --------------------------------------------------------------------------- money


@given(st.integers(min_value=-MAX_MICROS_PER_ROW, max_value=MAX_MICROS_PER_ROW))
def test_six_decimal_amounts_convert_exactly_up_to_the_row_limit(micros):
    text = f"{'-' if micros < 0 else ''}{abs(micros) // 10**6}.{abs(micros) % 10**6:06d}"
    assert int(to_micros(float(text))) == micros


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, MAX_COST_PER_ROW * 1.000001, 1e19])
def test_to_micros_refuses_what_it_cannot_hold(value):
    origins = ["costs.csv:row 2", "costs.csv:row 3"]
    with pytest.raises(InputError) as info:
        to_micros(pd.Series([1.0, value]), origins=origins, column="total_cost")
    assert (info.value.file, info.value.where, info.value.column) == (
        "costs.csv", "row 3", "total_cost")


@given(st.lists(st.integers(0, MAX_MICROS_PER_ROW), min_size=1, max_size=50))
def test_running_total_is_exact_below_and_names_the_row_above(values):
    assert running_total(np.array(values)) == sum(values)
    filler = [MAX_MICROS_PER_ROW] * (MAX_AMOUNT_TOTAL // MAX_MICROS_PER_ROW)  # exactly at limit
    assert running_total(np.array(filler)) == MAX_AMOUNT_TOTAL
    origins = [f"c.csv:row {i + 2}" for i in range(len(filler) + len(values))]
    if sum(values) == 0:
        return
    with pytest.raises(InputError, match="add up to more than") as info:
        running_total(np.array(filler + values), origins=origins, column="total_cost")
    first = next(i for i, v in enumerate(values) if v)
    assert info.value.where == f"row {len(filler) + first + 2}"


@given(st.lists(st.integers(-(2**63) + 1, 2**63 - 1), max_size=40))
def test_checked_sum_never_wraps(values):
    assert checked_sum(np.array(values, dtype="int64")) == sum(values)


def test_checked_total_refuses_totals_past_the_limit():
    assert checked_total(np.array([MAX_AMOUNT_TOTAL]), "costs") == MAX_AMOUNT_TOTAL
    with pytest.raises(InputError, match="external costs of the period"):
        checked_total(np.array([MAX_AMOUNT_TOTAL, 1]), "external costs")


# --------------------------------------------------------------------------- readers


def usage_csv(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "usage.csv"
    path.write_text("window_start,window_end,service,client,requests\n"
                    "2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,api,a,1\n"
                    f"2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,api,b,{value}\n")
    return path


@given(st.floats(min_value=MAX_USAGE_VALUE / 2, max_value=MAX_USAGE_VALUE))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
def test_usage_up_to_the_limit_is_read_as_written(tmp_path, value):
    usage = read_usage([usage_csv(tmp_path, repr(value))])
    assert usage["requests"].tolist() == [1.0, value]


@given(st.floats(min_value=MAX_USAGE_VALUE, exclude_min=True, max_value=1e300))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
def test_usage_past_the_limit_is_one_line_naming_the_cell(tmp_path, value):
    with pytest.raises(InputError, match="beyond what tenantcost holds exactly") as info:
        read_usage([usage_csv(tmp_path, repr(value))])
    assert (info.value.where, info.value.column) == ("row 3", "requests")
    assert "\n" not in str(info.value)


def test_parquet_usage_past_the_limit_names_file_row_and_column(tmp_path):
    from tenantcost.usage_source import open_usage

    frame = pd.DataFrame({
        "window_start": [T0, T0], "window_end": [T0 + pd.Timedelta(hours=1)] * 2,
        "service": ["api", "api"], "client": ["a", "b"],
        "requests": [MAX_USAGE_VALUE, np.nextafter(MAX_USAGE_VALUE, np.inf)],
    })
    path = tmp_path / "usage.parquet"
    frame.to_parquet(path)
    con = connect()
    source = open_usage([str(path)], con)
    with pytest.raises(InputError, match="beyond what tenantcost holds exactly") as info:
        source.materialise(con, T0, T0 + pd.Timedelta(days=1))
    assert (info.value.where, info.value.column) == ("row 2", "requests")
    assert str(info.value.file).endswith("usage.parquet")


def canonical_costs(tmp_path: Path, *totals: str) -> Path:
    path = tmp_path / "costs.csv"
    rows = "".join(f"2026-11-01T00:00:00Z,2026-11-01T01:00:00Z,c,ns,Deployment,w{i},{t}\n"
                   for i, t in enumerate(totals))
    path.write_text("window_start,window_end,cluster,namespace,controller_kind,controller,"
                    "total_cost\n" + rows)
    return path


def test_canonical_cost_at_the_row_limit_is_exact_and_one_micro_more_is_refused(tmp_path):
    costs = read_costs([canonical_costs(tmp_path, "1", "1000000000.000000")])
    assert to_micros(costs["total_cost"]).tolist() == [10**6, MAX_MICROS_PER_ROW]
    with pytest.raises(InputError, match="beyond what tenantcost holds exactly") as info:
        read_costs([canonical_costs(tmp_path, "1", "1000000000.000001")])
    assert (info.value.where, info.value.column) == ("row 3", "total_cost")


def test_canonical_costs_whose_total_passes_the_limit_name_the_row(tmp_path):
    at_limit = ["1000000000"] * (MAX_AMOUNT_TOTAL // MAX_MICROS_PER_ROW)
    assert len(read_costs([canonical_costs(tmp_path, *at_limit)])) == len(at_limit)
    with pytest.raises(InputError, match="add up to more than 1,000,000,000,000") as info:
        read_costs([canonical_costs(tmp_path, *at_limit, "0", "0.000001")])
    assert (info.value.where, info.value.column) == (f"row {len(at_limit) + 3}", "total_cost")


def opencost_json(tmp_path: Path, total: object, cpu: object = 0.01) -> Path:
    allocation = {"name": "saas/api", "start": "2026-11-01T00:00:00Z",
                  "end": "2026-11-01T01:00:00Z", "properties": {"namespace": "saas"},
                  "cpuCost": cpu, "totalCost": total}
    path = tmp_path / "costs.json"
    path.write_text(json.dumps({"code": 200, "data": [{"saas/api": allocation}]}))
    return path


@pytest.mark.parametrize(
    ("total", "cpu", "field"),
    [(1e19, 0.01, "totalCost"), (1000000000.000001, 0.01, "totalCost"),
     (1.0, 1e12, "cpuCost"), (1.0, 10**400, "cpuCost")],
)
def test_opencost_json_beyond_the_limit_names_the_json_path(tmp_path, total, cpu, field):
    with pytest.raises(InputError, match="beyond what tenantcost holds exactly") as info:
        read_costs([opencost_json(tmp_path, total, cpu)])
    assert info.value.where == f"data[0]['saas/api'].{field}"


def test_opencost_json_at_the_limit_is_read(tmp_path):
    costs = read_costs([opencost_json(tmp_path, float(MAX_COST_PER_ROW))])
    assert to_micros(costs["total_cost"]).tolist() == [MAX_MICROS_PER_ROW]


@pytest.mark.parametrize(("column", "value"), [("TotalCost", "1e19"), ("CPUCost", "inf"),
                                               ("RAMCost", "-2000000000")])
def test_opencost_csv_beyond_the_limit_names_row_and_column(tmp_path, column, value):
    cells = {"Date": "2026-11-01", "Namespace": "saas", "ControllerKind": "deployment",
             "ControllerName": "api", "Pod": "api-1", "Container": "api", "CPUCost": "0.1",
             "RAMCost": "0.1", "TotalCost": "0.2"}
    cells[column] = value
    path = tmp_path / "export.csv"
    path.write_text(",".join(cells) + "\n" + ",".join(cells.values()) + "\n")
    with pytest.raises(InputError) as info:
        read_costs([path])
    assert (info.value.where, info.value.column) == ("row 2", column)


def test_rule_file_limits_for_external_amounts_and_contract_weights(tmp_path):
    import yaml

    from tenantcost.config.rules import parse_rules as parse

    def parse_rules(text: str, origin: str) -> object:
        return parse(yaml.safe_load(text), origin=origin)

    base = """
rules:
  - id: v1
    effective_from: 2026-11-01
    workloads:
      - {match: {controller: api}, class: shared, service: api, key: %s}
    external:
      - {name: search, amount: %s, per: hour, key: requests}
"""
    parse_rules(base % ("requests", "1000000"), origin="r.yaml")
    parse_rules(base % ("{weights: {a: 1000000000000}}", "1"), origin="r.yaml")
    with pytest.raises(InputError, match="amount"):
        parse_rules(base % ("requests", "1000000.000001"), origin="r.yaml")
    with pytest.raises(InputError, match="weights"):
        parse_rules(base % ("{weights: {a: 1.0e13}}", "1"), origin="r.yaml")


# --------------------------------------------------------------------------- the CLI

runner = CliRunner()


@pytest.fixture
def example(tmp_path: Path) -> Path:
    dest = tmp_path / "ex"
    shutil.copytree(EXAMPLE, dest)
    return dest


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def allocate(example: Path, *extra: str):
    return runner.invoke(app, ["allocate", "--config", str(example / "rules.yaml"), *extra])


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_cli_large_usage_below_the_limit_is_split_exactly(example):
    """``requests = 66348e9`` (once a DuckDB ConversionException) is within the limit now."""
    edit(example / "usage.csv", "api,client-a,66348,", "api,client-a,66348e9,")
    result = allocate(example, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    api = {c["client"]: next(line["amount"] for line in c["lines"] if line["source"] == "api")
           for c in document["clients"]}
    weights = {"client-a": 66348 * 10**15, "client-b": 1710 * 10**6, "client-c": 342 * 10**6}
    assert api == exact_split(58800, weights)
    assert document["gap"] == 0


def test_cli_usage_past_the_limit(example):
    edit(example / "usage.csv", "client-a,66348,604.7", "client-a,66348,123456789012345678901")
    assert_one_line_error(allocate(example), "usage.csv", "row 2", "column 'cpu_seconds'",
                          "beyond what tenantcost holds exactly")


def test_cli_opencost_total_cost_1e19(example):
    path = example / "costs.json"
    document = json.loads(path.read_text())
    document["data"][0]["cluster-one/saas/deployment:api"]["totalCost"] = 1e19
    path.write_text(json.dumps(document))
    assert_one_line_error(
        allocate(example), "costs.json",
        "data[0]['cluster-one/saas/deployment:api'].totalCost",
        "beyond what tenantcost holds exactly")


@given(pools=st.lists(pool_strategy, min_size=1, max_size=4))
def test_pandas_reference_split_is_exact_for_integer_weights(pools):
    from tenantcost.money import split_largest_remainder

    rows = [(i, parent, quantised(u), c) for i, (parent, recipients) in enumerate(pools)
            for c, u in recipients]
    frame = pd.DataFrame(rows, columns=["g", "p", "w", "label"])
    frame["part"] = split_largest_remainder(frame["g"], frame["p"], frame["w"].astype(object),
                                            frame["label"])
    for i, (parent, recipients) in enumerate(pools):
        weights = {c: quantised(u) for c, u in recipients}
        mine = frame[frame["g"] == i]
        if sum(weights.values()) == 0:
            assert (mine["part"] == 0).all()
            continue
        expected = exact_split(parent, weights)
        assert {r.label: r.part for r in mine.itertuples() if r.label in expected} == expected
