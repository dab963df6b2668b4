"""Billing data in the store, on SQLite and PostgreSQL, one store per backend:
`ingest billing` stores Parquet with exact decimals; a restated export replaces the earlier
batch (superseded, withdrawable); `status` shows the coverage; `close` refuses a month the
billing data does not cover, then records the invoice cascade with the revision; the API
serves it to finance and admin only (a real `tenantcost serve`).

The billing files are FOCUS 1.2 CSV. Until the reader (``tenantcost.readers.billing``) is
importable, the canonical view is built from them here with DuckDB, as the reader builds it
(the CLI test needs the reader and is skipped without it).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pandas as pd
import pytest
from sqlalchemy import Engine, select

from tenantcost.config.billing import BILLING_MATCH_COLUMNS
from tenantcost.errors import InputError
from tenantcost.split import connect
from tenantcost.store.actor import os_actor
from tenantcost.store.batches import list_batches, withdraw_batch
from tenantcost.store.billing import stored_billing
from tenantcost.store.billing_ingest import ingest_billing_views
from tenantcost.store.cycle import UnbilledMonth, close_month, latest_issued
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.ingest import ingest_cost_table, ingest_usage
from tenantcost.store.models import Run, table
from tenantcost.store.rules import load_rule_file
from tenantcost.store.runs import run_month
from tenantcost.store.schema import upgrade
from tenantcost.store.settings import resolve_settings
from tenantcost.store.status import month_status, status_table
from tenantcost.windows import Period

from .factories import costs
from .service_server import create_token, invoke, running_service
from .store_copy import copy_store

MONTH = "2026-11"
DAYS = 30
RULES = """
currency: USD
billing:
  clusters:
    - name: prod
      match: {tags: {"eks:cluster-name": prod}}
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {namespace: saas, controller: api}, class: shared, service: api, key: requests}
      - {match: {name: __idle__}, class: idle}
    idle: keep
    billed:
      - {match: {ServiceName: Database}, class: shared, key: requests, services: [api]}
      - {match: {ChargeCategory: Tax}, class: overhead}
"""
FOCUS = ["BillingAccountId", "SubAccountId", "InvoiceId", "BillingPeriodStart", "BillingPeriodEnd",
         "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeClass", "ServiceName",
         "BilledCost", "EffectiveCost", "BillingCurrency", "Tags"]  # fmt: skip
NODE_TAGS = '{"eks:cluster-name": "prod"}'


def day(i: int) -> pd.Timestamp:
    return pd.Timestamp("2026-11-01T00:00:00Z") + pd.Timedelta(days=i)


def iso(t: pd.Timestamp) -> str:
    return t.isoformat().replace("+00:00", "Z")


def billing_rows(days: int, node: str) -> list[dict[str, str]]:
    """A FOCUS 1.2 export of November up to day ``days``: the node billed daily (``node``
    effective), a database daily, the month's tax once."""
    common = {"BillingAccountId": "111", "SubAccountId": "222", "InvoiceId": "INV-1",
              "BillingPeriodStart": iso(day(0)), "BillingPeriodEnd": iso(day(DAYS)),
              "ChargeClass": "", "BillingCurrency": "USD"}  # fmt: skip
    rows = []
    for i in range(days):  # one line each per day: a month's export
        when = {"ChargePeriodStart": iso(day(i)), "ChargePeriodEnd": iso(day(i + 1))}
        rows.append({**common, **when, "ChargeCategory": "Usage", "ServiceName": "Compute",
                     "BilledCost": node, "EffectiveCost": node, "Tags": NODE_TAGS})  # fmt: skip
        rows.append({**common, **when, "ChargeCategory": "Usage", "ServiceName": "Database",
                     "BilledCost": "1.0000000001", "EffectiveCost": "1.0000000001",
                     "Tags": "{}"})  # fmt: skip
    rows.append({**common, "ChargePeriodStart": iso(day(0)), "ChargePeriodEnd": iso(day(DAYS)),
                 "ChargeCategory": "Tax", "ServiceName": "Tax", "BilledCost": "5.5",
                 "EffectiveCost": "5.5", "Tags": "{}"})  # fmt: skip
    return rows


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FOCUS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def micro(values: list[str]) -> int:
    """Exact decimal sum, rounded half-even once to micro-units (as docs/invoice.md rounds B)."""
    total = sum((Decimal(v) for v in values), Decimal(0))
    return int(total.quantize(Decimal("0.000001"), rounding=ROUND_HALF_EVEN) * 1_000_000)


@dataclass(frozen=True)
class CanonicalView:
    """The reader's ``BillingData`` fields the store needs."""

    view: str
    split_view: str | None
    origin: str


def canonical(con: duckdb.DuckDBPyConnection, path: Path) -> CanonicalView:
    """The canonical billing view of a FOCUS CSV (the reader's columns and types)."""
    header = path.read_text().splitlines()[0].split(",")
    text = ", ".join(
        f'coalesce("{c}", \'\') AS "{c}"' if c in header else f"'' AS \"{c}\""
        for c in BILLING_MATCH_COLUMNS
    )
    name = "canonical_" + path.stem.replace("-", "_")
    con.execute(f"""CREATE OR REPLACE TEMP VIEW {name} AS SELECT
        filename AS x_file, (row_number() OVER ())::BIGINT AS x_row, {text},
        BillingPeriodStart::TIMESTAMPTZ AS BillingPeriodStart,
        BillingPeriodEnd::TIMESTAMPTZ AS BillingPeriodEnd,
        ChargePeriodStart::TIMESTAMPTZ AS ChargePeriodStart,
        ChargePeriodEnd::TIMESTAMPTZ AS ChargePeriodEnd,
        BilledCost::DECIMAL(38,18) AS BilledCost, EffectiveCost::DECIMAL(38,18) AS EffectiveCost,
        BillingCurrency, coalesce(Tags, '{{}}') AS Tags
        FROM read_csv('{path}', all_varchar = true, header = true, filename = true)""")
    return CanonicalView(name, None, str(path))


@dataclass
class World:
    store: Store
    db: str
    data: str
    tmp: Path
    first: Path
    restated: Path

    def ingest(self, path: Path) -> Any:
        con = connect()
        return ingest_billing_views(self.store, canonical(con, path), con, actor=os_actor())


@dataclass(frozen=True)
class Base:
    """The store every test starts from, built once per backend and never changed: schema,
    rules, November's costs and usage, no billing data; and the two exports."""

    db: str
    data: Path
    first: Path
    restated: Path
    engine: Engine


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Base:
    tmp = tmp_path_factory.mktemp(f"billing-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    engine = open_engine(resolve_settings(db=db, environ={}), create=True, foreign_keys=False)
    upgrade(engine)
    store = Store(engine, DataDir(str(tmp / "data")))
    (tmp / "rules.yaml").write_text(RULES)
    load_rule_file(engine, tmp / "rules.yaml", "test")
    rows = []
    for i in range(DAYS):  # a daily cost window per day: the month covered
        window = {"window_start": day(i), "window_end": day(i + 1), "cluster": "prod"}
        rows += [{**window, "namespace": "saas", "controller": "api", "total_cost": 2.4},
                 {**window, "name": "__idle__", "total_cost": 0.6}]  # fmt: skip
    ingest_cost_table(store, costs(rows), "costs.csv", period=None, mode="replace",
                      actor="test")  # fmt: skip
    usage = tmp / "usage.csv"
    usage.write_text("window_start,window_end,service,client,requests\n" + "".join(
        f"{iso(day(i))},{iso(day(i + 1))},api,{c},{n}\n"
        for i in range(DAYS) for c, n in (("a", 300), ("b", 100))))  # fmt: skip
    ingest_usage(store, [usage], period=None, mode="replace", actor="test")
    first = write_csv(tmp / "export-1.csv", billing_rows(20, "2.0"))
    restated = write_csv(tmp / "export-2.csv", billing_rows(DAYS, "2.1"))
    return Base(db, tmp / "data", first, restated, engine)


@pytest.fixture
def world(base: Base, tmp_path: Path) -> Iterator[World]:
    """A copy of the base store of its own for each test: tests build the state they need."""
    db, data = copy_store(base.db, base.data, tmp_path / "store", base.engine)
    engine = open_engine(resolve_settings(db=db, environ={}))
    try:
        yield World(Store(engine, DataDir(str(data))), db, str(data), tmp_path, base.first,
                    base.restated)  # fmt: skip
    finally:
        engine.dispose()


def test_ingest_stores_exact_decimals_and_status_shows_the_coverage(world: World) -> None:
    assert "billing" not in month_status(world.store.engine, MONTH)[0]
    with pytest.raises(
        UnbilledMonth, match="no billing data stored, first uncovered day 2026-11-01"
    ):
        close_month(world.store, MONTH, actor="test")  # the rules have a billing: section
    done = world.ingest(world.first)
    assert (done.kind, done.rows, done.cells, done.files) == ("billing", 41, 1, 1)
    stored = Path(world.data) / "billing" / "date=2026-11-01" / f"{done.uid}.parquet"
    con = connect()
    types = {str(r[0]): str(r[1]) for r in con.execute(f"DESCRIBE FROM '{stored}'").fetchall()}
    assert types["EffectiveCost"] == "DECIMAL(38,18)" and types["BilledCost"] == "DECIMAL(38,18)"
    assert types["ChargePeriodStart"] == "TIMESTAMP WITH TIME ZONE"
    total = con.execute(f"SELECT sum(EffectiveCost)::VARCHAR FROM '{stored}'").fetchall()[0][0]
    assert Decimal(total) == Decimal("2.0") * 20 + Decimal("1.0000000001") * 20 + Decimal("5.5")
    [month] = month_status(world.store.engine, MONTH)
    billing = month["billing"]
    assert (billing["hours"], billing["complete"], billing["first_uncovered_day"]) == (
        480,
        False,
        "2026-11-21",
    )
    assert billing["invoices"] == ["INV-1"] and billing["periods"][0]["billing_account_id"] == "111"
    assert billing["periods"][0]["covered_to"] == "2026-11-21T00:00:00Z"
    lines = status_table([month]).splitlines()
    assert lines[-1].startswith("billing 2026-11: 480 of 720 hours covered (first uncovered day "
                                "2026-11-21); billing periods 2026-11-01 account 111; invoices "
                                "INV-1; last batch ")  # fmt: skip


def test_close_refuses_a_month_its_billing_data_does_not_cover(world: World) -> None:
    world.ingest(world.first)  # days 1-20 only
    with pytest.raises(UnbilledMonth) as refused:
        close_month(world.store, MONTH, actor="test")
    text = refused.value.one_line()
    assert "\n" not in text and "first uncovered day 2026-11-21" in text
    assert "--allow-incomplete" in text and "ingest billing" in text
    with pytest.raises(InputError, match="cluster 'prod' has OpenCost costs but no billed line"):
        run_month(world.store, MONTH, key=None, actor="test")  # the cluster's days 21-30
    estimated = run_month(world.store, MONTH, key=None, actor="test", allow_unbilled=True)
    assert estimated.result.invoice is not None
    estimates = [r for r in estimated.result.invoice["repricing"] if r["estimate"]]
    assert [r["period_start"][:10] for r in estimates] == [f"2026-11-{d}" for d in range(21, 31)]


def test_a_restated_export_replaces_the_earlier_batch(world: World) -> None:
    first = world.ingest(world.first)
    done = world.ingest(world.restated)
    assert done.replaced == 1
    batches = {b.uid: str(b.status) for b in list_batches(world.store.engine)}
    assert (batches[first.uid], batches[done.uid]) == ("superseded", "active")
    run = run_month(world.store, MONTH, key=None, actor="test")
    invoice = run.result.invoice
    assert invoice is not None and invoice["gap"] == 0
    restated = billing_rows(DAYS, "2.1")  # the restated export alone: never the sum of both
    assert invoice["billed_total"] == micro([r["BilledCost"] for r in restated])
    assert invoice["invoices"] == [{"id": "INV-1", "billed_total": invoice["billed_total"]}]
    assert sum(line["amount"] for line in invoice["lines"]) == invoice["billed_total"]
    # per day: the node's 2.1 repriced over api 2.4 / idle 0.6 (1.68 to api), the database's
    # 1.0000000001 rounded once per day (1.000000), split 3:1 by requests
    totals = dict(zip(run.result.client_totals()["client"],
                      run.result.client_totals()["amount"], strict=True))  # fmt: skip
    assert totals == {"a": DAYS * 2_010_000, "b": DAYS * 670_000}
    with world.store.engine.connect() as connection:
        recorded = connection.execute(
            select(table(Run).c.invoice).where(table(Run).c.id == run.run_id)
        ).scalar_one()
    assert json.loads(recorded) == invoice
    # withdrawing the restated batch brings the first back; ingesting it again replaces it
    withdrawn = withdraw_batch(world.store.engine, done.uid, reason="test", actor="test")
    assert withdrawn.restored == 1
    assert month_status(world.store.engine, MONTH)[0]["billing"]["hours"] == 480
    again = world.ingest(world.restated)
    assert month_status(world.store.engine, MONTH)[0]["billing"]["complete"] is True
    statuses = {b.uid: str(b.status) for b in list_batches(world.store.engine)}
    assert (statuses[first.uid], statuses[done.uid], statuses[again.uid]) == (
        "superseded",
        "withdrawn",
        "active",
    )


def test_close_records_the_invoice_cascade_with_the_revision(world: World) -> None:
    world.ingest(world.restated)  # the whole month
    closed = close_month(world.store, MONTH, actor="test")
    assert closed.revision == 1 and not closed.incomplete
    issued = latest_issued(world.store.engine, MONTH)
    assert issued is not None
    with world.store.engine.connect() as connection:
        invoice = json.loads(
            connection.execute(
                select(table(Run).c.invoice).where(table(Run).c.id == issued.run_id)
            ).scalar_one()
        )
    assert invoice["gap"] == 0 and invoice["currency"] == "USD"
    # the same export again into the closed month changes nothing (same bytes, same cells)
    same = world.ingest(world.restated)
    assert same.unchanged
    changed = write_csv(world.tmp / "export-3.csv", billing_rows(DAYS, "2.2"))
    with pytest.raises(InputError, match="closed"):
        world.ingest(changed)


@pytest.mark.slow  # a real `tenantcost serve`
def test_the_api_serves_the_invoice_cascade_to_finance_and_admin_only(world: World) -> None:
    world.ingest(world.restated)
    close_month(world.store, MONTH, actor="test")
    tokens = {role: create_token(world.db, role, f"{role}-billing",
                                 *(["a"] if role == "account-manager" else []))
              for role in ("finance", "account-manager", "admin")}  # fmt: skip
    with running_service(world.db, world.data, world.tmp / "serve.log") as service:

        def get(role: str, query: str) -> httpx.Response:
            return httpx.get(
                f"{service.url}/api/v1/months/{MONTH}/reconciliation{query}",
                headers={"Authorization": f"Bearer {tokens[role]}"},
                timeout=60,
            )

        for role in ("finance", "admin"):
            answer = get(role, "?against=invoice")
            assert answer.status_code == 200, answer.text
            doc = answer.json()
            assert doc["against"] == "invoice" and doc["revision"] == 1
            assert doc["invoice"]["gap"] == 0 and doc["invoice"]["billed_total"] > 0
        assert get("account-manager", "?against=invoice").status_code == 403
        assert get("account-manager", "").status_code == 403
        default = get("finance", "")
        assert default.status_code == 200 and "cascade" in default.json()
        assert get("finance", "?against=other").status_code == 422
        compared = httpx.get(
            f"{service.url}/api/v1/months/{MONTH}/compare?keys=requests",
            headers={"Authorization": f"Bearer {tokens['finance']}"},
            timeout=60,
        )
        assert compared.status_code == 200, compared.text
        amounts = {c["client"]: c["amounts"]["requests"] for c in compared.json()["clients"]}
        assert amounts == {"a": DAYS * 2_010_000, "b": DAYS * 670_000}  # on billed money


def test_ingest_billing_through_the_reader(world: World) -> None:
    pytest.importorskip("tenantcost.readers.billing")
    store = ("--db", world.db, "--data", world.data)
    dry = invoke("ingest", "billing", "--billing", str(world.restated), "--dry-run", *store)
    assert dry.exit_code == 0, dry.stderr
    assert dry.stdout.startswith("billing: dry run, nothing written: 61 rows, 1 (billing "
                                 "period, billing account) cells")  # fmt: skip
    euros = write_csv(world.tmp / "euros.csv", [
        {**r, "BillingCurrency": "EUR"} for r in billing_rows(1, "1")])  # fmt: skip
    refused = invoke("ingest", "billing", "--billing", str(euros), *store)
    assert refused.exit_code == 2 and "\n" not in refused.stderr.strip()
    assert "EUR" in refused.stderr and "Traceback" not in refused.stderr
    assert invoke("ingest", "billing", *store).exit_code == 2


def test_cur_split_rows_are_stored_with_their_billing_cell(tmp_path: Path) -> None:
    from tenantcost.readers.billing import open_billing

    from .billing_files import write_cur2
    from .test_billing_reader import cur_month

    db, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    (tmp_path / "rules.yaml").write_text(RULES)
    cur = write_cur2(tmp_path / "cur.parquet", cur_month())
    for args in (("db", "upgrade"), ("rules", "load", str(tmp_path / "rules.yaml")),
                 ("ingest", "billing", "--billing", str(cur))):  # fmt: skip
        done = invoke(*args, "--db", db, "--data", data)
        assert done.exit_code == 0, done.stderr
    engine = open_engine(resolve_settings(db=db, environ={}))
    con = connect()
    stored = stored_billing(Store(engine, DataDir(data)), Period.month(MONTH), con)
    read = open_billing([cur], con, currency="USD")
    assert stored is not None and stored.split_view is not None and read.split_view is not None
    split = "ParentResourceId, Cluster, Namespace, Pod, SplitCost, UnusedCost, x_row"
    assert (
        con.execute(f"SELECT {split} FROM {stored.split_view}").fetchall()
        == con.execute(f"SELECT {split} FROM {read.split_view}").fetchall()
    )
    lines = "x_row, ChargeCategory, BilledCost, EffectiveCost, InvoiceId"
    assert (
        con.execute(f"SELECT {lines} FROM {stored.view} ORDER BY x_row").fetchall()
        == con.execute(f"SELECT {lines} FROM {read.view} ORDER BY x_row").fetchall()
    )
    [x_file] = con.execute(f"SELECT DISTINCT x_file FROM {stored.split_view}").fetchall()[0]
    assert x_file.startswith(str(cur)) and "(billing batch " in x_file
