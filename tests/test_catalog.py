"""The client catalog reader: CSV and Parquet, optional columns, one-line errors (exit 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tenantcost.catalog import read_catalog
from tenantcost.cli import app
from tenantcost.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
runner = CliRunner()
HEADER = "client,name,plan,segment,account_manager,monthly_revenue,currency,start,end"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    dest = tmp_path / "ex"
    shutil.copytree(EXAMPLE, dest)
    return dest


def write(folder: Path, *rows: str, header: str = HEADER) -> Path:
    path = folder / "catalog.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_example_catalog_reads_with_every_column():
    catalog = read_catalog(EXAMPLE / "catalog.csv", "USD")
    frame = catalog.frame
    assert frame["client"].tolist() == ["client-a", "client-b", "client-c"]
    assert frame["monthly_revenue"].tolist() == [400_000_000, 200_000_000, 9_000_000]
    assert frame["start"].iloc[1] == pd.Timestamp("2026-11-16")
    assert pd.isna(frame["end"].iloc[0])
    assert catalog.columns[0] == "client" and len(catalog.columns) == 9


def test_only_client_is_required(tmp_path):
    path = write(tmp_path, "a", "007", header="client")
    frame = read_catalog(path, "EUR").frame
    assert frame["client"].tolist() == ["a", "007"]  # ids stay text
    assert not frame["has_revenue"].any() and (frame["plan"] == "").all()
    assert (frame["currency"] == "EUR").all()


def test_parquet_catalog(tmp_path):
    path = tmp_path / "catalog.parquet"
    table = pa.table(
        {
            "client": pa.array([1, 2], pa.int64()),
            "plan": ["pro", None],
            "monthly_revenue": [10.5, None],
            "start": pa.array([pd.Timestamp("2026-11-02").date(), None], pa.date32()),
        }
    )
    pq.write_table(table, path)
    frame = read_catalog(path, "USD").frame
    assert frame["client"].tolist() == ["1", "2"]
    assert frame["plan"].tolist() == ["pro", ""]
    assert frame["monthly_revenue"].tolist() == [10_500_000, 0]
    assert frame["has_revenue"].tolist() == [True, False]
    assert frame["start"].iloc[0] == pd.Timestamp("2026-11-02")


def test_parquet_rows_are_record_numbers(tmp_path):
    path = tmp_path / "catalog.parquet"
    pq.write_table(pa.table({"client": ["a", "b"], "monthly_revenue": [1.0, -2.0]}), path)
    with pytest.raises(InputError) as caught:
        read_catalog(path, "USD")
    assert caught.value.one_line() == (
        f"{path}, row 2, column 'monthly_revenue': monthly_revenue must be >= 0"
    )


BAD_ROWS = [
    (["a,A,pro,,,10,USD,,", ",B,pro,,,10,USD,,"], "row 3, column 'client': client is empty"),
    (
        ["a,A,pro,,,10,USD,,", "b,,,,,,,,", "a,C,pro,,,10,USD,,"],
        "row 4, column 'client': client 'a' is already in row 2: one row per client",
    ),
    (["a,A,pro,,,ten,USD,,"], "row 2, column 'monthly_revenue': expected a number, got 'ten'"),
    (["a,A,pro,,,-1,USD,,"], "row 2, column 'monthly_revenue': monthly_revenue must be >= 0"),
    (["a,A,pro,,,inf,USD,,"], "row 2, column 'monthly_revenue': amount must be finite"),
    (["a,A,pro,,,1,usd,,"], "row 2, column 'currency': currency must be an ISO 4217 code"),
    (
        ["a,A,pro,,,1,,,", "b,B,pro,,,1,EUR,,", "c,C,pro,,,1,XYZ,,"],
        "row 4, column 'currency': currency must be an ISO 4217 code in force",
    ),
    (
        ["a,A,pro,,,1,USD,2026-13-01,"],
        "row 2, column 'start': expected a date YYYY-MM-DD, got '2026-13-01'",
    ),
    (["a,A,pro,,,1,USD,,01/11/2026"], "row 2, column 'end': expected a date YYYY-MM-DD"),
    (
        ["a,A,pro,,,1,USD,2026-11-10,2026-11-09"],
        "row 2, column 'end': end 2026-11-09 is before start 2026-11-10",
    ),
]


@pytest.mark.parametrize(("rows", "fragment"), BAD_ROWS)
def test_bad_rows_are_one_line_exit_2(example, rows, fragment):
    path = write(example, *rows)
    result = runner.invoke(
        app,
        ["unit-economics", "--config", str(example / "rules.yaml"), "--catalog", str(path),
         "--month", "2026-11", "--as-of", "2026-12-01"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert "\n" not in err and "Traceback" not in result.output
    assert err.startswith(f"error: {path}, {fragment}"), err


@pytest.mark.parametrize(
    ("header", "rows", "line"),
    [
        (
            "client,plann",
            ["a,pro"],
            "header, column 'plann': unknown catalog column (did you mean 'plan'?); columns are",
        ),
        ("name,plan", ["A,pro"], "header, column 'client': required column is missing"),
    ],
)
def test_bad_header(example, header, rows, line):
    path = write(example, *rows, header=header)
    with pytest.raises(InputError) as caught:
        read_catalog(path, "USD")
    assert caught.value.one_line().startswith(f"{path}, {line}")


def test_not_a_catalog_file(tmp_path):
    path = tmp_path / "catalog.xlsx"
    path.write_text("x")
    with pytest.raises(InputError, match=r"catalog.xlsx: a catalog is a \.csv or \.parquet file"):
        read_catalog(path, "USD")
    with pytest.raises(InputError, match="file not found"):
        read_catalog(tmp_path / "missing.csv", "USD")


def test_client_with_cost_absent_from_catalog_is_kept(example):
    path = write(example, "client-a,Acme,business,,,100,USD,,")
    result = runner.invoke(
        app,
        ["unit-economics", "--config", str(example / "rules.yaml"), "--catalog", str(path),
         "--month", "2026-11", "--as-of", "2026-12-01"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "client-b  " in result.stdout and "not in catalog" in result.stdout


def test_catalog_load_refusals_write_nothing(tmp_path):
    from sqlalchemy import func, select

    from tenantcost.store.engine import open_engine
    from tenantcost.store.models import CatalogClient, CatalogLoad, table
    from tenantcost.store.settings import resolve_settings

    url = f"sqlite:///{tmp_path / 'store.db'}"
    where = ["--db", url, "--data", str(tmp_path / "data")]
    assert runner.invoke(app, ["db", "upgrade", *where]).exit_code == 0
    good = EXAMPLE / "catalog.csv"
    no_rules = runner.invoke(app, ["catalog", "load", str(good), *where])
    assert no_rules.exit_code == 2
    assert no_rules.stderr.strip() == (
        "error: the store has no rules: `tenantcost rules load RULES.yaml` first"
    )
    rules = runner.invoke(app, ["rules", "load", str(EXAMPLE / "rules.yaml"), *where])
    assert rules.exit_code == 0, rules.output
    bad = write(tmp_path, "a,A,pro,,,10,EUR,,\nb,B,pro,,,10,EURO,,")
    refused = runner.invoke(app, ["catalog", "load", str(bad), *where])
    assert refused.exit_code == 2
    assert refused.stderr.startswith(f"error: {bad}, row 3, column 'currency': currency must be")
    engine = open_engine(resolve_settings(db=url, environ={}))
    with engine.connect() as connection:
        for model in (CatalogLoad, CatalogClient):
            assert connection.execute(select(func.count()).select_from(table(model))).scalar() == 0
    engine.dispose()
    assert runner.invoke(app, ["catalog", "load", str(good), *where]).exit_code == 0


def test_catalog_text_follows_the_stored_text_rule(tmp_path):
    """A CR/LF in a name (it would break the e-mail headers of `watch --notify`), a NUL in a
    plan (PostgreSQL cannot store it) and a control character in a client id are refused at
    load, in one line naming row and column; CSV and Parquet alike."""
    crlf = write(tmp_path, 'a,"Acme\r\nBcc: x@example.com",pro')
    with pytest.raises(InputError, match=r"row 2, column 'name': name holds a control "
                       r"character U\+000D at character 5"):  # fmt: skip
        read_catalog(crlf, "USD")
    parquet = tmp_path / "catalog.parquet"
    pq.write_table(pa.table({"client": ["a", "b"], "plan": ["pro", "p\x00"]}), parquet)
    with pytest.raises(InputError, match=r"row 2, column 'plan': plan holds a control"):
        read_catalog(parquet, "USD")
    bell = write(tmp_path, "a\x07b")
    with pytest.raises(InputError, match=r"row 2, column 'client': client id holds"):
        read_catalog(bell, "USD")
