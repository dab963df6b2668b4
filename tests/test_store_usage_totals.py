"""`tenantcost status --usage` on SQLite and a real PostgreSQL 15, run as a user
runs it (a subprocess): per month, service and client, the totals of the live usage `run`
reads (a `replace` batch supersedes its cells, `sum` batches add, a zero-filled metric
counts 0, a withdrawn batch counts nowhere); JSON and table; a malformed month is exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parents[1]
HEADER = "window_start,window_end,service,client,requests,cpu_seconds\n"
runner = CliRunner()


def ok(*args: str) -> str:
    done = runner.invoke(app, list(args))
    assert done.exit_code == 0, done.output
    return str(done.stdout)


def outside(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tenantcost", *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def hour(day: str, h: int) -> str:
    return f"2026-{day}T{h:02d}:00:00Z,2026-{day}T{h + 1:02d}:00:00Z"


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> list[str]:
    """Five batches: a replace, a sum of `requests` only (zero-filled `cpu_seconds`), a
    replace correcting one cell, December, and a sum batch withdrawn."""
    db = ["--db", store_url, "--data", str(tmp_path / "data")]
    ok("db", "upgrade", *db)
    files = {
        "a.csv": HEADER + f"{hour('11-03', 10)},api,c1,10,1.5\n{hour('11-03', 10)},api,c2,5,0.5\n"
        f"{hour('11-03', 10)},api,,2,0.25\n{hour('11-03', 11)},api,c1,20,2.0\n"
        f"{hour('11-03', 10)},worker,c1,1,9\n",
        "b.csv": "window_start,window_end,service,client,requests\n"
        f"{hour('11-03', 10)},api,c1,3\n{hour('11-03', 12)},api,c3,4\n",
        "c.csv": HEADER + f"{hour('11-03', 11)},api,c1,7,0.75\n",
        "d.csv": HEADER + f"{hour('12-01', 0)},api,c1,100,1\n",
        "e.csv": HEADER + f"{hour('11-03', 10)},worker,c1,1000,1000\n",
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        mode = "sum" if name in ("b.csv", "e.csv") else "replace"
        ok("ingest", "usage", "--usage", str(path), "--mode", mode, *db)
    last = json.loads(ok("batch", "list", "--format", "json", *db))[-1]["uid"]
    ok("batch", "withdraw", last, "--reason", "sent twice", *db)
    return db


NOVEMBER = [
    {"service": "api", "client": "", "requests": 2, "cpu_seconds": 0.25},
    {"service": "api", "client": "c1", "requests": 20, "cpu_seconds": 2.25},
    {"service": "api", "client": "c2", "requests": 5, "cpu_seconds": 0.5},
    {"service": "api", "client": "c3", "requests": 4, "cpu_seconds": 0.0},
    {"service": "worker", "client": "c1", "requests": 1, "cpu_seconds": 9.0},
]
DECEMBER = [{"service": "api", "client": "c1", "requests": 100, "cpu_seconds": 1}]
METRICS = ["requests", "cpu_seconds"]


def test_usage_totals_are_the_live_rows_per_month_service_and_client(store: list[str]) -> None:
    done = outside("status", "--usage", "--format", "json", *store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"months": [
        {"month": "2026-11", "metrics": METRICS, "usage": NOVEMBER},
        {"month": "2026-12", "metrics": METRICS, "usage": DECEMBER},
    ]}  # fmt: skip
    usage = json.loads(done.stdout)["months"][0]["usage"]
    assert all(isinstance(u["requests"], int) for u in usage)  # whole totals are integers
    one = outside("status", "--usage", "--month", "2026-12", "--format", "json", *store)
    assert json.loads(one.stdout) == {"months": [
        {"month": "2026-12", "metrics": METRICS, "usage": DECEMBER}]}  # fmt: skip
    empty = outside("status", "--usage", "--month", "2027-01", "--format", "json", *store)
    assert json.loads(empty.stdout) == {"months": [
        {"month": "2027-01", "metrics": [], "usage": []}]}  # fmt: skip
    # The table: one row per (month, service, client), "(no client)" for the empty client.
    done = outside("status", "--usage", "--month", "2026-11", *store)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["month", "service", "client", "requests", "cpu_seconds"]
    assert [line.split() for line in lines[2:]] == [
        ["2026-11", "api", "(no", "client)", "2", "0.25"],
        ["2026-11", "api", "c1", "20", "2.25"],
        ["2026-11", "api", "c2", "5", "0.50"],
        ["2026-11", "api", "c3", "4", "0.00"],
        ["2026-11", "worker", "c1", "1", "9.00"],
    ]  # plain decimals, as many in every row of a column, aligned on the right
    assert len({len(line) for line in lines}) == 1
    assert len(outside("status", "--usage", *store).stdout.splitlines()) == 2 + 5 + 1


def test_a_malformed_month_is_one_line_exit_2(tmp_path: Path) -> None:
    db = ["--db", f"sqlite:///{tmp_path / 'store.db'}", "--data", str(tmp_path / "data")]
    for month in ("2026-13", "2026-1", "nov"):
        done = outside("status", "--usage", "--month", month, "--format", "json", *db)
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert done.stderr.strip() == f"error: --month: expected YYYY-MM, got '{month}'"


def test_a_usage_column_reads_as_plain_aligned_decimals() -> None:
    from tenantcost.store.usage_totals import shown_column

    tiny = pd.Series([9.7e-05, 1234.5, None, 0.1 + 0.2, -1e-12])
    assert shown_column(tiny) == ["0.000097", "1234.500000", "-", "0.300000", "0.000000"]
    assert shown_column(tiny, thousands=True)[1] == "1,234.500000"
    assert shown_column(pd.Series([3, 40], dtype="object")) == ["3", "40"]
