"""The closed-period cycle (`close`, `reopen`, the refusals of a closed month) on SQLite and
a real PostgreSQL 15: the bundled example ingested, run, closed (revision 1 = `allocate`),
refused while closed, reopened with a reason, corrected and closed again (revision 2 with
the reason and per-client differences) while revision 1 keeps its stored rows exactly.
Refusals are one line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.store.cycle import (
    IncompleteMonth,
    MonthClosed,
    MonthNotClosed,
    MonthState,
    NothingChanged,
    _statement_rows,
    close_month,
    closed_months,
    issued_revision,
    latest_issued,
    month_state,
    refuse_if_closed,
    reopen_month,
    statements,
)
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.models import (
    Batch,
    MonthEvent,
    RuleVersion,
    Run,
    RunClient,
    RunFigure,
    RunInput,
    RunLine,
    Statement,
    table,
)
from tenantcost.store.settings import resolve_settings
from tenantcost.timefmt import utc

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
RULES = EXAMPLE / "rules.yaml"
MONTH = "2026-11"
REASON = "usage of client-b was exported at half its count"
runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def engine_for(url: str) -> Engine:
    return open_engine(resolve_settings(db=url, environ={}), foreign_keys=False)


def one_line_refusal(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def example_store(url: str, data: str) -> list[str]:
    """The bundled example loaded into a new store; returns the --db/--data arguments."""
    db = ["--db", url, "--data", data]
    assert cli("db", "upgrade", *db).exit_code == 0
    assert cli("rules", "load", str(RULES), *db).exit_code == 0
    for kind, option, path in (("usage", "--usage", EXAMPLE / "usage.csv"),
                               ("costs", "--costs", EXAMPLE / "costs.json")):  # fmt: skip
        done = cli("ingest", kind, option, str(path), *db)
        assert done.exit_code == 0, done.output
    return db


def corrected_usage(folder: Path) -> Path:
    """The example's usage with client-b's API requests doubled (the correction)."""
    text = (EXAMPLE / "usage.csv").read_text().replace("api,client-b,1710,", "api,client-b,3420,")
    path = folder / "usage-corrected.csv"
    path.write_text(text)
    return path


def allocated(usage: Path) -> dict[str, int]:
    """Per-client amounts of `tenantcost allocate --format json` on the files."""
    done = cli("allocate", "--config", str(RULES), "--usage", str(usage), "--costs",
               str(EXAMPLE / "costs.json"), "--month", MONTH, "--format", "json")  # fmt: skip
    assert done.exit_code == 0, done.output
    return {c["client"]: c["amount"] for c in json.loads(done.stdout)["clients"]}


def rows(engine: Engine, model: type, **where: object) -> pd.DataFrame:
    t = table(model)
    query = select(t).where(*(t.c[k] == v for k, v in where.items()))
    with engine.connect() as connection:
        result = connection.execute(query)
        frame = pd.DataFrame(result.all(), columns=list(result.keys()))
    order = [c for c in ("id", "client", "position", "batch_id") if c in frame]
    return frame.sort_values(order[:1] or list(frame.columns)).reset_index(drop=True)


def count(engine: Engine, model: type) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table(model))).scalar())


def issued_rows(engine: Engine, run_id: str) -> dict[str, pd.DataFrame]:
    """Everything stored about an issued revision: its statements and its run's rows."""
    return {
        "statement": rows(engine, Statement, run_id=run_id),
        "month_event": rows(engine, MonthEvent, run_id=run_id),
        "run": rows(engine, Run, id=run_id),
        **{m.__tablename__: rows(engine, m, run_id=run_id)
           for m in (RunClient, RunLine, RunFigure, RunInput)},
    }  # fmt: skip


def test_the_full_cycle_on_the_bundled_example(store_url: str, tmp_path: Path):
    db = example_store(store_url, str(tmp_path / "data"))
    engine = engine_for(store_url)
    ran = cli("run", "--month", MONTH, "--format", "json", *db)
    assert ran.exit_code == 0, ran.output
    run1 = json.loads(ran.stdout)["run_id"]

    # The example holds one hour of November: close refuses, saying what is missing.
    refused = cli("close", "--month", MONTH, *db)
    one_line_refusal(refused, "2026-11 is incomplete", "719 of 720 hours lack costs",
                     "719 of 720 hours lack usage", "from 2026-11-01T00:00:00Z to "
                     "2026-11-03T10:00:00Z", "--allow-incomplete")  # fmt: skip
    assert count(engine, MonthEvent) == count(engine, Statement) == 0

    closed = cli("close", "--month", MONTH, "--allow-incomplete", *db)
    assert closed.exit_code == 0, closed.output
    assert f"revision 1 issued for 3 client(s) in USD from run {run1} (latest run, inputs " \
           "unchanged)" in closed.stdout  # fmt: skip
    assert "incomplete: 719 of 720 hours lack costs" in closed.stdout
    assert count(engine, Run) == 1  # the run was reused, not repeated
    first = rows(engine, Statement)
    assert dict(zip(first["client"], first["amount"], strict=True)) == allocated(
        EXAMPLE / "usage.csv"
    ) == {"client-a": 123458, "client-b": 77173, "client-c": 1569}  # fmt: skip
    assert set(first["revision"]) == {1} and set(first["run_id"]) == {run1}
    assert first["previous_amount"].isna().all() and (first["difference"] == first["amount"]).all()
    assert first["incomplete"].all() and first["reason"].isna().all()
    assert set(first["rule_ids"]) == {'["saas-2026-11"]'} and set(first["currency"]) == {"USD"}
    before = issued_rows(engine, run1)

    # Closed: whatever would change November is refused, naming reopen; nothing is written.
    fix = corrected_usage(tmp_path)
    batches, versions = count(engine, Batch), count(engine, RuleVersion)
    for args, what in ((["ingest", "usage", "--usage", str(fix)], "ingest usage"),
                       (["ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), "--mode",
                         "sum"], "ingest costs")):  # fmt: skip
        one_line_refusal(cli(*args, *db), f"{what} would change 2026-11, closed (revision 1",
                         "run `tenantcost reopen --month 2026-11 --reason TEXT` first")  # fmt: skip
    # re-ingesting identical rows into the closed month changes nothing, so it is no refusal
    same = cli("ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), *db)
    assert same.exit_code == 0 and same.stdout.startswith("costs: nothing would change")
    one_line_refusal(cli("close", "--month", MONTH, "--allow-incomplete", *db),
                     "2026-11 is already closed (revision 1", "to issue revision 2",
                     "`tenantcost reopen --month 2026-11 --reason TEXT`")  # fmt: skip
    mid_month = rule_file(tmp_path, "saas-2026-11-15", "2026-11-15")
    one_line_refusal(cli("rules", "load", str(mid_month), *db),
                     "rule version 'saas-2026-11-15'", "in force for hours of 2026-11",
                     "tenantcost reopen --month 2026-11")  # fmt: skip
    assert (count(engine, Batch), count(engine, RuleVersion)) == (batches, versions)

    # Reopen (a reason is required), correct, close: revision 2 with the reason and differences.
    one_line_refusal(cli("reopen", "--month", MONTH, *db), "--reason is required")
    one_line_refusal(cli("reopen", "--month", MONTH, "--reason", "  ", *db), "--reason is empty")
    done = cli("reopen", "--month", MONTH, "--reason", REASON, *db)
    assert done.exit_code == 0, done.output
    assert "2026-11 reopened after revision 1" in done.stdout
    one_line_refusal(cli("reopen", "--month", MONTH, "--reason", "again", *db),
                     "2026-11 is not closed (reopened after revision 1")  # fmt: skip
    assert cli("ingest", "usage", "--usage", str(fix), *db).exit_code == 0
    closed = cli("close", "--month", MONTH, "--allow-incomplete", *db)
    assert closed.exit_code == 0, closed.output
    assert "revision 2 issued for 3 client(s)" in closed.stdout and "(new run)" in closed.stdout
    assert f"reason: {REASON}" in closed.stdout
    second = rows(engine, Statement, revision=2).set_index("client")
    expected = allocated(fix)
    assert second["amount"].to_dict() == expected
    assert expected["client-b"] > 77173 > 0  # the correction did change the figures
    old = first.set_index("client")["amount"]
    assert second["previous_amount"].astype(int).to_dict() == old.to_dict()
    assert second["difference"].to_dict() == (second["amount"] - old).to_dict()
    assert set(second["reason"]) == {REASON} and second["run_id"].iloc[0] != run1
    assert closed.stdout.splitlines()[3].split() == [
        "client-b", "0.080106", "0.077173", "0.002933"]  # fmt: skip

    # Revision 1 keeps its stored figures exactly; history lists both revisions.
    after = issued_rows(engine, run1)
    for name, frame in before.items():
        pd.testing.assert_frame_equal(after[name], frame, check_exact=True, obj=name)
    history = json.loads(cli("history", "--format", "json", *db).stdout)
    assert [(h["client"], h["revision"], h["status"]) for h in history] == [
        (c, r, s) for c in ("client-a", "client-b", "client-c")
        for r, s in ((1, "superseded"), (2, "issued"))]  # fmt: skip
    assert [h["amount"] for h in history if h["revision"] == 2] == list(expected.values())
    status = json.loads(cli("status", "--format", "json", *db).stdout)
    assert [(s["month"], s["state"], s["revisions"], s["runs"]) for s in status] == [
        (MONTH, "closed", 2, 2)]  # fmt: skip
    engine.dispose()


def rule_file(folder: Path, version_id: str, effective_from: str) -> Path:
    """The example's rule file with a second version (same rules) from ``effective_from``."""
    document = yaml.safe_load(RULES.read_text())
    document.pop("sources")
    extra = {**document["rules"][0], "id": version_id, "effective_from": effective_from}
    document["rules"].append(extra)
    path = folder / f"rules-{version_id}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.fixture
def example(tmp_path: Path) -> Store:
    """The bundled example in a SQLite store, opened for the functions."""
    url, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    example_store(url, data)
    engine = engine_for(url)
    yield Store(engine, DataDir(data))
    engine.dispose()


def test_the_functions_the_service_calls(example: Store):
    engine = example.engine
    assert month_state(engine, MONTH) is MonthState.OPEN and issued_revision(engine, MONTH) == 0
    assert latest_issued(engine, MONTH) is None and statements(engine, MONTH).empty
    with pytest.raises(IncompleteMonth, match="719 of 720 hours lack costs"):
        close_month(example, MONTH, actor="token:ci")
    with pytest.raises(MonthNotClosed, match="never closed"):
        reopen_month(engine, MONTH, reason="x", actor="token:ci")
    closed = close_month(example, MONTH, allow_incomplete=True, actor="token:ci")
    assert (closed.revision, closed.reused_run, closed.incomplete) == (1, False, True)
    assert closed.statements["amount"].tolist() == [123458, 77173, 1569]
    issued = latest_issued(engine, MONTH)
    assert issued is not None and issued.run_id == closed.run_id and issued.revision == 1
    assert issued.issued_by == "token:ci" and issued.rule_ids == ["saas-2026-11"]
    assert issued.state is MonthState.CLOSED and issued.incomplete
    assert month_state(engine, MONTH) == "closed" and closed_months(
        engine, utc("2026-10-31T23:00Z"), utc("2026-12-01T00:00Z")) == [MONTH]  # fmt: skip
    assert closed_months(engine, utc("2026-12-01"), utc("2027-01-01")) == []
    with pytest.raises(MonthClosed, match="tenantcost reopen --month 2026-11"), \
            engine.connect() as connection:  # fmt: skip
        refuse_if_closed(connection, utc("2026-10-31T23:00Z"), utc("2026-11-01T01:00Z"), "test")
    with engine.connect() as connection:  # the hour before November is not November's
        refuse_if_closed(connection, utc("2026-10-31T23:00Z"), utc("2026-11-01T00:00Z"), "test")
    reopened = reopen_month(engine, MONTH, reason="  two\n words ", actor="token:ops")
    assert (reopened.revision, reopened.reason, reopened.actor) == (1, "two words", "token:ops")
    issued = latest_issued(engine, MONTH)
    assert issued is not None and issued.state is MonthState.OPEN and issued.revision == 1
    with pytest.raises(NothingChanged, match="nothing changed since revision 1 of 2026-11"):
        close_month(example, MONTH, allow_incomplete=True, actor="token:ci")
    assert issued_revision(engine, MONTH) == 1 and month_state(engine, MONTH) == "open"
    again = close_month(example, MONTH, allow_incomplete=True, actor="token:ci", force=True)
    assert (again.revision, again.reused_run, again.run_id) == (2, True, closed.run_id)
    assert again.reason == "two words" and again.statements["difference"].tolist() == [0, 0, 0]
    assert statements(engine, MONTH, 1)["amount"].tolist() == [123458, 77173, 1569]


def test_a_client_the_new_run_no_longer_has_gets_an_amount_0_revision(
    example: Store, tmp_path: Path
):
    close_month(example, MONTH, allow_incomplete=True, actor="t")
    reopen_month(example.engine, MONTH, reason="client-c left before November", actor="t")
    lines = (EXAMPLE / "usage.csv").read_text().splitlines()
    without_c = tmp_path / "usage-without-c.csv"
    without_c.write_text("\n".join(line for line in lines if "client-c" not in line) + "\n")
    db = ["--db", str(example.engine.url), "--data", example.data.url]
    assert cli("ingest", "usage", "--usage", str(without_c), *db).exit_code == 0
    closed = close_month(example, MONTH, allow_incomplete=True, actor="t")
    frame = closed.statements.set_index("client")
    assert frame.loc["client-c", "amount"] == 0
    assert frame.loc["client-c", "previous_amount"] == 1569
    assert frame.loc["client-c", "difference"] == -1569
    assert frame["amount"].to_dict() == {**allocated(without_c), "client-c": 0}


def test_close_runs_again_when_an_input_or_the_rule_file_changed(example: Store, tmp_path: Path):
    db = ["--db", str(example.engine.url), "--data", example.data.url]
    assert cli("run", "--month", MONTH, *db).exit_code == 0
    assert cli("run", "--month", MONTH, "--key", "requests", *db).exit_code == 0
    # The latest run has a --key override: statements are never issued from it.
    closed = close_month(example, MONTH, allow_incomplete=True, actor="t")
    assert not closed.reused_run and count(example.engine, Run) == 3
    reopen_month(example.engine, MONTH, reason="settings", actor="t")
    comment = tmp_path / "rules-commented.yaml"
    comment.write_text("# reviewed\n" + RULES.read_text())  # same versions, another file
    assert cli("rules", "load", str(comment), *db).exit_code == 0  # allowed: no version changes
    # A new run with the same figures and rules: issued only when forced (see
    # test_a_close_that_changes_nothing_is_refused_unless_forced).
    again = close_month(example, MONTH, allow_incomplete=True, actor="t", force=True)
    assert not again.reused_run and again.run_id != closed.run_id
    assert again.statements["difference"].tolist() == [0, 0, 0]


def test_close_reuses_a_run_whose_rules_and_inputs_are_still_the_stores(
    example: Store, tmp_path: Path
):
    """A version in force only over hours without costs changes nothing the run used."""
    db = ["--db", str(example.engine.url), "--data", example.data.url]
    late = rule_file(tmp_path, "saas-2026-11-20", "2026-11-20")
    assert cli("rules", "load", str(late), *db).exit_code == 0
    ran = cli("run", "--month", MONTH, "--format", "json", *db)
    assert ran.exit_code == 0, ran.output
    closed = close_month(example, MONTH, allow_incomplete=True, actor="t")
    assert closed.reused_run and closed.run_id == json.loads(ran.stdout)["run_id"]
    assert count(example.engine, Run) == 1


def test_rule_versions_outside_every_closed_month_still_load(example: Store, tmp_path: Path):
    db = ["--db", str(example.engine.url), "--data", example.data.url]
    close_month(example, MONTH, allow_incomplete=True, actor="t")
    december = rule_file(tmp_path, "saas-2026-12", "2026-12-01")
    done = cli("rules", "load", str(december), *db)
    assert done.exit_code == 0, done.output
    one_line_refusal(cli("rules", "load", str(rule_file(tmp_path, "saas-2026-11-30",
                                                        "2026-11-30T23:00:00Z")), *db),
                     "'saas-2026-11-30'", "2026-11")  # fmt: skip
    # Before the first version: in force until it, so no hour of November.
    document = yaml.safe_load(december.read_text())
    document["rules"].insert(0, {**document["rules"][0], "id": "saas-2026-10",
                                 "effective_from": "2026-10-01"})  # fmt: skip
    october = tmp_path / "rules-october.yaml"
    october.write_text(yaml.safe_dump(document, sort_keys=False))
    done = cli("rules", "load", str(october), *db)
    assert done.exit_code == 0, done.output


def complete_month(folder: Path, *, skip_usage_day: int | None = None) -> tuple[Path, Path]:
    """February 2026 (672 h) as daily cost windows and daily usage: the example's hour, one
    window a day. ``skip_usage_day`` leaves that day's usage out."""
    costs = json.loads((EXAMPLE / "costs.json").read_text())
    [hour] = costs["data"]
    days = pd.date_range("2026-02-01", periods=28, freq="D", tz="UTC")
    data = []
    for day in days:  # 28 windows of a handful of workloads: the test's input, not the code
        start, end = day.strftime("%Y-%m-%dT%H:%M:%SZ"), (day + pd.Timedelta(days=1)).strftime(
            "%Y-%m-%dT%H:%M:%SZ")  # fmt: skip
        window = {k: {**v, "window": {"start": start, "end": end}, "start": start, "end": end,
                      "minutes": 1440} for k, v in hour.items()}  # fmt: skip
        data.append(window)
    costs_path = folder / "costs-feb.json"
    costs_path.write_text(json.dumps({**costs, "data": data}))
    usage = pd.read_csv(EXAMPLE / "usage.csv")
    frames = []
    for i, day in enumerate(days):
        if i != skip_usage_day:
            frames.append(usage.assign(window_start=day.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                       window_end=(day + pd.Timedelta(days=1)).strftime(
                                           "%Y-%m-%dT%H:%M:%SZ")))  # fmt: skip
    usage_path = folder / "usage-feb.csv"
    pd.concat(frames).to_csv(usage_path, index=False)
    return costs_path, usage_path


def test_a_complete_month_closes_without_the_flag(tmp_path: Path):
    url, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    db = ["--db", url, "--data", data]
    document = yaml.safe_load(RULES.read_text())
    document.pop("sources")
    document["rules"][0] |= {"id": "saas-2026-02", "effective_from": "2026-02-01"}
    rules = tmp_path / "rules-feb.yaml"
    rules.write_text(yaml.safe_dump(document, sort_keys=False))
    costs, usage = complete_month(tmp_path, skip_usage_day=9)
    assert cli("db", "upgrade", *db).exit_code == 0
    assert cli("rules", "load", str(rules), *db).exit_code == 0
    for args in (["costs", "--costs", str(costs)], ["usage", "--usage", str(usage)]):
        done = cli("ingest", *args, *db)
        assert done.exit_code == 0, done.output
    refused = cli("close", "--month", "2026-02", *db)
    err = one_line_refusal(refused, "2026-02 is incomplete: 24 of 672 hours lack usage (first "
                           "from 2026-02-10T00:00:00Z to 2026-02-11T00:00:00Z)")  # fmt: skip
    assert "lack costs" not in err
    _, full = complete_month(tmp_path)
    assert cli("ingest", "usage", "--usage", str(full), *db).exit_code == 0
    closed = cli("close", "--month", "2026-02", *db)
    assert closed.exit_code == 0, closed.output
    assert "revision 1 issued for 3 client(s)" in closed.stdout
    assert "incomplete" not in closed.stdout
    engine = engine_for(url)
    assert not rows(engine, Statement)["incomplete"].any()
    engine.dispose()


def test_a_close_that_changes_nothing_is_refused_unless_forced(store_url: str, tmp_path: Path):
    """Reopen and close with no new input: refused in one line, nothing written; --force
    issues it; a correction needs no force."""
    db = example_store(store_url, str(tmp_path / "data"))
    assert cli("close", "--month", MONTH, "--allow-incomplete", *db).exit_code == 0
    assert cli("reopen", "--month", MONTH, "--reason", REASON, *db).exit_code == 0
    engine = engine_for(store_url)
    written = (count(engine, MonthEvent), count(engine, Statement))
    one_line_refusal(cli("close", "--month", MONTH, "--allow-incomplete", *db),
                     "nothing changed since revision 1 of 2026-11", "--force",
                     "to issue revision 2 anyway")  # fmt: skip
    assert (count(engine, MonthEvent), count(engine, Statement)) == written
    assert month_state(engine, MONTH) == "open"
    forced = cli("close", "--month", MONTH, "--allow-incomplete", "--force", *db)
    assert forced.exit_code == 0, forced.output
    assert "revision 2 issued for 3 client(s)" in forced.stdout
    assert statements(engine, MONTH, 2)["difference"].tolist() == [0, 0, 0]
    assert cli("reopen", "--month", MONTH, "--reason", REASON, *db).exit_code == 0
    fixed = cli("ingest", "usage", "--usage", str(corrected_usage(tmp_path)), *db)
    assert fixed.exit_code == 0, fixed.output
    corrected = cli("close", "--month", MONTH, "--allow-incomplete", *db)  # a change: no force
    assert corrected.exit_code == 0, corrected.output
    assert "revision 3 issued" in corrected.stdout
    assert statements(engine, MONTH, 3)["difference"].ne(0).any()
    engine.dispose()


def test_a_rule_or_completeness_change_alone_is_a_change(tmp_path: Path):
    """Same amounts, another rule version in force, or another completeness note: issued
    without --force (the statements say something new)."""
    from tenantcost.store.cycle import _unchanged

    url, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    example_store(url, data)
    engine = engine_for(url)
    store = Store(engine, DataDir(data))
    closed = close_month(store, MONTH, allow_incomplete=True, actor="t")
    reopen_month(engine, MONTH, reason="x", actor="t")
    run = rows(engine, Run, id=closed.run_id).iloc[0].to_dict()
    same = closed.statements.copy()
    same["previous_amount"] = same["amount"].astype("Int64")
    same["difference"] = 0
    with engine.connect() as connection:
        assert _unchanged(connection, MONTH, run, same, closed.detail)
        other_rule = {**run, "rule_ids": json.dumps(["saas-2026-11-20"])}
        assert not _unchanged(connection, MONTH, other_rule, same, closed.detail)
        assert not _unchanged(connection, MONTH, run, same, None)  # now complete
        new_client = pd.concat([same, pd.DataFrame({"client": ["client-d"], "amount": [0],
                                "previous_amount": pd.array([None], "Int64"),
                                "difference": [0]})], ignore_index=True)  # fmt: skip
        assert not _unchanged(connection, MONTH, run, new_client, closed.detail)
    engine.dispose()


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path):
    url, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    db = ["--db", url, "--data", data]
    assert cli("db", "upgrade", *db).exit_code == 0
    one_line_refusal(cli("close", "--month", "2026-13", *db), "2026-13")
    one_line_refusal(cli("reopen", "--month", "11-2026", "--reason", "x", *db), "11-2026")
    one_line_refusal(cli("close", "--month", MONTH, *db), "720 of 720 hours lack costs")
    one_line_refusal(cli("close", "--month", MONTH, "--allow-incomplete", *db),
                     "no costs stored for 2026-11", "the store has no costs at all")  # fmt: skip
    one_line_refusal(cli("reopen", "--month", MONTH, "--reason", "x", *db),
                     "2026-11 is not closed (never closed)")  # fmt: skip
    engine = engine_for(url)
    assert count(engine, MonthEvent) == count(engine, Statement) == count(engine, Run) == 0
    engine.dispose()


@contextmanager
def lock_held(url: str) -> Iterator[None]:
    """Another process holds the store's write lock meanwhile (tests/store_lock_holder.py)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, str(ROOT / "tests" / "store_lock_holder.py"), url],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=env)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.communicate("go\n", timeout=30)


def test_close_and_reopen_exit_4_while_another_process_writes(tmp_path: Path):
    url, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    db = example_store(url, data)
    engine = engine_for(url)
    for args, state in (
        (["close", "--month", MONTH, "--allow-incomplete"], MonthState.OPEN),
        (["reopen", "--month", MONTH, "--reason", "x"], MonthState.CLOSED),
    ):
        with lock_held(url):
            done = cli(*args, *db)
            assert done.exit_code == 4, done.output
            assert "locked by another process" in done.stderr
        assert month_state(engine, MONTH) is state  # nothing written
        assert cli(*args, *db).exit_code == 0
    assert count(engine, MonthEvent) == 2
    engine.dispose()


def test_close_and_ingest_racing_never_issue_stale_figures(store_url: str, tmp_path: Path):
    """Two real processes: whichever takes the lock first wins; the other is refused (ingest
    after close) or sees the batch (close after ingest), never a closed month with a batch
    committed after its statements."""
    data = str(tmp_path / "data")
    db = example_store(store_url, data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "tenantcost"]
    fix = corrected_usage(tmp_path)
    procs = [subprocess.Popen([*base, *args, *db, "--wait", "60"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
             for args in (["close", "--month", MONTH, "--allow-incomplete"],
                          ["ingest", "usage", "--usage", str(fix)])]  # fmt: skip
    (_, close_err), (_, ingest_err) = (p.communicate(timeout=120) for p in procs)
    close_rc, ingest_rc = (p.returncode for p in procs)
    engine = engine_for(store_url)
    run_id = rows(engine, MonthEvent)["run_id"].tolist()
    inputs = set(rows(engine, RunInput, run_id=run_id[0])["batch_id"]) if run_id else set()
    batches = set(rows(engine, Batch)["id"])
    if ingest_rc == 0 and close_rc == 0:  # ingest first: the close issued from its batch
        assert inputs == batches and len(batches) == 3
    elif close_rc == 0:  # close first: the ingest was refused, naming reopen
        assert ingest_rc == 2 and "tenantcost reopen --month 2026-11" in ingest_err
        assert inputs == batches and len(batches) == 2
    else:  # the ingest committed while the close computed: the close asks to run again
        assert close_rc == 2 and (
            "changed while closing; run close again" in close_err
            or "ingested while the run was computing" in close_err
        )
        assert ingest_rc == 0 and run_id == []
    assert "Traceback" not in close_err + ingest_err
    engine.dispose()


amounts = st.dictionaries(st.sampled_from([f"c{i}" for i in range(8)]),
                          st.integers(min_value=0, max_value=10**15), max_size=8)  # fmt: skip


@settings(deadline=None)  # a loaded CI machine must not fail a pure function on time
@given(amounts, amounts)
def test_a_revision_covers_every_client_and_its_differences_add_up(new: dict, old: dict):
    """Revision N+1: every client of the run and of revision N, amounts of the run (0 for a
    client gone), previous = revision N's, differences summing to the change of the total."""
    current = pd.DataFrame({"client": list(new), "amount": list(new.values())},
                           dtype="object").astype({"amount": "int64"})  # fmt: skip
    before = pd.DataFrame({"client": list(old), "previous_amount": list(old.values())},
                          dtype="object").astype({"previous_amount": "int64"})  # fmt: skip
    rows = _statement_rows(current, before)
    assert rows["client"].tolist() == sorted(set(new) | set(old))
    assert rows.set_index("client")["amount"].to_dict() == {
        c: new.get(c, 0) for c in rows["client"]
    }
    previous = rows.set_index("client")["previous_amount"]
    assert {c: (None if pd.isna(v) else int(v)) for c, v in previous.items()} == {
        c: old.get(c) for c in rows["client"]}  # fmt: skip
    assert int(rows["difference"].sum()) == sum(new.values()) - sum(old.values())


def _cpu_ticks(pid: int) -> int:
    """User + system CPU time of a process so far, in clock ticks (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _wait_until_blocked(procs: list[subprocess.Popen[str]], timeout: float = 90) -> None:
    """Until every process has used (almost) no CPU for a second: each is waiting for the
    store's lock (SQLite sleeps in its busy handler, PostgreSQL polls every 0.1 s)."""
    import time

    deadline = time.monotonic() + timeout
    before = [_cpu_ticks(p.pid) for p in procs]
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = [_cpu_ticks(p.pid) for p in procs]
        if all(n - b <= 3 for n, b in zip(now, before, strict=True)):
            return
        before = now
    raise AssertionError("the closes never waited for the lock")


def test_two_closes_racing_issue_once_and_the_other_says_who_closed(
    store_url: str, tmp_path: Path
):
    """Both closes start while the month is open and wait for the lock held by a third
    process, then race to record their runs and issue. One revision is issued; the other
    close says the month was closed by another process meanwhile (exit 2: it issued
    nothing), never that the inputs changed."""
    data = str(tmp_path / "data")
    db = example_store(store_url, data)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    close = [sys.executable, "-m", "tenantcost", "close", "--month", MONTH, "--allow-incomplete",
             *db, "--wait", "120"]  # fmt: skip
    with lock_held(store_url):
        procs = [subprocess.Popen(close, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env) for _ in range(2)]  # fmt: skip
        _wait_until_blocked(procs)
    outputs = [p.communicate(timeout=180) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outputs
    loser = next(err for p, (_, err) in zip(procs, outputs, strict=True) if p.returncode == 2)
    assert loser.startswith(f"error: {MONTH} was closed by another process (revision 1 issued ")
    assert "this close issued nothing" in loser and "\n" not in loser.strip()
    assert "changed while closing" not in loser and "Traceback" not in loser
    engine = engine_for(store_url)
    assert rows(engine, MonthEvent)["revision"].tolist() == [1]
    assert set(rows(engine, Statement)["revision"]) == {1}
    engine.dispose()
