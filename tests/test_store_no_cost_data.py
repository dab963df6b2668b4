"""Issue 35 on the store: an open month with billing data charges the rule file's external
costs on the hours with cost data only, as it does without billing data.

December 2026, as of the 5th: hourly costs on the 1st, 2nd and 4th (72 hours, none on the
3rd), hourly usage on all four days, and an export with the node's hours, a monthly database
line (a shared pool) and the month's tax (overhead): billed amounts in every hour of the
month, the 3rd and the future included. Before the fix every such hour was a window of its
own that also carried the external cost: 744 hours of it, the 3rd's on the clients (they
have usage there) and the future's unattributed. Checked through `run`, `watch` and the month
page of a real `tenantcost serve`, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pandas as pd

from tenantcost.kinds import LineKind
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.ingest import ingest_cost_table
from tenantcost.store.runs import run_month
from tenantcost.store.settings import resolve_settings

from .factories import costs
from .invoice_data import ec2_instance, service_usage, tax, write_focus_csv
from .service_server import create_token, invoke, running_service, tenantcost

MONTH = "2026-12"
START = datetime(2026, 12, 1, tzinfo=UTC)
COST_HOURS = [h for h in range(96) if not 48 <= h < 72]  # the 3rd has no cost data
RULES = """
currency: USD
billing:
  clusters:
    - {name: prod, match: {tags: {"eks:cluster-name": prod}}}
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {namespace: saas, controller: api}, class: shared, service: api, key: requests}
      - {match: {name: __idle__}, class: idle}
    idle: keep
    external:
      - {name: search, amount: 0.065, per: hour, key: requests, services: [api]}
    billed:
      - {match: {ServiceName: Database}, class: shared, key: requests, services: [api]}
      - {match: {ChargeCategory: Tax}, class: overhead, name: tax}
"""
HOURS_WITHOUT = 744 - len(COST_HOURS)
# per client and hour with cost data: api 0.2 and search 0.065 split 3:1; the database's
# 0.01 an hour reaches the clients in every hour with usage (the 3rd included)
CLIENT_A = len(COST_HOURS) * (150_000 + 48_750) + 96 * 7_500
CLIENT_B = len(COST_HOURS) * (50_000 + 16_250) + 96 * 2_500


def at(h: int) -> datetime:
    return START + timedelta(hours=h)


def stored(tmp_path: Path, db: str) -> tuple[str, ...]:
    """The store: rules, costs, usage and billing data of December up to the 5th."""
    data = str(tmp_path / "data")
    store = ("--db", db, "--data", data)
    tenantcost("db", "upgrade", *store)
    (tmp_path / "rules.yaml").write_text(RULES)
    tenantcost("rules", "load", str(tmp_path / "rules.yaml"), *store)
    rows = []
    for h in COST_HOURS:
        window = {"window_start": pd.Timestamp(at(h)), "window_end": pd.Timestamp(at(h + 1)),
                  "cluster": "prod"}  # fmt: skip
        rows += [{**window, "namespace": "saas", "controller": "api", "total_cost": 0.2},
                 {**window, "name": "__idle__", "total_cost": 0.1}]  # fmt: skip
    engine = open_engine(resolve_settings(db=db, environ={}), create=False)
    ingest_cost_table(Store(engine, DataDir(data)), costs(rows), "costs.csv", period=None,
                      mode="replace", actor="test")  # fmt: skip
    usage = tmp_path / "usage.csv"
    usage.write_text("window_start,window_end,service,client,requests\n" + "".join(
        f"{at(h):%Y-%m-%dT%H:%M:%SZ},{at(h + 1):%Y-%m-%dT%H:%M:%SZ},api,{c},{n}\n"
        for h in range(96) for c, n in (("a", 3), ("b", 1))))  # fmt: skip
    tenantcost("ingest", "usage", "--usage", str(usage), *store)
    month_end = datetime(2027, 1, 1, tzinfo=UTC)
    billing = [ec2_instance(at(h), at(h + 1), cluster="prod", instance="i-0123456789abcdef0",
                            effective="0.3", list_price="0.3") for h in COST_HOURS]  # fmt: skip
    billing += [
        service_usage(START, month_end, service="Database", category="Databases",
                      subcategory="Relational Databases", amount="7.44"),
        tax(START, month_end, amount="74.4"),
    ]  # fmt: skip
    export = write_focus_csv(tmp_path / "focus.csv", billing)
    tenantcost("ingest", "billing", "--billing", str(export), *store)
    return store


def test_an_open_month_charges_external_costs_on_the_hours_with_cost_data(
    tmp_path: Path, store_url: str
) -> None:
    store = stored(tmp_path, store_url)
    engine = open_engine(resolve_settings(db=store_url, environ={}), create=False)
    run = run_month(Store(engine, DataDir(store[3])), MONTH, key=None, actor="test")
    result = run.result
    assert result.external_total == len(COST_HOURS) * 65_000  # was 744 hours of it
    assert (result.windows, result.hours) == (len(COST_HOURS), len(COST_HOURS))
    unattributed = result.unattributed
    assert int(unattributed.loc[unattributed["kind"] == LineKind.EXTERNAL, "amount"].sum()) == 0
    totals = dict(zip(result.client_totals()["client"], result.client_totals()["amount"],
                      strict=True))  # fmt: skip
    assert totals == {"a": CLIENT_A, "b": CLIENT_B}
    invoice = result.invoice
    assert invoice is not None and invoice["gap"] == 0
    lines = {line["name"]: line for line in invoice["lines"]}
    # the clients line is the statements' sum (finance reconciles the two); the line names
    # what no client was charged in the hours without cost data, and what the clients were
    # (the 3rd's database pool: they have usage there)
    assert lines["clients"]["amount"] == CLIENT_A + CLIENT_B
    assert lines["billed without cost data"] == {
        "part": "no cost data", "name": "billed without cost data", "hours": HOURS_WITHOUT,
        "amount": HOURS_WITHOUT * (10_000 + 100_000) - 24 * 10_000, "to_clients": 24 * 10_000,
    }  # fmt: skip
    assert lines["unattributed"]["amount"] == 0  # the future's database pool is on that line
    assert lines["overhead"]["amount"] == len(COST_HOURS) * 100_000  # the tax of those hours
    assert lines["external costs"]["amount"] == -len(COST_HOURS) * 65_000

    watched = invoke("watch", "--month", MONTH, "--as-of", "2026-12-05T00:00:00Z",
                     "--format", "json", *store)  # fmt: skip
    assert watched.exit_code == 0, watched.stderr
    month_to_date = {c["client"]: c["month_to_date"] for c in json.loads(watched.stdout)["clients"]}
    assert month_to_date == {"a": CLIENT_A, "b": CLIENT_B}  # no search cost on the 3rd

    token = create_token(store_url, "finance", "finance-no-cost-data")
    with running_service(store_url, store[3], tmp_path / "serve.log") as service:
        page = httpx.get(f"{service.url}/months/{MONTH}", timeout=60,
                         headers={"Authorization": f"Bearer {token}"})  # fmt: skip
    assert page.status_code == 200, page.text
    assert (f"billed for {HOURS_WITHOUT} hours without cost data, charged to no client (the "
            "clients, on their line, were charged 0.24 in those hours)") in page.text
    assert re.search(r"\+ external 4\.680*(?![0-9])", page.text), page.text  # 72 h, not 744
