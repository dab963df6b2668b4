"""`tenantcost run` and `tenantcost status` on SQLite and a real PostgreSQL 15: the bundled
example ingested into a store and run gives `allocate`'s document on the files plus a
`run_id`, to the micro-unit; the run's record (rules, inputs, per-period results) matches the
document; refusals are one line, exit 2, nothing written."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.store.engine import open_engine
from tenantcost.store.models import Batch, Run, RunClient, RunFigure, RunInput, RunLine, table
from tenantcost.store.schema import downgrade, head_revision
from tenantcost.store.settings import resolve_settings
from tenantcost.store.status import covered_hours
from tenantcost.windows import Period

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
RULES = EXAMPLE / "rules.yaml"
runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def engine_for(url: str) -> Engine:
    return open_engine(resolve_settings(db=url, environ={}), foreign_keys=False)


def rows(engine: Engine, model: type, order: str | None = None) -> pd.DataFrame:
    query = select(table(model))
    if order is not None:
        query = query.order_by(table(model).c[order])
    with engine.connect() as connection:
        result = connection.execute(query)
        return pd.DataFrame(result.all(), columns=list(result.keys()))


def example_store(url: str, data: str, *, rules: bool = True) -> None:
    assert cli("db", "upgrade", "--db", url).exit_code == 0
    if rules:
        assert cli("rules", "load", str(RULES), "--db", url, "--data", data).exit_code == 0
    for kind, option, path in (("usage", "--usage", "usage.csv"),
                               ("costs", "--costs", "costs.json")):  # fmt: skip
        done = cli("ingest", kind, option, str(EXAMPLE / path), "--db", url, "--data", data)
        assert done.exit_code == 0, done.output


def one_line_refusal(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def test_run_json_is_allocate_json_plus_run_id_and_is_recorded(store_url: str, tmp_path: Path):
    data = str(tmp_path / "data")
    example_store(store_url, data)
    done = cli("run", "--month", "2026-11", "--format", "json", "--db", store_url, "--data", data)
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    run_id = document.pop("run_id")
    assert str(uuid.UUID(run_id)) == run_id
    files = cli("allocate", "--config", str(RULES), "--month", "2026-11", "--format", "json")
    assert files.exit_code == 0, files.output
    assert document == json.loads(files.stdout)
    assert document["clients"] and document["gap"] == 0

    engine = engine_for(store_url)
    [run] = rows(engine, Run).to_dict("records")
    assert run["id"] == run_id and run["month"] == "2026-11" and run["status"] == "succeeded"
    assert json.loads(run["rule_ids"]) == ["saas-2026-11"] and run["key_override"] is None
    assert run["rule_file_sha256"] == hashlib.sha256(RULES.read_bytes()).hexdigest()
    assert run["code_version"] == document["tenantcost_version"] and run["actor"]
    assert run["started_at"] <= run["finished_at"]
    assert run["reference_total"] == document["reference_total"] and run["gap"] == 0
    assert run["unattributed"] == document["unattributed"]
    # Input fingerprint: every batch read, with its sha256.
    batches = rows(engine, Batch, "id")[["id", "kind", "sha256"]]
    inputs = rows(engine, RunInput, "batch_id")
    assert inputs["batch_id"].tolist() == batches["id"].tolist()
    assert inputs["sha256"].tolist() == batches["sha256"].tolist()
    assert sorted(inputs["kind"]) == ["costs", "usage"]
    # Per-client totals and lines equal the document's.
    clients = rows(engine, RunClient).set_index("client")["amount"].to_dict()
    assert clients == {c["client"]: c["amount"] for c in document["clients"]}
    lines = rows(engine, RunLine)
    expected = {(c["client"], ln["source"], ln["kind"], ln["amount"], ln["windows"])
                for c in document["clients"] for ln in c["lines"]}  # fmt: skip
    got = set(
        lines[["client", "source", "kind", "amount", "windows"]].itertuples(index=False, name=None)
    )
    assert got == expected and len(lines) == len(expected)
    figures = rows(engine, RunFigure).sort_values(["section", "position"])
    cascade = figures[figures["section"] == "cascade"]
    assert cascade["name"].tolist() == [c["line"] for c in document["cascade"]]
    assert cascade["amount"].tolist() == [c["amount"] for c in document["cascade"]]
    residual = figures[figures["section"] == "residual"]
    assert residual["amount"].tolist() == [r["amount"] for r in document["residual"]]
    exclusions = figures[figures["section"] == "exclusion"]
    assert exclusions["amount"].tolist() == [e["amount"] for e in document["exclusions"]]
    engine.dispose()


def test_run_table_is_allocate_table_plus_the_run_id(tmp_path: Path):
    url, data = f"sqlite:///{tmp_path / 's.db'}", str(tmp_path / "data")
    example_store(url, data)
    done = cli("run", "--month", "2026-11", "--key", "requests", "--db", url, "--data", data)
    assert done.exit_code == 0, done.output
    files = cli("allocate", "--config", str(RULES), "--month", "2026-11", "--key", "requests")
    body, _, last = done.stdout.rstrip("\n").rpartition("\n")
    assert body + "\n" == files.stdout + "\n"
    engine = engine_for(url)
    [run] = rows(engine, Run).to_dict("records")
    assert last == f"run {run['id']} recorded" and run["key_override"] == "requests"
    engine.dispose()


def test_run_refuses_a_store_at_another_schema_revision(store_url: str, tmp_path: Path):
    data = str(tmp_path / "data")
    example_store(store_url, data)
    engine = open_engine(resolve_settings(db=store_url, environ={}), foreign_keys=False)
    downgrade(engine, "0003")
    refused = cli("run", "--month", "2026-11", "--db", store_url, "--data", data)
    one_line_refusal(refused, "schema revision 0003", f"expects revision {head_revision()}",
                     "tenantcost db upgrade")  # fmt: skip
    refused = cli("status", "--db", store_url)
    one_line_refusal(refused, "schema revision 0003", f"expects revision {head_revision()}")
    engine.dispose()


def test_run_without_inputs_or_rules_is_one_line_and_records_nothing(
    store_url: str, tmp_path: Path
):
    data = str(tmp_path / "data")
    example_store(store_url, data, rules=False)
    refused = cli("run", "--month", "2026-11", "--db", store_url, "--data", data)
    one_line_refusal(refused, "holds no rules", "tenantcost rules load")
    assert cli("rules", "load", str(RULES), "--db", store_url).exit_code == 0
    refused = cli("run", "--month", "2026-10", "--db", store_url, "--data", data)
    one_line_refusal(refused, "no costs stored for 2026-10", "tenantcost ingest costs")
    refused = cli("run", "--month", "2026-13", "--db", store_url, "--data", data)
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    engine = engine_for(store_url)
    assert rows(engine, Run).empty and rows(engine, RunClient).empty
    engine.dispose()


def test_status_lists_months_hours_and_runs(store_url: str, tmp_path: Path):
    data = str(tmp_path / "data")
    assert cli("db", "upgrade", "--db", store_url).exit_code == 0
    empty = cli("status", "--db", store_url, "--format", "json")
    assert empty.exit_code == 0 and json.loads(empty.stdout) == []
    example_store(store_url, data)
    run_ids = []
    for _ in range(2):
        done = cli("run", "--month", "2026-11", "--format", "json", "--db", store_url,
                   "--data", data)  # fmt: skip
        run_ids.append(json.loads(done.stdout)["run_id"])
    status = cli("status", "--db", store_url, "--data", data, "--format", "json")
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout) == [
        {"month": "2026-11", "hours": 720, "costs_hours": 1, "usage_hours": 1, "runs": 2,
         "latest_run": run_ids[-1], "state": "open", "revisions": 0}
    ]  # fmt: skip
    december = cli("status", "--month", "2026-12", "--format", "json", "--db", store_url)
    assert json.loads(december.stdout) == [
        {"month": "2026-12", "hours": 744, "costs_hours": 0, "usage_hours": 0, "runs": 0,
         "latest_run": None, "state": "open", "revisions": 0}
    ]  # fmt: skip
    table_ = cli("status", "--db", store_url)
    assert table_.exit_code == 0, table_.output
    head, rule, row = table_.stdout.splitlines()
    assert head.split() == ["month", "hours", "costs", "h", "usage", "h", "runs", "latest",
                            "run", "state", "revisions"]  # fmt: skip
    assert set(rule) == {"-", " "}
    assert row.split() == ["2026-11", "720", "1", "1", "2", run_ids[-1], "open", "0"]
    one_line_refusal(cli("status", "--db", store_url, "--format", "csv"), "--format")


def test_covered_hours_counts_overlaps_once_and_clips_to_the_month():
    period = Period.month("2026-11")
    t = pd.Timestamp("2026-11-03T10:00Z")
    h = pd.Timedelta(hours=1)
    windows = pd.DataFrame({
        "window_start": [t, t, t + h, t + 5 * h, period.start - 2 * h, period.end - h],
        "window_end": [t + h, t + 3 * h, t + 2 * h, t + 6 * h, period.start + h, period.end + h],
    })  # fmt: skip
    # [10,13) + [15,16) + first hour + last hour of the month
    assert covered_hours(windows, period) == 3 + 1 + 1 + 1
    assert covered_hours(windows.iloc[:0], period) == 0.0


def test_run_exits_4_while_another_process_writes_and_records_nothing(
    store_url: str, tmp_path: Path
):
    data = str(tmp_path / "data")
    example_store(store_url, data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = str(Path(__file__).with_name("store_lock_holder.py"))
    holder = subprocess.Popen([sys.executable, script, store_url], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        locked = cli("run", "--month", "2026-11", "--db", store_url, "--data", data)
        assert locked.exit_code == 4, locked.output
        err = locked.stderr.strip()
        assert err.startswith("error: the store ") and "locked by another process" in err
        assert "\n" not in err
        engine = engine_for(store_url)
        assert rows(engine, Run).empty and rows(engine, RunClient).empty
        assert holder.stdin is not None
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
        done = cli("run", "--month", "2026-11", "--db", store_url, "--data", data, "--wait", "5")
        assert done.exit_code == 0, done.output
        assert len(rows(engine, Run)) == 1
        engine.dispose()
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(timeout=30)
