"""`tenantcost budget plan` and `tenantcost budget load` on SQLite and a real
PostgreSQL 15: the plan's figures from a 6-month issued history recomputed here independently
(Python's `statistics.median` on exact Fractions, one client at a time), the fallback, the
clients without history, `--growth`, the CSV round trip into `budget load`, versions (the old
one kept, the latest in force), a closed month refused, and every bad input one line naming
file, row and column (exit 2).

The store is real: costs ingested for seven months (direct workloads, one per client, so a
client's issued amount is its workload's cost), each month closed, September reopened and
closed again with a correction (the plan reads latest revisions), a catalog with one client
never billed.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from typer.testing import CliRunner

from tenantcost.budget import Growth, plan_budgets
from tenantcost.cli import app
from tenantcost.store.budgets import month_budgets
from tenantcost.store.engine import open_engine
from tenantcost.store.models import BudgetClient, BudgetVersion, table
from tenantcost.store.settings import resolve_settings

ROOT = Path(__file__).resolve().parents[1]
RULES = """\
currency: USD
rules:
  - id: direct-2026-04
    effective_from: "2026-04-01"
    workloads:
      - {match: {namespace: "tenant-*"}, class: direct, client_from: namespace}
      - {match: {name: __idle__}, class: idle}
    idle: keep
    unmatched: error
"""
MONTHS = ("2026-05", "2026-06", "2026-07", "2026-08", "2026-09", "2026-10")
COSTS = {  # currency units per client and month (one hour of a direct workload)
    "tenant-a": ("100.123456", "110.5", "108", "121.75", "130", "140.2"),
    "tenant-b": ("3", "0", "4", "4.4", "5", "5.5"),
    "tenant-c": (None, None, None, None, "20", "30.000001"),
    "tenant-e": (None, None, None, "0", "0", "7"),
}
CORRECTED = {"tenant-a": "125.000001"}
"""2026-09 reopened and closed again with this cost: revision 2, which the plan reads."""
ISSUED = {  # what the plan must read: the latest revision of each month
    client: {m: Decimal(CORRECTED.get(client, v) if m == "2026-09" else v)
             for m, v in zip(MONTHS, values, strict=True) if v is not None}
    for client, values in COSTS.items()
}  # fmt: skip
runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def ok(*args: str) -> str:
    done = cli(*args)
    assert done.exit_code == 0, done.output
    return done.stdout


def refused(result, *fragments: str) -> str:
    """Exit 2, one `error:` line holding every fragment, no traceback."""
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def costs_csv(folder: Path, month: str, overrides: dict[str, str] | None = None) -> Path:
    """One hour (the 3rd, 10:00) of each client's direct workload in ``month``."""
    lines = ["window_start,window_end,cluster,namespace,controller_kind,controller,total_cost"]
    for client, values in COSTS.items():
        value = (overrides or {}).get(client, values[MONTHS.index(month)])
        if value is not None:
            lines.append(f"{month}-03T10:00:00Z,{month}-03T11:00:00Z,c1,{client},deployment,app,"
                         f"{value}")  # fmt: skip
    path = folder / f"costs-{month}{'-fixed' if overrides else ''}.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass(frozen=True)
class World:
    db: list[str]
    url: str
    folder: Path
    months: tuple[str, ...]
    """The months closed: the six on SQLite; the last three on PostgreSQL (a close takes
    seconds, and the store's queries are the same on both)."""


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> World:
    folder = tmp_path_factory.mktemp(f"budget-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{folder / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        url = new_database(request.getfixturevalue("postgres_admin_url"))
    db = ["--db", url, "--data", str(folder / "data")]
    (folder / "rules.yaml").write_text(RULES)
    (folder / "catalog.csv").write_text("client,name\ntenant-a,A\ntenant-d,Never billed\n")
    ok("db", "upgrade", *db)
    ok("rules", "load", str(folder / "rules.yaml"), *db)
    ok("catalog", "load", str(folder / "catalog.csv"), *db)
    months = MONTHS if request.param == "sqlite" else MONTHS[-3:]
    for month in months:
        ok("ingest", "costs", "--costs", str(costs_csv(folder, month)), *db)
        ok("close", "--month", month, "--allow-incomplete", *db)
    ok("reopen", "--month", "2026-09", "--reason", "tenant-a's cost corrected", *db)
    ok("ingest", "costs", "--costs", str(costs_csv(folder, "2026-09", CORRECTED)), *db)
    ok("close", "--month", "2026-09", "--allow-incomplete", *db)
    return World(db, url, folder, months)


def micros(value: Fraction) -> int:
    """Half-even to the micro-unit, as the plan rounds (Python's round of a Fraction)."""
    return round(value)


def reference(amounts: list[int], growth: Growth | None = None) -> dict[str, object]:
    """The issue's method for one client, written out plainly: exact Fractions, one loop."""
    if not amounts:
        return {"method": "no_history", "low": None, "expected": None, "high": None}
    rates = [Fraction(b, a) - 1 for a, b in itertools.pairwise(amounts) if a != 0]
    mean = Fraction(sum(amounts), len(amounts))
    fallback = {"method": "fallback", "low": micros(mean * Fraction(4, 5)),
                "expected": micros(mean), "high": micros(mean * Fraction(6, 5))}  # fmt: skip
    if len(amounts) < 3 or not rates:
        return fallback
    last = amounts[-1]
    if growth is not None:
        low, mid, high = growth.low, growth.expected, growth.high
        method = "growth"
    else:
        g = statistics.median(rates)
        s = max(Fraction(1, 20), Fraction("1.4826") * statistics.median(abs(r - g) for r in rates))
        low, mid, high = g - s, g, g + s
        method = "median_growth"
    if last * (1 + high) > 10**18 - 1:  # beyond what a budget holds: the fallback
        return fallback
    return {"method": method, "low": max(0, micros(last * (1 + low))),
            "expected": micros(last * (1 + mid)), "high": micros(last * (1 + high))}  # fmt: skip


def issued_micros(client: str, months: tuple[str, ...] | list[str]) -> list[int]:
    """The client's issued amounts in ``months``, in micro-units, in month order."""
    issued = ISSUED.get(client, {})
    return [int(issued[m] * 1_000_000) for m in sorted(months) if m in issued]


def test_plan_is_the_method_on_six_issued_months(world: World):
    plan = json.loads(ok("budget", "plan", "--month", "2026-11", "--format", "json", *world.db))
    assert plan["month"] == "2026-11" and plan["growth"] is None
    assert plan["money"]["currency"] == "USD" and plan["money"]["minor_unit_exponent"] == 6
    assert plan["history"] == {"requested": 6, "months": list(world.months)}
    got = {c["client"]: c for c in plan["clients"]}
    assert sorted(got) == ["tenant-a", "tenant-b", "tenant-c", "tenant-d", "tenant-e"]
    for client, entry in got.items():
        amounts = issued_micros(client, world.months)
        expected = reference(amounts)
        assert {k: entry[k] for k in expected} == expected, client
        assert entry["months"] == len(amounts)
        assert entry["last"] == (amounts[-1] if amounts else None)
    methods = {c: got[c]["method"] for c in got}
    assert methods == {"tenant-a": "median_growth", "tenant-b": "median_growth",
                       "tenant-c": "fallback", "tenant-d": "no_history",
                       "tenant-e": "fallback"}  # fmt: skip
    # tenant-a reads September's revision 2 (125.000001), not revision 1 (130).
    assert got["tenant-a"]["last"] == 140_200_000
    assert issued_micros("tenant-a", world.months)[-2] == 125_000_001
    assert got["tenant-a"]["growth"] is not None and got["tenant-d"]["growth"] is None
    table_text = ok("budget", "plan", "--month", "2026-11", *world.db)
    assert "tenant-d  no_history" in table_text and ", ".join(world.months) in table_text


def test_history_option_and_growth_option(world: World):
    three = json.loads(ok("budget", "plan", "--month", "2026-11", "--history", "3",
                          "--format", "json", *world.db))  # fmt: skip
    assert three["history"]["months"] == ["2026-08", "2026-09", "2026-10"]
    a = next(c for c in three["clients"] if c["client"] == "tenant-a")
    assert a == {**a, **reference(issued_micros("tenant-a", MONTHS[-3:]))}
    growth = Growth(Fraction("-0.1"), Fraction("0.02"), Fraction("0.25"))
    grown = json.loads(ok("budget", "plan", "--month", "2026-11", "--format", "json",
                          "--growth", "low=-0.1,expected=0.02,high=0.25", *world.db))  # fmt: skip
    assert grown["growth"] == {"low": "-0.1", "expected": "0.02", "high": "0.25"}
    for entry in grown["clients"]:
        want = reference(issued_micros(entry["client"], world.months), growth)
        assert {k: entry[k] for k in want} == want, entry["client"]
    a = next(c for c in grown["clients"] if c["client"] == "tenant-a")
    assert (a["low"], a["expected"], a["high"]) == (126_180_000, 143_004_000, 175_250_000)
    # Planning an earlier month reads only the months before it.
    early = json.loads(ok("budget", "plan", "--month", "2026-09", "--format", "json", *world.db))
    before = [m for m in world.months if m < "2026-09"]
    assert early["history"]["months"] == before
    for entry in early["clients"]:
        want = reference(issued_micros(entry["client"], before))
        assert {k: entry[k] for k in want} == want, entry["client"]


def engine_of(world: World):
    return open_engine(resolve_settings(db=world.url, environ={}), foreign_keys=False)


def versions(world: World, month: str) -> list[int]:
    v = table(BudgetVersion).c
    engine = engine_of(world)
    try:
        with engine.connect() as connection:
            query = select(v.version).where(v.month == month).order_by(v.version)
            return [int(x) for x in connection.execute(query).scalars()]
    finally:
        engine.dispose()


def test_plan_csv_loads_unchanged_and_versions_are_kept(world: World):
    plan_file = world.folder / "plan-2026-11.csv"
    cli("budget", "plan", "--month", "2026-11", "--format", "csv", "--out", str(plan_file),
        *world.db)  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(plan_file.read_text())))
    assert list(rows[0]) == ["client", "low", "expected", "high", "method"]
    plan = json.loads(ok("budget", "plan", "--month", "2026-11", "--format", "json", *world.db))
    loaded = ok("budget", "load", str(plan_file), "--month", "2026-11", *world.db)
    assert "stored as version 1 of 2026-11's budget, 4 clients" in loaded
    engine = engine_of(world)
    try:
        bands = month_budgets(engine, "2026-11")
        assert list(bands.columns) == ["client", "low", "expected", "high", "version", "currency"]
        assert all(str(t) == "int64" for t in bands.dtypes.iloc[1:5])
        want = [(c["client"], c["low"], c["expected"], c["high"], 1, "USD") for c in plan["clients"]
                if c["method"] != "no_history"]  # fmt: skip
        assert list(bands.itertuples(index=False, name=None)) == want
        assert "already 2026-11's budget in force (version 1)" in ok(
            "budget", "load", str(plan_file), "--month", "2026-11", *world.db)  # fmt: skip
        # Finance's own figures: a new version, in force; the old one stays.
        own = world.folder / "finance.csv"
        own.write_text("client,low,expected,high\ntenant-a,100,150.5,200.000001\n")
        assert "version 2 of 2026-11's budget, 1 clients" in ok(
            "budget", "load", str(own), "--month", "2026-11", *world.db)  # fmt: skip
        assert versions(world, "2026-11") == [1, 2]
        now = month_budgets(engine, "2026-11")
        assert now.to_dict("records") == [{"client": "tenant-a", "low": 100_000_000,
                                           "expected": 150_500_000, "high": 200_000_001,
                                           "version": 2, "currency": "USD"}]  # fmt: skip
        with engine.connect() as connection:
            kept = connection.execute(select(func.count()).select_from(table(BudgetClient)))
            assert kept.scalar() == 5  # version 1's four clients and version 2's one
        empty = month_budgets(engine, "2027-01")
        assert empty.empty and list(empty.columns) == list(bands.columns)
        assert all(str(t) == "int64" for t in empty.dtypes.iloc[1:5])
        # A future month may be budgeted.
        ok("budget", "load", str(own), "--month", "2027-03", *world.db)
        assert month_budgets(engine, "2027-03")["version"].tolist() == [1]
    finally:
        engine.dispose()


def test_a_closed_months_budget_does_not_change(world: World):
    own = world.folder / "late.csv"
    own.write_text("client,low,expected,high\ntenant-a,1,2,3\n")
    refused(cli("budget", "load", str(own), "--month", "2026-10", *world.db),
            "budget load would change 2026-10, closed (revision 1 issued)",
            "a closed month's budget does not change",
            "tenantcost reopen --month 2026-10")  # fmt: skip
    assert versions(world, "2026-10") == []


BAD = [  # (file content, fragments of the one error line)
    ("client,low,expected,high\na,1,x,3\n", ["row 2", "column 'expected'", "'x'"]),
    ("client,low,expected,high\na,1,2,3\nb,1,2.1234567,3\n", ["row 3", "column 'expected'",
                                                              "more than 6 decimals"]),
    ("client,low,expected,high\na,-1,2,3\n", ["row 2", "column 'low'", "negative"]),
    ("client,low,expected,high\na,3,2,4\n", ["row 2", "column 'low'", "low is above expected"]),
    ("client,low,expected,high\na,1,5,4\n", ["row 2", "column 'expected'",
                                             "expected is above high"]),
    ("client,low,expected,high\na,1,,4\n", ["row 2", "column 'expected'", "empty"]),
    ("client,low,expected,high\na,1,2,3\na,1,2,3\n", ["row 3", "column 'client'",
                                                      "already in row 2"]),
    ("client,low,expected,high\n,1,2,3\n", ["row 2", "column 'client'", "client is empty"]),
    ("client,low,expected,high\n\"a\x01b\",1,2,3\n", ["row 2", "column 'client'", "control"]),
    ("client,low,expected,hihg\na,1,2,3\n", ["header", "column 'hihg'", "did you mean 'high'"]),
    ("client,low,expected\na,1,2\n", ["header", "column 'high'", "missing"]),
    ("client,low,expected,high,method\na,1,2,3,guess\n", ["row 2", "column 'method'"]),
    ("client,low,expected,high,method\na,1,2,3,no_history\n", ["row 2", "column 'low'",
                                                              "no_history row has no band"]),
    ("client,low,expected,high\na,1e3,2000,3000\n", ["row 2", "column 'low'", "'1e3'"]),
    ("client,low,expected,high\na,1,2,10000000000000\n", ["row 2", "column 'high'", "beyond"]),
]  # fmt: skip


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    folder = tmp_path_factory.mktemp("budget-bad")
    db = ["--db", f"sqlite:///{folder / 'store.db'}", "--data", str(folder / "data")]
    (folder / "rules.yaml").write_text(RULES)
    ok("db", "upgrade", *db)
    ok("rules", "load", str(folder / "rules.yaml"), *db)
    yield db


@pytest.mark.parametrize(("content", "fragments"), BAD)
def test_bad_budget_rows_are_one_line(content: str, fragments: list[str], tmp_path: Path,
                                      sqlite_store: list[str]):  # fmt: skip
    path = tmp_path / "budget.csv"
    path.write_text(content)
    refused(cli("budget", "load", str(path), "--month", "2026-12", *sqlite_store), str(path),
            *fragments)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["budget", "load", "{file}", "--month", "2026-13"], ["--month: expected YYYY-MM"]),
        (["budget", "load", "{file}", "--month", "2026-1"], ["--month: expected YYYY-MM"]),
        (["budget", "plan", "--month", "nov"], ["--month: expected YYYY-MM, got 'nov'"]),
        (["budget", "load", "{missing}", "--month", "2026-12"], ["file not found"]),
        (["budget", "load", "{xlsx}", "--month", "2026-12"], ["a budget file is a .csv"]),
        (["budget", "plan", "--month", "2026-12", "--growth", "low=0.1,expected=0"],
         ["--growth: 'high' is missing"]),
        (["budget", "plan", "--month", "2026-12", "--growth", "low=0.2,expected=0.1,high=0.3"],
         ["low <= expected <= high"]),
        (["budget", "plan", "--month", "2026-12", "--growth", "low=a,expected=0,high=1"],
         ["--growth: low must be a decimal rate"]),
        (["budget", "plan", "--month", "2026-12", "--growth", "mid=0"], ["--growth: expected"]),
        (["budget", "plan", "--month", "2026-12", "--format", "html"], ["--format: expected"]),
    ],
)  # fmt: skip
def test_bad_options_are_one_line(args: list[str], fragments: list[str], tmp_path: Path,
                                  sqlite_store: list[str]):  # fmt: skip
    good = tmp_path / "b.csv"
    good.write_text("client,low,expected,high\na,1,2,3\n")
    (tmp_path / "b.xlsx").write_text("x")
    places = {"{file}": str(good), "{missing}": str(tmp_path / "nope.csv"),
              "{xlsx}": str(tmp_path / "b.xlsx")}  # fmt: skip
    refused(cli(*(places.get(a, a) for a in args), *sqlite_store), *fragments)


def test_no_issued_month_lists_no_history_with_a_warning(sqlite_store: list[str]):
    done = cli("budget", "plan", "--month", "2026-12", "--format", "json", *sqlite_store)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["clients"] == []
    assert "warning: no month before 2026-12 is issued" in done.stderr


# --------------------------------------------------------------------------- the pure core

WORKED = {  # docs/budgets.md, "A worked example": one client's six issued months (USD)
    "2026-05": "1000", "2026-06": "1100", "2026-07": "1045", "2026-08": "1200",
    "2026-09": "1260", "2026-10": "1300",
}  # fmt: skip


def test_the_worked_example_of_the_docs():
    amounts = [int(Decimal(v) * 10**6) for v in WORKED.values()]
    history = pd.DataFrame({"client": "acme", "month": list(WORKED), "amount": amounts})
    row = plan_budgets(history).iloc[0]
    assert row["growth"] == Fraction(1, 20)  # rates 0.10, -0.05, 0.148325.., 0.05, 0.031746..
    assert row["spread"] == Fraction(7413, 100000)  # 1.4826 x MAD 0.05
    assert (row["low"], row["expected"], row["high"]) == (1268631000, 1365000000, 1461369000)
    docs = (ROOT / "docs" / "budgets.md").read_text()
    for figure in ("1,268.631000", "1,365.000000", "1,461.369000", "0.074130"):
        assert figure in docs, figure


@settings(max_examples=25, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d", "e", "f"]),
        st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=8),
        max_size=6,
    ),
    st.randoms(use_true_random=False),
)
def test_the_vectorised_plan_is_the_plain_method(histories: dict[str, list[int]], rnd):
    """The plan of many clients at once is the plain method of each (any row order); the
    amounts reach 10^12 micro-units, so growth from a near-zero month also meets the limit."""
    records = [(c, f"2026-{i + 1:02d}", a) for c, amounts in histories.items()
               for i, a in enumerate(amounts)]  # fmt: skip
    rnd.shuffle(records)  # row order does not matter
    frame = pd.DataFrame(records, columns=["client", "month", "amount"]).astype(
        {"client": "str", "month": "str", "amount": "int64"}
    )
    plan = plan_budgets(frame, ["zz"])
    got = {r["client"]: r for r in plan.to_dict("records")}
    assert got["zz"]["method"] == "no_history"
    for client, amounts in histories.items():
        want = reference(amounts)
        assert {k: (None if got[client][k] is pd.NA else got[client][k]) for k in want} == want


def test_medians_are_exact_where_doubles_tie():
    from tenantcost.budget import _group_median

    close = [Fraction(1, 3 * 10**17), Fraction(1, 3 * 10**17 + 1)]
    assert float(close[0]) == float(close[1]) and close[0] != close[1]
    keys = pd.Series(["x", "x", "x", "y", "y"])
    values = pd.Series([close[0], close[1], Fraction(0), close[0], close[1]], dtype=object)
    medians = _group_median(keys, values)
    assert medians["x"] == close[1]  # 0 < 1/(3e17 + 1) < 1/3e17
    assert medians["y"] == (close[0] + close[1]) / 2
