"""The store's schema on SQLite and on a real PostgreSQL 15: migrations up from nothing, down
to nothing and up again; the models equal the head migration; every command but `db upgrade`
refuses a store at another revision with one line (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import IntegrityError, StatementError
from sqlmodel import Session, select
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.store.engine import open_engine
from tenantcost.store.models import METADATA, Batch, StoreMeta
from tenantcost.store.schema import (
    current_revision,
    downgrade,
    head_revision,
    known_revisions,
    stamp,
    upgrade,
)
from tenantcost.store.settings import resolve_settings

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "examples" / "saas-three-clients" / "rules.yaml"
RUN_TABLES = {"run", "run_input", "run_client", "run_line", "run_figure"}
CYCLE_TABLES = {"month_event", "statement"}
SERVICE_TABLES = {"token", "idempotency_key"}
REPORT_TABLES = {"run_report", "run_pack", "run_client_figure", "run_client_service", "run_pool",
                 "run_unattributed", "run_workload"}  # fmt: skip
WEB_TABLES = {"web_session_end"}
CATALOG_TABLES = {"catalog_load", "catalog_client"}
WITHDRAW_TABLES = {"batch_withdrawal"}
BILLING_TABLES = {"billing_cell"}
OTLP_TABLES = {"otlp_series"}
COMPACTION_TABLES = {"usage_compaction"}
SHEET_TABLES = {"sheet_render", "sheet_render_job"}
BRIDGE_TABLES = {"month_bridge", "month_bridge_client", "month_bridge_part"}
WATCH_TABLES = {"watch_snapshot", "watch_entry"}
DAILY_TABLES = {"watch_daily"}
FX_TABLES = {"fx_load", "fx_rate", "run_fx", "run_fx_client", "run_fx_line",
             "run_fx_workload", "run_fx_unattributed", "run_fx_day"}  # fmt: skip
GAUGE_TABLES = {"usage_metric", "usage_sample"}
ALERT_TABLES = {"alert_delivery"}
BUDGET_TABLES = {"budget_version", "budget_client"}
LATER = (
    REPORT_TABLES
    | SERVICE_TABLES
    | WEB_TABLES
    | CATALOG_TABLES
    | WITHDRAW_TABLES
    | BILLING_TABLES
    | OTLP_TABLES
    | COMPACTION_TABLES
    | BRIDGE_TABLES
    | SHEET_TABLES
    | WATCH_TABLES
    | BUDGET_TABLES
    | ALERT_TABLES
    | DAILY_TABLES
    | FX_TABLES
    | GAUGE_TABLES
)
"""The tables after 0005 (cycle), dropped by the first downgrade steps."""
TABLES = {"store_meta", "rule_file", "rule_version", "batch", "batch_cell", "batch_file",
          *RUN_TABLES, *CYCLE_TABLES, *SERVICE_TABLES, *REPORT_TABLES, *WEB_TABLES,
          *CATALOG_TABLES, *WITHDRAW_TABLES, *BILLING_TABLES, *OTLP_TABLES,
          *COMPACTION_TABLES, *BRIDGE_TABLES, *SHEET_TABLES, *WATCH_TABLES,
          *BUDGET_TABLES, *ALERT_TABLES, *DAILY_TABLES, *FX_TABLES, *GAUGE_TABLES}  # fmt: skip
HEAD = "0033"
BATCH_TABLES = {"batch", "batch_cell", "batch_file"}
runner = CliRunner()


def engine_for(url: str, *, migrating: bool = False) -> Engine:
    settings = resolve_settings(db=url, environ={})
    return open_engine(settings, create=True, foreign_keys=not migrating)


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def cli(*args: str):
    return runner.invoke(app, list(args))


def assert_one_line_refusal(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    return err


def test_the_migrations_form_one_chain_ending_at_head():
    assert known_revisions() == {"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008",
                                 "0009", "0010", "0011", "0012", "0013", "0014",
                                 "0015", "0016", "0017", "0018", "0020", "0021",
                                 "0022", "0023", "0024", "0025", "0026", "0027",
                                 "0028", "0029", "0030", "0031", "0032",
                                 "0033"}  # fmt: skip
    assert head_revision() == HEAD


def test_upgrade_from_empty_then_down_to_base_and_up_again(store_url: str):
    engine = engine_for(store_url, migrating=True)
    assert current_revision(engine) is None and tables(engine) == set()
    done = upgrade(engine)
    assert (done.before, done.after) == (None, HEAD)
    assert tables(engine) == TABLES
    assert "rule_id" in {c["name"] for c in inspect(engine).get_columns("run_line")}
    run_line_indexes = {i["name"] for i in inspect(engine).get_indexes("run_line")}
    assert "ix_run_line_run_id_client" in run_line_indexes
    for name in ("month_event", "statement"):
        assert "client_reason" in {c["name"] for c in inspect(engine).get_columns(name)}
    assert "invoice" in {c["name"] for c in inspect(engine).get_columns("run")}
    key_index = {i["name"] for i in inspect(engine).get_indexes("idempotency_key")}
    assert "ix_idempotency_key_key" in key_index
    batch_file_indexes = {i["name"] for i in inspect(engine).get_indexes("batch_file")}
    assert "ix_batch_file_day_batch_id" in batch_file_indexes
    token_checks = inspect(engine).get_check_constraints("token")
    assert any("product" in c["sqltext"] for c in token_checks)
    part_indexes = {i["name"] for i in inspect(engine).get_indexes("month_bridge_part")}
    assert "ix_month_bridge_part_bridge_id_client" in part_indexes
    claim = {c["name"] for c in inspect(engine).get_columns("alert_delivery")}
    assert {"claimed_by", "claimed_at"} <= claim
    downgrade(engine, "0032")
    assert current_revision(engine) == "0032" and tables(engine) == TABLES - GAUGE_TABLES
    downgrade(engine, "0026")
    assert (
        current_revision(engine) == "0026" and tables(engine) == TABLES - FX_TABLES - GAUGE_TABLES
    )
    downgrade(engine, "0025")
    at_0025 = TABLES - DAILY_TABLES - FX_TABLES - GAUGE_TABLES
    assert current_revision(engine) == "0025" and tables(engine) == at_0025
    downgrade(engine, "0023")
    after = inspect(engine)
    assert not {"claimed_by", "claimed_at"} & {
        c["name"] for c in after.get_columns("alert_delivery")
    }
    assert len(after.get_check_constraints("alert_delivery")) == 3  # kept by SQLite's table copy
    downgrade(engine, "0022")
    at_0022 = TABLES - ALERT_TABLES - DAILY_TABLES - FX_TABLES - GAUGE_TABLES
    assert current_revision(engine) == "0022" and tables(engine) == at_0022
    downgrade(engine, "0021")
    at_0021 = TABLES - BUDGET_TABLES - ALERT_TABLES - DAILY_TABLES - FX_TABLES - GAUGE_TABLES
    assert current_revision(engine) == "0021" and tables(engine) == at_0021
    after_0020 = (
        WATCH_TABLES | BUDGET_TABLES | ALERT_TABLES | DAILY_TABLES | FX_TABLES | GAUGE_TABLES
    )
    downgrade(engine, "0020")
    assert current_revision(engine) == "0020" and tables(engine) == TABLES - after_0020
    downgrade(engine, "0018")
    assert current_revision(engine) == "0018" and tables(engine) == TABLES - after_0020
    token_checks = inspect(engine).get_check_constraints("token")
    assert token_checks and not any("product" in c["sqltext"] for c in token_checks)
    downgrade(engine, "0017")
    at_0017 = TABLES - SHEET_TABLES - after_0020
    assert current_revision(engine) == "0017" and tables(engine) == at_0017
    downgrade(engine, "0016")
    without = SHEET_TABLES | BRIDGE_TABLES | after_0020
    assert current_revision(engine) == "0016" and tables(engine) == TABLES - without
    downgrade(engine, "0015")
    at_0015 = TABLES - without - COMPACTION_TABLES
    assert current_revision(engine) == "0015" and tables(engine) == at_0015
    batch_file_indexes = {i["name"] for i in inspect(engine).get_indexes("batch_file")}
    assert "ix_batch_file_day_batch_id" not in batch_file_indexes
    downgrade(engine, "0014")
    at_0014 = at_0015 - OTLP_TABLES
    assert current_revision(engine) == "0014" and tables(engine) == at_0014
    downgrade(engine, "0013")
    at_0013 = at_0014
    assert current_revision(engine) == "0013" and tables(engine) == at_0013
    assert "ix_idempotency_key_key" not in {
        i["name"] for i in inspect(engine).get_indexes("idempotency_key")
    }
    downgrade(engine, "0012")
    assert current_revision(engine) == "0012" and tables(engine) == at_0013 - BILLING_TABLES
    assert "invoice" not in {c["name"] for c in inspect(engine).get_columns("run")}
    downgrade(engine, "0011")
    assert current_revision(engine) == "0011" and tables(engine) == at_0013 - BILLING_TABLES
    for name in ("month_event", "statement"):
        assert "client_reason" not in {c["name"] for c in inspect(engine).get_columns(name)}
    downgrade(engine, "0010")
    at_0010 = at_0013 - WITHDRAW_TABLES - BILLING_TABLES
    assert current_revision(engine) == "0010" and tables(engine) == at_0010
    downgrade(engine, "0009")
    assert current_revision(engine) == "0009" and tables(engine) == at_0010
    assert "ix_run_line_run_id_client" not in {
        i["name"] for i in inspect(engine).get_indexes("run_line")
    }
    downgrade(engine, "0008")
    assert current_revision(engine) == "0008"
    assert tables(engine) == at_0010 - CATALOG_TABLES
    downgrade(engine, "0007")
    assert current_revision(engine) == "0007"
    assert tables(engine) == at_0010 - CATALOG_TABLES - WEB_TABLES
    downgrade(engine, "0006")
    assert current_revision(engine) == "0006"
    assert tables(engine) == at_0010 - CATALOG_TABLES - WEB_TABLES - REPORT_TABLES
    assert "rule_id" not in {c["name"] for c in inspect(engine).get_columns("run_line")}
    downgrade(engine, "0005")
    assert current_revision(engine) == "0005"
    assert tables(engine) == at_0010 - CATALOG_TABLES - WEB_TABLES - REPORT_TABLES - SERVICE_TABLES
    downgrade(engine, "0004")
    assert current_revision(engine) == "0004"
    assert tables(engine) == TABLES - LATER - CYCLE_TABLES
    downgrade(engine, "0003")
    assert current_revision(engine) == "0003"
    assert tables(engine) == TABLES - LATER - CYCLE_TABLES - RUN_TABLES
    downgrade(engine, "0002")
    assert current_revision(engine) == "0002"
    assert tables(engine) == (
        TABLES - LATER - CYCLE_TABLES - RUN_TABLES - {"batch_cell", "batch_file"}
    )
    downgrade(engine, "0001")
    assert current_revision(engine) == "0001"
    assert tables(engine) == TABLES - LATER - CYCLE_TABLES - RUN_TABLES - BATCH_TABLES
    downgrade(engine, "base")
    assert current_revision(engine) is None and tables(engine) == set()
    assert upgrade(engine).after == HEAD and tables(engine) == TABLES
    assert upgrade(engine).before == HEAD  # a second upgrade does nothing
    engine.dispose()


def test_the_models_are_exactly_the_head_migration(store_url: str):
    """Autogenerate finds nothing to do at head: no table, column, type, nullability,
    index or constraint differs between tenantcost.store.models and the migrations."""
    engine = engine_for(store_url, migrating=True)
    upgrade(engine)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, METADATA) == []
    engine.dispose()


def test_db_upgrade_command_creates_then_reports_current(store_url: str):
    first = cli("db", "upgrade", "--db", store_url)
    assert first.exit_code == 0, first.output
    assert first.stdout.endswith(f"schema upgraded from (empty) to revision {HEAD}\n")
    again = cli("db", "upgrade", "--db", store_url, "--data", "/unused")
    assert again.exit_code == 0, again.output
    assert again.stdout.endswith(f"schema already at revision {HEAD} (current)\n")
    engine = engine_for(store_url)
    with Session(engine) as session:
        facts = {m.key: m.value for m in session.exec(select(StoreMeta))}
    assert facts["created_with"] == facts["upgraded_with"] == "tenantcost 0.1.0"
    assert facts["created_by"] and facts["created_at"] == facts["upgraded_at"]
    engine.dispose()


def test_a_store_at_an_older_revision_is_refused_until_upgraded(store_url: str):
    engine = engine_for(store_url, migrating=True)
    upgrade(engine)
    downgrade(engine, "0001")
    refused = cli("rules", "load", str(RULES), "--db", store_url)
    assert_one_line_refusal(
        refused, "schema revision 0001", f"expects revision {HEAD}", "run `tenantcost db upgrade`"
    )
    nothing_written = TABLES - LATER - CYCLE_TABLES - RUN_TABLES - BATCH_TABLES
    assert tables(engine) == nothing_written
    assert cli("db", "upgrade", "--db", store_url).exit_code == 0
    assert cli("rules", "load", str(RULES), "--db", store_url).exit_code == 0
    engine.dispose()


def test_an_empty_database_is_refused(store_url: str):
    engine = engine_for(store_url)
    with engine.connect():
        pass  # SQLite: the file now exists, empty
    refused = cli("rules", "load", str(RULES), "--db", store_url)
    assert_one_line_refusal(refused, "has no tenantcost schema", "run `tenantcost db upgrade`")
    engine.dispose()


def test_a_store_at_a_newer_revision_is_refused_even_by_upgrade(store_url: str):
    engine = engine_for(store_url, migrating=True)
    upgrade(engine)
    with engine.begin() as connection:  # what a later tenantcost would leave behind
        connection.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    for args in (["rules", "load", str(RULES)], ["db", "upgrade"]):
        refused = cli(*args, "--db", store_url)
        assert_one_line_refusal(
            refused, "schema revision 0099", "newer than this tenantcost", f"expects {HEAD}"
        )
    assert current_revision(engine) == "0099"
    engine.dispose()


def test_stamp_records_a_revision_without_migrating(store_url: str):
    engine = engine_for(store_url, migrating=True)
    upgrade(engine)
    stamp(engine, "0001")
    assert current_revision(engine) == "0001" and "batch" in tables(engine)
    engine.dispose()


def test_times_are_aware_utc_on_every_backend(store_url: str):
    engine = engine_for(store_url, migrating=True)
    upgrade(engine)
    start = datetime(2026, 11, 7, 1, 0, tzinfo=timezone(timedelta(hours=1)))  # 00:00 UTC
    batch = Batch(uid="b" * 32, kind="usage", source="usage.csv", rows=3, sha256="0" * 64,
                  window_from=start, window_to=start + timedelta(hours=1), actor="t")  # fmt: skip
    with Session(engine) as session:
        session.add(batch)
        session.commit()
    with Session(engine) as session:
        stored = session.exec(select(Batch)).one()
    assert stored.window_from == datetime(2026, 11, 7, tzinfo=UTC)
    assert stored.window_from.tzinfo == UTC and stored.created_at.tzinfo == UTC
    assert (stored.mode, stored.status) == ("replace", "pending")
    with pytest.raises(StatementError, match="naive"), Session(engine) as session:
        session.add(Batch(uid="c" * 32, kind="usage", source="x", rows=0, sha256="0" * 64,
                          window_from=datetime(2026, 11, 7), window_to=datetime(2026, 11, 8),
                          actor="t"))  # fmt: skip
        session.commit()
    engine.dispose()


def test_batch_constraints_hold_on_every_backend(store_url: str):
    engine = engine_for(store_url, migrating=True)
    upgrade(engine)
    t0 = datetime(2026, 11, 7, tzinfo=UTC)
    bad = [{"kind": "invoices"}, {"mode": "append"}, {"status": "done"}, {"rows": -1},
           {"window_to": t0}]  # fmt: skip
    for change in bad:
        values = dict(uid="d" * 32, kind="costs", source="x", rows=1, sha256="0" * 64,
                      window_from=t0, window_to=t0 + timedelta(hours=1), actor="t")  # fmt: skip
        with pytest.raises(IntegrityError), Session(engine) as session:
            session.add(Batch(**(values | change)))
            session.commit()
    engine.dispose()


def test_0011_keeps_the_batches_and_admits_withdrawn(store_url: str):
    """0011 rebuilds ``batch`` on SQLite (a CHECK changes): rows survive both ways, and a
    withdrawn batch stays out of the figures after a downgrade (``aborted``)."""
    engine = engine_for(store_url, migrating=True)
    upgrade(engine)
    t0 = datetime(2026, 11, 7, tzinfo=UTC)
    with Session(engine) as session:
        for uid, status in (("e" * 32, "committed"), ("f" * 32, "withdrawn")):
            session.add(Batch(uid=uid, kind="usage", source="x", rows=1, sha256="0" * 64,
                              window_from=t0, window_to=t0 + timedelta(hours=1), actor="t",
                              status=status))  # fmt: skip
        session.commit()
    downgrade(engine, "0010")
    upgrade(engine)
    with Session(engine) as session:
        kept = sorted((b.uid[0], b.status) for b in session.exec(select(Batch)))
    assert kept == [("e", "committed"), ("f", "aborted")]
    engine.dispose()


def test_0020_admits_product_tokens_and_still_refuses_unknown_roles(store_url: str):
    """0020 rebuilds ``token`` on SQLite (its role CHECK gains ``product``): existing tokens
    survive, a product token is stored, a made-up role is still refused."""
    from tenantcost.service.tokens import create_token

    engine = engine_for(store_url, migrating=True)
    upgrade(engine)
    downgrade(engine, "0018")
    create_token(engine, "finance", name="before", actor="t")
    upgrade(engine)
    create_token(engine, "product", name="pricing", actor="t")
    with pytest.raises(IntegrityError), engine.begin() as connection:  # past check_role
        connection.execute(text("INSERT INTO token (name, role, clients, hash, created_at, "
                                "created_by) VALUES ('x', 'auditor', '[]', 'h', "
                                "CURRENT_TIMESTAMP, 't')"))  # fmt: skip
    with engine.connect() as connection:
        roles = dict(connection.execute(text("SELECT name, role FROM token")).all())
    assert roles == {"before": "finance", "pricing": "product"}
    engine.dispose()


def test_sqlite_store_uses_wal_busy_timeout_and_foreign_keys(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert cli("db", "upgrade", "--db", url).exit_code == 0
    engine = engine_for(url)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_a_missing_sqlite_store_is_not_created_by_other_commands(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    refused = cli("rules", "load", str(RULES), "--db", url)
    assert_one_line_refusal(refused, "no store at", "typo.db", "tenantcost db upgrade")
    assert not (tmp_path / "typo.db").exists()
    refused = cli("db", "upgrade", "--db", f"sqlite:///{tmp_path / 'no' / 'x.db'}")
    assert_one_line_refusal(refused, "--db", "folder", "does not exist")


def test_an_unreachable_server_is_one_line(tmp_path: Path):
    from .postgres_fixture import free_port

    url = f"postgresql://tc:secret@127.0.0.1:{free_port()}/tc"
    err = assert_one_line_refusal(cli("db", "upgrade", "--db", url), "--db", "cannot use the store")
    assert "secret" not in err and "tc:***@" in err


def test_help_imports_no_database_module():
    """`tenantcost --help` stays fast: SQLAlchemy, SQLModel and Alembic load with the store
    commands only."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tenantcost", "--help"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in proc.stderr.splitlines()}
    assert imported.isdisjoint({"sqlalchemy", "sqlmodel", "alembic", "psycopg"})


def test_a_new_migration_starts_empty_because_head_is_the_models(tmp_path: Path):
    """scripts/new_migration.py numbers the next revision and, with the models unchanged,
    finds nothing to migrate."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "new_migration.py"),
                           "nothing yet", "--out", str(tmp_path)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    [script] = tmp_path.glob("*.py")
    following = f"{int(HEAD) + 1:04d}"
    assert script.name == f"{following}_nothing_yet.py" and str(script) in proc.stdout
    text = script.read_text()
    assert f"revision = '{following}'" in text and f"down_revision = '{HEAD}'" in text
    assert "op." not in text  # no operation generated
