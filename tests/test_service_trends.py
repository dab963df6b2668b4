"""Trends and top movers from outside: a real ``tenantcost serve`` on SQLite and PostgreSQL.

A store of four months built here (one hour each, figures chosen so every expectation is
worked out by hand below): 2026-08, 2026-09 (restated: revision 2), 2026-10 closed, 2026-11
open with a draft run and a recorded watch of acme. Each month a shared ``api`` (key
requests), a shared ``import`` (key cpu_seconds, acme and bravo 3,600 s each: 0.18 USD
each), acme's direct worker and idle kept.

=========  ==========  ================  ====================================================
month      api (USD)   requests          clients (USD)
=========  ==========  ================  ====================================================
2026-08    1.00        acme 500 bravo 500  acme 1.18, bravo 0.68
2026-09    1.00        acme 400 bravo 200 carol 200 dora 200   acme 1.08, bravo 0.38, carol
                                                               0.20, dora 0.20
2026-10    1.20        acme 400 bravo 300 carol 300 erin 200   acme 1.13 (worker 0.55), bravo
                                                               0.48, carol 0.30, erin 0.20
2026-11    1.00        acme 500 bravo 500  draft; watch: acme projected 3.54
=========  ==========  ================  ====================================================

Movers of 2026-10 against 2026-09 (revision 2): erin +0.20 (new), bravo and carol +0.10 each
(a tie: by id), acme +0.05 (its worker: ``direct``), dora -0.20 (ended).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings
from tenantcost.store.watch_snapshots import record_watch

from .service_server import Service, create_token, running_service, tenantcost

pytestmark = pytest.mark.slow  # four closes, a server, and PostgreSQL (about 25 s of CPU)

HOUR = ("T10:00:00Z", "T11:00:00Z")
RULES = """currency: USD
rules:
  - id: r1
    effective_from: "2026-08-01"
    workloads:
      - match: {namespace: app, controller: api}
        class: shared
        service: api
        key: requests
      - match: {namespace: app, controller: import}
        class: shared
        service: import
        key: cpu_seconds
      - match: {namespace: tenant-acme}
        class: direct
        client: acme
      - match: {name: __idle__}
        class: idle
    idle: keep
"""
MONTHS: dict[str, tuple[float, float, dict[str, int]]] = {
    "2026-08": (1.0, 0.5, {"acme": 500, "bravo": 500}),
    "2026-09": (1.0, 0.5, {"acme": 400, "bravo": 200, "carol": 200, "dora": 200}),
    "2026-10": (1.2, 0.55, {"acme": 400, "bravo": 300, "carol": 300, "erin": 200}),
    "2026-11": (1.0, 0.5, {"acme": 500, "bravo": 500}),
}
CATALOG = {"acme": "Acme Analytics", "bravo": "Bolt Imports", "carol": "Carol Cargo",
           "dora": "Dora Data", "erin": "Erin Energy"}  # fmt: skip
MINE = ("acme", "carol")
WATCH = {
    "month": "2026-11",
    "as_of": "2026-11-12T00:00:00Z",
    "money": {"currency": "USD", "minor_unit_exponent": 6},
    "clients": [{"client": "acme", "month_to_date": 1_180_000, "projected": 3_540_000,
                 "budget": {"low": 1_000_000, "expected": 2_000_000, "high": 3_000_000},
                 "status": "above"},
                {"client": "bravo", "month_to_date": 680_000, "projected": 2_040_000,
                 "budget": None, "status": "no_budget"}],
    "anomalies": [], "rule_changes": [], "warnings": [],
}  # fmt: skip


def write_inputs(folder: Path) -> dict[str, Path]:
    usage = ["window_start,window_end,service,client,requests,cpu_seconds"]
    costs = ["window_start,window_end,name,cluster,namespace,controller_kind,controller,total_cost"]
    for month, (api, worker, requests) in MONTHS.items():
        start, end = f"{month}-10{HOUR[0]}", f"{month}-10{HOUR[1]}"
        usage += [f"{start},{end},api,{c},{n},0" for c, n in requests.items()]
        usage += [f"{start},{end},import,{c},0,3600" for c in ("acme", "bravo")]
        costs += [f"{start},{end},,c1,app,deployment,api,{api}",
                  f"{start},{end},,c1,app,deployment,import,0.36",
                  f"{start},{end},,c1,tenant-acme,deployment,worker,{worker}",
                  f"{start},{end},__idle__,c1,,,,0.3"]  # fmt: skip
    catalog = ["client,name,plan,segment,account_manager,monthly_revenue,currency,start,end"]
    catalog += [f"{c},{n},team,smb,Dana,10.00,USD,2026-01-01," for c, n in CATALOG.items()]
    paths = {}
    for name, lines in (("usage.csv", usage), ("costs.csv", costs), ("catalog.csv", catalog),
                        ("rules.yaml", RULES.splitlines())):  # fmt: skip
        paths[name] = folder / name
        paths[name].write_text("\n".join(lines) + "\n")
    return paths


def build_store(db: str, data: str, folder: Path, *, full: bool = True) -> None:
    """The store of the module's table; ``full=False``: 2026-09 and 2026-10 closed only (the
    PostgreSQL check of the queries, a third of the time: each close is seconds)."""
    paths = write_inputs(folder)
    store = ("--db", db, "--data", data)
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(paths["rules.yaml"]), *store)
    tenantcost("ingest", "usage", "--usage", str(paths["usage.csv"]), *store)
    tenantcost("ingest", "costs", "--costs", str(paths["costs.csv"]), *store)
    tenantcost("catalog", "load", str(paths["catalog.csv"]), "--db", db)
    for month in ("2026-08", "2026-09", "2026-10") if full else ("2026-09", "2026-10"):
        tenantcost("close", "--month", month, "--allow-incomplete", *store)
    if not full:
        return
    tenantcost("reopen", "--month", "2026-09", "--reason", "checked again", *store)
    tenantcost("close", "--month", "2026-09", "--allow-incomplete", "--force", *store)
    tenantcost("run", "--month", "2026-11", *store)
    engine = open_engine(resolve_settings(db=db, environ={}))
    record_watch(engine, WATCH, "test", month_closed=False)
    engine.dispose()


@dataclass(frozen=True)
class Served:
    service: Service
    tokens: dict[str, str]

    def get(self, path: str, role: str, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[role]}"}
        return httpx.get(self.service.url + path, headers=headers, params=params, timeout=60)


@contextmanager
def serving(db: str, tmp: Path, *, full: bool) -> Iterator[Served]:
    data = str(tmp / "data")
    build_store(db, data, tmp, full=full)
    tokens = {
        "finance": create_token(db, "finance", "fin"),
        "product": create_token(db, "product", "prod"),
        "account-manager": create_token(db, "account-manager", "am", *MINE),
    }
    with running_service(db, data, tmp / "serve.log") as service:
        yield Served(service, tokens)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("trends")
    with serving(f"sqlite:///{tmp / 'store.db'}", tmp, full=True) as found:
        yield found


def test_the_queries_on_postgresql(postgres_admin_url: str, tmp_path: Path) -> None:
    """The same answers from a real PostgreSQL (two months closed)."""
    from .postgres_fixture import new_database

    with serving(new_database(postgres_admin_url), tmp_path, full=False) as pg:
        doc = pg.get("/api/v1/months/2026-10/movers", "finance").json()
        assert _brief(doc["increases"]) == INCREASES and _brief(doc["decreases"]) == DECREASES
        mine = pg.get("/api/v1/months/2026-10/movers", "account-manager").json()
        assert [i["client"] for i in mine["increases"]] == ["carol", "acme"]
        trend = pg.get("/api/v1/clients/acme/trend", "account-manager").json()["months"]
        assert [(m["month"], m["amount"]) for m in trend] == [("2026-09", 1_080_000),
                                                              ("2026-10", 1_130_000)]  # fmt: skip
        assert all(sum(m["by_source"].values()) == m["amount"] for m in trend)
        assert pg.get("/api/v1/clients/bravo/trend", "account-manager").status_code == 404


def rows(answer: httpx.Response) -> list[dict[str, str]]:
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(answer.text)))


def test_a_clients_trend_adds_up_and_names_each_months_figure(served: Served) -> None:
    doc = served.get("/api/v1/clients/acme/trend", "finance").json()
    assert doc["client"] == "acme" and doc["money"]["minor_unit_exponent"] == 6
    months = doc["months"]
    assert [(m["month"], m["status"], m["revision"]) for m in months] == [
        ("2026-08", "issued", 1), ("2026-09", "restated", 2), ("2026-10", "issued", 1),
        ("2026-11", "draft", None)]  # fmt: skip
    assert [m["amount"] for m in months] == [1_180_000, 1_080_000, 1_130_000, 1_180_000]
    for m in months:
        assert sum(m["by_source"].values()) == m["amount"]  # exact, in micro-units
    october = months[2]
    assert october["by_source"]["api"] == 400_000 and october["by_source"]["import"] == 180_000
    assert october["unit_costs"] == {
        "requests": {"unit": "per 1,000 requests", "amount": 1_000_000},
        "cpu_seconds": {"unit": "per CPU-hour", "amount": 180_000},
    }
    # the statements agree with the trend (the client's own month route)
    own = served.get("/api/v1/clients/acme/months/2026-10", "finance").json()
    assert own["amount"] == october["amount"]
    recent = served.get("/api/v1/clients/acme/trend", "finance", months=2).json()["months"]
    assert [m["month"] for m in recent] == ["2026-10", "2026-11"]


def test_the_open_month_is_the_watchs_projection_for_those_who_see_no_draft(
    served: Served,
) -> None:
    for role in ("account-manager", "product"):
        months = served.get("/api/v1/clients/acme/trend", role).json()["months"]
        last = months[-1]
        assert last["month"] == "2026-11" and last["status"] == "projected", role
        assert last["amount"] == 3_540_000 and last["revision"] is None
        assert last["by_source"] == {"(all sources)": 3_540_000}
        assert last["budget"] == {"low": 1_000_000, "expected": 2_000_000, "high": 3_000_000}
        assert [m["status"] for m in months[:-1]] == ["issued", "restated", "issued"]


def test_trend_scope_and_bad_input(served: Served) -> None:
    other = served.get("/api/v1/clients/bravo/trend", "account-manager")
    ghost = served.get("/api/v1/clients/nobody/trend", "account-manager")
    assert other.status_code == ghost.status_code == 404
    assert other.content == ghost.content
    for months in (37, 0, "x"):
        answer = served.get("/api/v1/clients/acme/trend", "finance", months=months)
        assert answer.status_code == 422, answer.text
        assert (
            "\n" not in answer.json()["detail"]
            if isinstance(answer.json()["detail"], str)
            else True
        )
    assert served.get("/api/v1/clients/acme/trend", "finance", format="xml").status_code == 422


def test_trend_csv_has_a_row_per_month_and_source(served: Served) -> None:
    answer = served.get("/api/v1/clients/acme/trend", "finance", format="csv")
    table = rows(answer)
    assert "trend-acme.csv" in answer.headers["content-disposition"]
    assert list(table[0]) == ["month", "status", "revision", "source", "amount"]
    october = {r["source"]: r["amount"] for r in table if r["month"] == "2026-10"}
    assert october["api"] == "0.400000" and october["import"] == "0.180000"
    units = rows(served.get("/api/v1/clients/acme/unit-cost-trend", "finance", format="csv"))
    october = {(r["metric"], r["unit"], r["amount"]) for r in units if r["month"] == "2026-10"}
    assert october == {
        ("requests", "per 1,000 requests", "1.000000"),
        ("cpu_seconds", "per CPU-hour", "0.180000"),
    }


INCREASES = [
    ("erin", 0, 200_000, 200_000, "new_client"),
    ("bravo", 380_000, 480_000, 100_000, "volume"),
    ("carol", 200_000, 300_000, 100_000, "volume"),  # the same change as bravo: by id
    ("acme", 1_080_000, 1_130_000, 50_000, "direct"),
]
DECREASES = [("dora", 200_000, 0, -200_000, "ended_client")]


def _brief(items: list[dict[str, Any]]) -> list[tuple[str, int, int, int, str | None]]:
    return [(i["client"], i["previous_amount"], i["amount"], i["change"],
             (i["main_part"] or {}).get("part")) for i in items]  # fmt: skip


def test_movers_ordered_by_change_with_ties_by_id_and_new_and_ended_clients(
    served: Served,
) -> None:
    doc = served.get("/api/v1/months/2026-10/movers", "finance").json()
    assert doc["month"] == "2026-10" and doc["previous_month"] == "2026-09"
    assert doc["previous_revision"] == 2 and doc["money"]["currency"] == "USD"
    assert _brief(doc["increases"]) == INCREASES
    assert _brief(doc["decreases"]) == DECREASES
    bravo = doc["increases"][1]
    assert bravo["name"] == "Bolt Imports" and bravo["change_pct"] == pytest.approx(100 / 380)
    assert bravo["main_part"] == {"part": "volume", "source": "api", "amount": 100_000}
    assert doc["increases"][0]["change_pct"] is None  # nothing the month before
    assert doc["increases"][0]["main_part"]["source"] is None
    top = served.get("/api/v1/months/2026-10/movers", "finance", limit=1).json()
    assert _brief(top["increases"]) == _brief(doc["increases"])[:1]
    first = served.get("/api/v1/months/2026-08/movers", "finance").json()
    assert first["previous_month"] is None and first["increases"] == first["decreases"] == []


def test_an_account_manager_gets_movers_among_its_own_clients_only(served: Served) -> None:
    answer = served.get("/api/v1/months/2026-10/movers", "account-manager")
    assert answer.status_code == 200
    assert _brief(answer.json()["increases"]) == [
        ("carol", 200_000, 300_000, 100_000, "volume"),
        ("acme", 1_080_000, 1_130_000, 50_000, "direct"),
    ]
    assert answer.json()["decreases"] == []
    for other in ("bravo", "dora", "erin", "Bolt", "480000", "0.48"):
        assert other not in answer.text
    csv_answer = served.get("/api/v1/months/2026-10/movers", "account-manager", format="csv")
    for other in ("bravo", "dora", "erin", "Bolt"):
        assert other not in csv_answer.text
    # the open month: nothing issued to compare (no draft for it)
    assert served.get("/api/v1/months/2026-11/movers", "account-manager").status_code == 404
    assert served.get("/api/v1/months/2026-11/movers", "finance").json()["status"] == "draft"


def test_movers_csv_is_the_same_rows_with_exact_decimals(served: Served) -> None:
    answer = served.get("/api/v1/months/2026-10/movers", "finance", format="csv")
    table = rows(answer)
    assert "movers-2026-10.csv" in answer.headers["content-disposition"]
    assert [(r["direction"], r["client"], r["change"], r["main_part"]) for r in table] == [
        ("increase", "erin", "0.200000", "new_client"), ("increase", "bravo", "0.100000", "volume"),
        ("increase", "carol", "0.100000", "volume"), ("increase", "acme", "0.050000", "direct"),
        ("decrease", "dora", "-0.200000", "ended_client")]  # fmt: skip
    assert table[1]["previous_amount"] == "0.380000" and table[1]["name"] == "Bolt Imports"
    for bad in ({"limit": 0}, {"limit": 501}, {"format": "pdf"}):
        assert served.get("/api/v1/months/2026-10/movers", "finance", **bad).status_code == 422


def test_the_client_page_draws_the_trend_with_its_band_and_unit_costs(served: Served) -> None:
    page = served.get("/clients/acme", "account-manager")
    assert page.status_code == 200, page.text
    text = page.text
    assert 'id="trend-chart-t"' in text and "<desc" in text and 'id="trend-table"' in text
    assert "budget band 1.000000 to 3.000000 USD" in text  # the open month's band
    assert 'id="unit-requests-t"' in text and "cost per 1,000 requests" in text
    assert 'id="unit-cpuseconds-t"' in text and "per CPU-hour" in text
    assert 'href="/api/v1/clients/acme/trend?format=csv"' in text
    assert "bravo" not in text and "Bolt" not in text
    assert "<script" not in text


def test_the_month_page_lists_top_movers_with_links(served: Served) -> None:
    text = served.get("/months/2026-10", "finance").text
    assert 'id="movers"' in text and "Top movers since 2026-09" in text
    up = text[text.index('id="movers-up"') : text.index('id="movers-down"')]
    assert [c for c in ("erin", "bravo", "carol", "acme") if c in up] == [
        "erin",
        "bravo",
        "carol",
        "acme",
    ]
    assert up.index("erin") < up.index("bravo") < up.index("carol") < up.index("acme")
    assert 'href="/clients/erin"' in up and "new client" in up and "+0.200000" in up
    assert 'href="/api/v1/months/2026-10/movers?limit=500&amp;format=csv"' in text


# Month trend: reference = api + import 0.36 + worker + idle 0.30; idle kept (the cascade's
# idle line); clients = reference - idle (nothing unattributed).
MONTH_TREND = [
    ("2026-08", "issued", 1, 2_160_000, 1_860_000, 300_000),
    ("2026-09", "restated", 2, 2_160_000, 1_860_000, 300_000),
    ("2026-10", "issued", 1, 2_410_000, 2_110_000, 300_000),
]


def test_the_month_trend_is_each_months_cascade(served: Served) -> None:
    doc = served.get("/api/v1/months/2026-11/trend", "finance").json()
    assert doc["month"] == "2026-11" and doc["money"]["currency"] == "USD"
    got = [(m["month"], m["status"], m["revision"], m["reference_total"], m["clients"],
            m["idle"]) for m in doc["months"]]  # fmt: skip
    assert got == [*MONTH_TREND, ("2026-11", "draft", None, 2_160_000, 1_860_000, 300_000)]
    october = doc["months"][2]
    assert october["clients_share"] == round(2.11 / 2.41, 9)
    assert october["idle_share"] == round(0.3 / 2.41, 9)
    recon = served.get("/api/v1/months/2026-10/reconciliation", "finance").json()
    assert recon["reference_total"] == october["reference_total"]
    assert recon["clients_total"] == october["clients"]
    # product: issued revisions only; a window of two months
    product = served.get("/api/v1/months/2026-11/trend", "product").json()["months"]
    assert [m["month"] for m in product] == ["2026-08", "2026-09", "2026-10"]
    two = served.get("/api/v1/months/2026-10/trend", "product", months=2).json()["months"]
    assert [m["month"] for m in two] == ["2026-09", "2026-10"]
    assert served.get("/api/v1/months/2026-10/trend", "account-manager").status_code == 403
    assert served.get("/api/v1/months/2025-01/trend", "finance").status_code == 404
    for bad in ({"months": 0}, {"months": 37}, {"format": "xml"}):
        assert served.get("/api/v1/months/2026-10/trend", "finance", **bad).status_code == 422
    table = rows(served.get("/api/v1/months/2026-10/trend", "finance", format="csv"))
    assert list(table[0]) == ["month", "status", "revision", "reference_total", "clients",
                              "idle", "clients_share", "idle_share"]  # fmt: skip
    assert (table[2]["reference_total"], table[2]["clients"], table[2]["idle"]) == (
        "2.410000", "2.110000", "0.300000")  # fmt: skip


def test_the_month_page_draws_the_trend_for_finance_and_product(served: Served) -> None:
    for role in ("finance", "product"):
        text = served.get("/months/2026-10", role).text
        assert 'id="month-trend-chart-t"' in text and 'id="month-trend-table"' in text, role
        section = text[text.index('id="month-trend"') :]
        assert "2.410000" in section and "87.6 %" in section and "12.4 %" in section
        assert 'href="/api/v1/months/2026-10/trend?months=12&amp;format=csv"' in section
        assert "<script" not in text
    finance = served.get("/months/2026-10", "finance").text
    assert finance.index('id="movers"') < finance.index('id="month-trend"')


def test_margin_per_plan_across_months_is_each_months_pricing(served: Served) -> None:
    doc = served.get("/api/v1/pricing/margins", "product", month="2026-11").json()
    assert doc["by"] == "plan" and doc["money"]["currency"] == "USD"
    months = doc["months"]
    assert [(m["month"], m["status"]) for m in months] == [
        ("2026-08", "issued"), ("2026-09", "restated"), ("2026-10", "issued")]  # fmt: skip
    # one hour of cost data a month: every month is priced on the projected basis
    assert all(m["basis"] == "projected" and m["coverage"] < 1 for m in months)
    for m in months:  # each month as the pricing page prices it, to the micro-unit
        page = served.get(f"/api/v1/months/{m['month']}/unit-economics", "product").json()
        assert m["groups"] == [{k: g[k] for k in ("plan", "clients", "revenue", "all_in_cost",
                                                  "margin", "margin_pct")}
                               for g in page["plans"]]  # fmt: skip
    assert [g["plan"] for g in months[-1]["groups"]] == ["team"]
    draft = served.get("/api/v1/pricing/margins", "finance", month="2026-11").json()["months"]
    assert draft[-1]["month"] == "2026-11" and draft[-1]["status"] == "draft"
    table = rows(served.get("/api/v1/pricing/margins", "product", by="segment", format="csv"))
    assert list(table[0])[:6] == ["month", "status", "revision", "basis", "coverage", "segment"]
    assert {r["segment"] for r in table} == {"smb"}
    october = months[-1]["groups"][0]
    assert table[-1]["margin"] == f"{october['margin'] / 1e6:.6f}"
    assert served.get("/api/v1/pricing/margins", "account-manager").status_code == 403
    for bad in ({"months": 0}, {"months": 37}, {"by": "x"}, {"month": "2026-13"}):
        assert served.get("/api/v1/pricing/margins", "product", **bad).status_code == 422


def test_the_pricing_page_draws_margins_across_months(served: Served) -> None:
    text = served.get("/pricing", "product", month="2026-10").text
    assert 'id="plan-margins-chart-t"' in text and 'id="plan-margins-table"' in text
    section = text[text.index('id="plan-margins"') :]
    assert section.count(">projected<") == 3 and "2026-08" in section
    assert (
        'href="/api/v1/pricing/margins?month=2026-10&amp;months=12&amp;by=plan&amp;format=csv"'
        in section
    )
    assert "<script" not in text
