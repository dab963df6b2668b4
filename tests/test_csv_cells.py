"""CSV cells a spreadsheet would run: the rule of `tenantcost/csv_cells.py` on columns (text by
the column's type, pandas and DuckDB alike), then the files read back: a hostile client id
through `allocate --format csv` and its `--out` files (`lines.csv` among them), a budget plan
through `budget load`, a catalog through `unit-economics --format csv` and `catalog load`, and
a canonical cost file through the cost reader.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from typer.testing import CliRunner

from tenantcost.budget import plan_budgets
from tenantcost.cli import app
from tenantcost.csv_cells import TRIGGERS, neutralised, restored_cells, sql_neutralised
from tenantcost.readers.canonical import read_canonical_costs
from tenantcost.store.budgets import month_budgets
from tenantcost.store.catalog import stored_catalog
from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings
from tenantcost.writers.budget import plan_csv
from tenantcost.writers.files import csv_frame

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
HOSTILE = ("=cmd|' /C calc'!A0", "-1", "@SUM(A1)", "+1")
"""Client ids a spreadsheet runs (tab and CR are control characters, which no id holds)."""
CATALOG = ("client", "name", "plan", "segment", "account_manager")
runner = CliRunner()


def ok(*args: str) -> str:
    done = runner.invoke(app, list(args))
    assert done.exit_code == 0, done.output
    return done.stdout


def records(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def safe(cell: str) -> bool:
    return not cell.startswith(TRIGGERS)


def test_text_is_decided_by_the_columns_type() -> None:
    frame = pd.DataFrame({
        "client": pd.Series([*HOSTILE, "\tx", "'=x", "a-b", None], dtype="str"),
        "amount": [-1_500_000, 0, 1, 2, 3, 4, 5, 6],
        "share": [-0.5, 0, 0, 0, 0, 0, 0, 0],
        "mixed": pd.Series(["-a", -1, None, "b", "c", "d", "e", "f"], dtype=object),
    })  # fmt: skip
    out = csv_frame(frame)
    assert out["client"].tolist()[:7] == [*(f"'{c}" for c in HOSTILE), "'\tx", "'=x", "a-b"]
    assert out["amount"].iloc[0] == "-1.500000" and out["amount_micros"].iloc[0] == -1_500_000
    assert out["share"].iloc[0] == -0.5 and out["mixed"].tolist()[:3] == ["'-a", -1, None]
    assert neutralised(frame, decimals=("client",))["client"].iloc[1] == "-1"
    back = restored_cells(out["client"])
    assert back.tolist()[:7] == [*HOSTILE, "\tx", "=x", "a-b"]  # only a ' before a trigger goes
    con = duckdb.connect()  # the DuckDB form (lines.csv) on the same cells
    con.register("cells", pd.DataFrame({"i": range(8), "c": frame["client"].astype(object)}))
    sql = con.sql(f"SELECT {sql_neutralised('c', 'client')} FROM cells ORDER BY i").fetchall()
    assert [row[0] for row in sql] == out["client"].astype(object).where(
        out["client"].notna(), None).tolist()  # fmt: skip
    con.close()


def test_a_canonical_cost_file_reads_back_without_the_quote(tmp_path: Path) -> None:
    """`collect`'s `costs.csv` and `podcost --format csv` are read by `--costs`."""
    path = tmp_path / "costs.csv"
    cells = pd.DataFrame({
        "window_start": ["2026-11-03T10:00:00Z"], "window_end": ["2026-11-03T11:00:00Z"],
        "cluster": ["c1"], "namespace": ["-ns"], "controller_kind": ["deployment"],
        "controller": ["=app"], "label:team": ["@ops"], "cpu_cost": [-1.5], "total_cost": [2.0],
    })  # fmt: skip
    neutralised(cells).to_csv(path, index=False)
    assert "'-ns,deployment,'=app,'@ops,-1.5,2.0" in path.read_text(encoding="utf-8")
    read = read_canonical_costs(path).iloc[0]
    assert (read["namespace"], read["controller"], read["label:team"]) == ("-ns", "=app", "@ops")
    assert read["cpu_cost"] == -1.5  # a number: never quoted


def hostile_usage(folder: Path) -> Path:
    """The example's usage plus one hour of the API for each hostile client id."""
    rows = list(csv.reader(io.StringIO((EXAMPLE / "usage.csv").read_text(encoding="utf-8"))))
    path = folder / "usage.csv"
    with path.open("w", newline="", encoding="utf-8") as sink:
        writer = csv.writer(sink)
        writer.writerows(rows)
        for n, client in enumerate(HOSTILE, start=1):
            writer.writerow([*rows[1][:2], "api", client, str(100 * n), str(n)])
    return path


def test_allocate_csv_and_out_files_neutralise_a_hostile_client_id(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stdout = ok("allocate", "--config", str(EXAMPLE / "rules.yaml"), "--costs",
                str(EXAMPLE / "costs.json"), "--usage", str(hostile_usage(tmp_path)),
                "--month", "2026-11", "--format", "csv", "--out", str(out))  # fmt: skip
    totals = records(stdout)
    assert {r["client"] for r in totals} >= {f"'{c}" for c in HOSTILE}
    lines = records((out / "lines.csv").read_text(encoding="utf-8"))
    assert set(restored_cells(pd.Series([r["client"] for r in lines], dtype="str"))) == {
        "client-a", "client-b", "client-c", *HOSTILE}  # fmt: skip
    for name in ("clients.csv", "lines.csv", "residual.csv", "unattributed.csv",
                 "exclusions.csv"):  # fmt: skip
        rows = records((out / name).read_text(encoding="utf-8"))
        text = [v for r in rows for k, v in r.items() if k not in ("amount", "amount_micros")]
        assert all(safe(v) for v in text), name
        assert all(r["amount"].lstrip("-").replace(".", "").isdigit() for r in rows), name
    assert sum(int(r["amount_micros"]) for r in totals) == sum(
        int(r["amount_micros"]) for r in records((out / "clients.csv").read_text()))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[str], str]]:
    folder = tmp_path_factory.mktemp("csv-cells")
    url = f"sqlite:///{folder / 'store.db'}"
    where = ["--db", url, "--data", str(folder / "data")]
    ok("db", "upgrade", *where)
    ok("rules", "load", str(EXAMPLE / "rules.yaml"), *where)
    yield where, url


def test_a_budget_plan_loads_the_ids_it_planned(store: tuple[list[str], str],
                                                tmp_path: Path) -> None:  # fmt: skip
    where, url = store
    history = pd.DataFrame({"client": [c for c in HOSTILE for _ in (1, 2)],
                            "month": ["2026-09", "2026-10"] * len(HOSTILE),
                            "amount": [1_000_000, 1_100_000] * len(HOSTILE)})  # fmt: skip
    path = tmp_path / "plan.csv"
    path.write_text(plan_csv(plan_budgets(history)), encoding="utf-8")
    assert all(safe(r["client"]) for r in records(path.read_text(encoding="utf-8")))
    ok("budget", "load", str(path), "--month", "2026-12", *where)
    engine = open_engine(resolve_settings(db=url, environ={}))
    try:
        assert sorted(month_budgets(engine, "2026-12")["client"]) == sorted(HOSTILE)
    finally:
        engine.dispose()


def test_a_catalog_round_trips_through_the_economics_csv(store: tuple[list[str], str],
                                                         tmp_path: Path) -> None:  # fmt: skip
    where, url = store
    original = pd.DataFrame({
        "client": ["client-a", *HOSTILE],
        "name": ['=HYPERLINK("http://x.test/","open")', *(f"name {n}" for n in range(4))],
        "plan": ["+pro", "-", "@team", "pro", "pro"],
        "segment": ["smb", "smb", "smb", "smb", "'=kept"],
        "account_manager": ["-Dana", "Lee", "Lee", "Lee", "Lee"],
    })  # fmt: skip
    catalog = tmp_path / "catalog.csv"
    original.to_csv(catalog, index=False)
    stdout = ok("unit-economics", "--config", str(EXAMPLE / "rules.yaml"), "--costs",
                str(EXAMPLE / "costs.json"), "--usage", str(hostile_usage(tmp_path)),
                "--catalog", str(catalog), "--month", "2026-11", "--as-of", "2026-12-01",
                "--format", "csv")  # fmt: skip
    rows = [r for r in records(stdout) if r["in_catalog"] == "True"]
    assert all(safe(r[c]) for r in rows for c in CATALOG)
    kept = tmp_path / "kept.csv"
    pd.DataFrame(rows)[list(CATALOG)].to_csv(kept, index=False)
    ok("catalog", "load", str(kept), *where)
    engine = open_engine(resolve_settings(db=url, environ={}))
    try:
        loaded = stored_catalog(engine).frame.set_index("client")[list(CATALOG[1:])]
    finally:
        engine.dispose()
    expected = original.set_index("client")
    expected.loc["+1", "segment"] = "=kept"  # the one value that cannot round-trip (docs)
    assert loaded.sort_index().to_dict("index") == expected.sort_index().to_dict("index")
