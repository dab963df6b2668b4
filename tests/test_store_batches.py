"""`tenantcost batch list` and `batch withdraw` on SQLite and a real PostgreSQL 15:
a record that only a later ingest makes unusable is named by `run` and `close` with its batch
and the command that withdraws it; withdrawn, the month runs; withdrawing a `replace` batch
brings back the cells it had replaced; a closed month refuses; the withdrawal is in `history`
and in the provenance; re-ingesting identical rows into a closed month changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.store.actor import os_actor
from tenantcost.store.batches import FIELDS
from tenantcost.store.engine import open_engine
from tenantcost.store.models import Batch, BatchWithdrawal, table
from tenantcost.store.settings import resolve_settings
from tenantcost.store.stored_run import load_statement

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
MONTH = "2026-11"
HOUR = "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z"
REASON = "daily usage cannot be split over hourly costs"
runner = CliRunner()


@pytest.fixture
def db(store_url: str, tmp_path: Path) -> list[str]:
    """An upgraded store with the example's rules; the --db/--data arguments."""
    args = ["--db", store_url, "--data", str(tmp_path / "data")]
    assert cli("db", "upgrade", *args).exit_code == 0
    assert cli("rules", "load", str(EXAMPLE / "rules.yaml"), *args).exit_code == 0
    return args


def cli(*args: str):
    return runner.invoke(app, list(args))


def ok(*args: str) -> str:
    done = cli(*args)
    assert done.exit_code == 0, done.output
    return str(done.stdout)


def refused(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def ingest(db: list[str], kind: str, path: Path, *extra: str) -> str:
    """Ingest a file; the new batch's uid prefix (12 hex digits, as `ingest` prints it)."""
    out = ok("ingest", kind, f"--{kind}", str(path), *extra, *db)
    return out.split("batch ", 1)[1][:12]


def daily_usage(folder: Path) -> Path:
    """The example's usage as one daily window: valid until hourly costs of the day come."""
    path = folder / "daily.csv"
    path.write_text((EXAMPLE / "usage.csv").read_text()
                    .replace(HOUR, "2026-11-03T00:00:00Z,2026-11-04T00:00:00Z"))  # fmt: skip
    return path


def clients(db: list[str]) -> dict[str, int]:
    doc = json.loads(ok("run", "--month", MONTH, "--format", "json", *db))
    return {c["client"]: c["amount"] for c in doc["clients"]}


def listed(db: list[str], *extra: str) -> list[dict]:
    return json.loads(ok("batch", "list", "--format", "json", *extra, *db))


def test_a_record_a_later_ingest_made_unusable_is_named_then_withdrawn(
    db: list[str], tmp_path: Path
):
    daily = ingest(db, "usage", daily_usage(tmp_path))  # accepted: no costs yet
    costs = ingest(db, "costs", EXAMPLE / "costs.json")  # hourly: the day cannot be split
    command = f"`tenantcost batch withdraw {daily} --reason TEXT`"
    for args in (("run", "--month", MONTH), ("close", "--month", MONTH, "--allow-incomplete")):
        refused(cli(*args, *db), "coarser than cost window", f"usage batch {daily}", command)
    # hourly usage of the same hours would count them twice: ingest names the batch to withdraw
    refused(cli("ingest", "usage", "--usage", str(EXAMPLE / "usage.csv"), *db),
            f"stored batch {daily}", f"`tenantcost batch withdraw {daily}")  # fmt: skip
    out = ok("batch", "withdraw", daily, "--reason", REASON, *db)
    assert out.startswith(f"batch {daily} withdrawn (usage, 6 rows): {MONTH} no longer read it")
    hourly = ingest(db, "usage", EXAMPLE / "usage.csv")
    files = sorted(p.name for p in Path(db[3]).rglob("*.parquet"))
    assert len(files) == 3 and any(f.startswith(daily) for f in files)  # nothing deleted
    assert clients(db) == allocated()  # the month runs, on the hourly usage
    # batch list: every field, the withdrawal with its actor and reason
    every = listed(db)
    assert [b["uid"][:12] for b in every] == [daily, costs, hourly]
    assert all(tuple(b) == FIELDS for b in every)
    assert every[0] | {"uid": "", "ingested_at": "", "withdrawn_at": ""} == {
        "uid": "", "kind": "usage", "mode": "replace", "rows": 6, "cells": 2,
        "window_from": "2026-11-03T00:00:00Z", "window_to": "2026-11-04T00:00:00Z",
        "ingested_at": "", "actor": os_actor(), "source": str(tmp_path / "daily.csv"),
        "status": "withdrawn", "withdrawn_at": "", "withdrawn_by": os_actor(), "reason": REASON,
    }  # fmt: skip
    assert [b["status"] for b in every[1:]] == ["active", "active"]
    assert listed(db, "--month", "2026-12") == []
    table_out = ok("batch", "list", "--month", MONTH, *db)
    assert f"withdrawn {every[0]['withdrawn_at'][:19]}Z by {os_actor()}: {REASON}" in table_out
    # close issues from the hourly usage; history and the provenance show the withdrawal
    ok("close", "--month", MONTH, "--allow-incomplete", *db)
    history = ok("history", *db)
    assert "batch withdrawals:" in history and REASON in history
    assert f"{MONTH}  {daily}  usage" in history and f"  {os_actor()}  {REASON}" in history
    assert "batch withdrawals" not in ok("history", "--client", "client-a", *db)
    engine = open_engine(resolve_settings(db=db[1], environ={}))
    inputs = load_statement(engine, MONTH).pack.provenance.inputs
    engine.dispose()
    withdrawn = [i for i in inputs if i.path.startswith("withdrawn batch")]
    assert len(withdrawn) == 1 and withdrawn[0].role == "usage"
    assert withdrawn[0].path.startswith(f"withdrawn batch {daily} (not read; withdrawn ")
    assert f"by {os_actor()})" in withdrawn[0].path and REASON not in withdrawn[0].path
    assert [i.path.split(":")[0] for i in inputs[1:-1]] == ["batch 2", "batch 3"]  # read


def allocated() -> dict[str, int]:
    done = cli("allocate", "--config", str(EXAMPLE / "rules.yaml"), "--month", MONTH,
               "--format", "json")  # fmt: skip
    assert done.exit_code == 0, done.output
    return {c["client"]: c["amount"] for c in json.loads(done.stdout)["clients"]}


def test_withdrawing_a_replace_batch_brings_back_the_cells_it_replaced(
    db: list[str], tmp_path: Path
):
    ingest(db, "usage", EXAMPLE / "usage.csv")
    ingest(db, "costs", EXAMPLE / "costs.json")
    before = clients(db)
    corrected = tmp_path / "corrected.csv"
    corrected.write_text((EXAMPLE / "usage.csv").read_text()
                         .replace("api,client-b,1710,", "api,client-b,3420,"))  # fmt: skip
    fix = ingest(db, "usage", corrected)
    assert clients(db) != before
    out = ok("batch", "withdraw", fix, "--reason", "wrong export", *db)
    assert "2 cell(s) it had replaced count again" in out
    assert clients(db) == before == allocated()


def test_a_closed_month_an_unknown_id_and_a_second_withdrawal_are_refused(
    db: list[str], tmp_path: Path
):
    usage = ingest(db, "usage", EXAMPLE / "usage.csv")
    ingest(db, "costs", EXAMPLE / "costs.json")
    ok("close", "--month", MONTH, "--allow-incomplete", *db)
    refused(cli("batch", "withdraw", usage, "--reason", "x", *db), f"batch {usage}",
            f"{MONTH}, closed (revision 1 issued)",
            f"`tenantcost reopen --month {MONTH} --reason TEXT` first")  # fmt: skip
    engine = open_engine(resolve_settings(db=db[1], environ={}))
    with engine.connect() as connection:
        statuses = connection.execute(select(table(Batch).c.status)).scalars().all()
        assert connection.execute(select(table(BatchWithdrawal))).all() == []
    assert statuses == ["committed", "committed"]
    refused(cli("batch", "withdraw", "deadbeefdeadbeef", "--reason", "x", *db),
            "batch 'deadbeefdeadbeef': no batch in the store")  # fmt: skip
    refused(cli("batch", "withdraw", "not-a-uid", "--reason", "x", *db), "expected a batch uid")
    refused(cli("batch", "withdraw", usage, *db), "--reason is required")
    refused(cli("batch", "withdraw", usage, "--reason", "  ", *db), "--reason is empty")
    # a batch spanning two months is refused while either is closed
    october = tmp_path / "two-months.csv"
    october.write_text(
        "window_start,window_end,service,client,requests,cpu_seconds\n"
        "2026-10-31T23:00:00Z,2026-11-01T00:00:00Z,api,client-a,1,1\n"
        "2026-12-01T00:00:00Z,2026-12-01T01:00:00Z,api,client-a,1,1\n"
    )
    ok("reopen", "--month", MONTH, "--reason", "late usage", *db)
    span = ingest(db, "usage", october)
    # its hours are outside November's: no figure changes, so the close is forced
    ok("close", "--month", MONTH, "--allow-incomplete", "--force", *db)
    refused(cli("batch", "withdraw", span, "--reason", "x", *db), f"{MONTH}, closed")
    ok("reopen", "--month", MONTH, "--reason", "withdraw the span", *db)
    assert "2026-10, 2026-11, 2026-12 no longer read it" in ok(
        "batch", "withdraw", span, "--reason", "x", *db)  # fmt: skip
    refused(cli("batch", "withdraw", span, "--reason", "y", *db),
            f"batch {span} was already withdrawn", f"by {os_actor()}: x")  # fmt: skip
    engine.dispose()


def test_identical_rows_into_a_closed_month_change_nothing(db: list[str], tmp_path: Path):
    ingest(db, "usage", EXAMPLE / "usage.csv")
    fix = tmp_path / "fix.csv"
    fix.write_text((EXAMPLE / "usage.csv").read_text().replace(",1710,", ",1711,"))
    fixed = ingest(db, "usage", fix)  # replaces both cells of the first
    costs = ingest(db, "costs", EXAMPLE / "costs.json")
    ok("close", "--month", MONTH, "--allow-incomplete", *db)
    files = sorted(Path(db[3]).rglob("*"))
    for kind, path, uid in (("usage", fix, fixed), ("costs", EXAMPLE / "costs.json", costs)):
        again = ok("ingest", kind, f"--{kind}", str(path), *db)
        assert again.startswith(f"{kind}: nothing would change, nothing written: batch {uid} "
                                "already holds these")  # fmt: skip
        refused(cli("ingest", kind, f"--{kind}", str(path), "--mode", "sum", *db),
                f"ingest {kind} would change {MONTH}, closed")  # fmt: skip
    # the first file's rows were replaced: they would count again, which changes the month
    refused(cli("ingest", "usage", "--usage", str(EXAMPLE / "usage.csv"), *db),
            f"ingest usage would change {MONTH}, closed")  # fmt: skip
    assert len(listed(db)) == 3 and sorted(Path(db[3]).rglob("*")) == files
