"""The month-to-date watch in the service, against a real
``tenantcost serve`` (uvicorn) on the bundled example's store (2026-11 closed).

Watch runs are recorded with :func:`tenantcost.store.watch_snapshots.record_watch` from
documents written in the JSON contract's shape (docs/watch.md) rather than computed by the
``watch`` command, so only the service is under test: an
open month never issued (2026-12: three clients, anomalies, a rule change, warnings of the
month, of clients, and one naming a client with no entry) and the closed 2026-11. Checked:

* ``GET /api/v1/months/{M}/watch``: the recorded document for finance, product and admin
  (paged on request), 403 for account managers and ingest, 404 naming the command for a
  month never watched;
* ``GET /api/v1/clients/{id}/months/{M}``: ``watch`` beside every existing field; an open
  month never issued answers the watch alone, labelled, with no figure; an account manager
  reads its own client's entry and nothing of any other client (no name, no figure, not in
  warnings), another client's month is the one 404;
* the client page and the month page show the section, sorted and paged as asked, and fit
  390 px in Chromium.

The SQL sort (JSON read in the database) runs on SQLite and PostgreSQL at the store level.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings
from tenantcost.store.watch_snapshots import (
    EntryOrder,
    latest_snapshot,
    ranked_entries,
    record_watch,
    watched_month_list,
    watched_months,
)
from tenantcost.watch import anomaly_id

from .service_server import MONTH, Service, create_token, example_store, running_service, tenantcost

OPEN = "2026-12"
NEVER = "2027-01"
MONEY = {"currency": "USD", "minor_unit_exponent": 6}
OWN, OTHER, THIRD, ORPHAN = "client-a", "client-b", "client-c", "client-z"
OTHER_FIGURES = (5_432_109, 13_579_024, 12_000_001, 11_000_003, 14_000_007, 1_234_567, 2_468_013,
                 -333_333, 4_444_444, 7_777_777)  # fmt: skip
"""Every figure of the clients the account manager does not have (none is client-a's)."""


def _anomaly(client: str, source: str, day: str, amount: int, baseline: int, score: float,
             kind: str) -> dict[str, Any]:  # fmt: skip
    return {"id": anomaly_id(client, source, day, kind), "client": client, "source": source,
            "day": day, "amount": amount, "baseline": baseline, "score": score,
            "kind": kind}  # fmt: skip


def open_month_document() -> dict[str, Any]:
    """A watch of 2026-12 on the 12th: client-a above its band with a spike in its import
    worker, client-b within with a rule change and a drop, client-c without a budget."""
    return {
        "month": OPEN,
        "as_of": "2026-12-12T00:00:00Z",
        "money": MONEY,
        "clients": [
            {
                "client": OWN,
                "month_to_date": 12_500_000,
                "projected": 32_291_667,
                "budget": {"low": 20_000_000, "expected": 25_000_000, "high": 28_000_000},
                "status": "above",
            },
            {
                "client": OTHER,
                "month_to_date": 5_432_109,
                "projected": 13_579_024,
                "budget": {"low": 11_000_003, "expected": 12_000_001, "high": 14_000_007},
                "status": "within",
            },
            {
                "client": THIRD,
                "month_to_date": 1_234_567,
                "projected": 2_468_013,
                "budget": None,
                "status": "no_budget",
            },
        ],
        "anomalies": [
            _anomaly(OWN, "import-worker", "2026-12-09", 9_100_000, 910_000, 40.91, "spike"),
            _anomaly(OTHER, "search-api", "2026-12-10", 4_444_444, 7_777_777, -4.29, "drop"),
        ],
        "rule_changes": [
            {"day": "2026-12-08", "rule_id": "rules-v2", "client": OTHER, "effect": -333_333},
        ],
        "warnings": [
            {
                "client": None,
                "day": "2026-12-11",
                "kind": "unbilled",
                "detail": "billing data ends on 2026-12-10: later days are OpenCost's estimate",
            },
            {
                "client": OWN,
                "day": "2026-12-05",
                "kind": "no_usage",
                "detail": "no usage rows for import-worker (its queue is shared with client-b)",
            },
            {
                "client": OTHER,
                "day": "2026-12-06",
                "kind": "no_usage",
                "detail": "no usage rows for search-api",
            },
            {
                "client": ORPHAN,
                "day": "2026-12-07",
                "kind": "no_usage",
                "detail": "no usage rows for client-z's web",
            },
        ],
    }


def closed_month_document() -> dict[str, Any]:
    """A watch of the closed 2026-11, re-watched after its end."""
    figures = ((OWN, 123_458), (OTHER, 7_777_777), (THIRD, 4_444_444))
    clients = [{"client": c, "month_to_date": m, "projected": m, "status": "no_budget",
                "budget": None} for c, m in figures]  # fmt: skip
    return {"month": MONTH, "as_of": "2026-12-01T00:00:00Z", "money": MONEY, "clients": clients,
            "anomalies": [], "rule_changes": [], "warnings": []}  # fmt: skip


def open_month_daily() -> pd.DataFrame:
    """The daily figures the open month's watch scored (from the baseline's days in November):
    client-a's import worker spikes on the 9th, client-b's search API drops on the 10th."""
    days = pd.date_range("2026-11-28", "2026-12-11", freq="D", tz="UTC")
    rows = []
    for day in days:  # a test's fixture: 14 days
        d = f"{day:%Y-%m-%d}"
        rows += [(OWN, "web", day, 1_000_000),
                 (OWN, "import-worker", day, 9_100_000 if d == "2026-12-09" else 900_000),
                 (OTHER, "search-api", day, 4_444_444 if d == "2026-12-10" else 7_000_000),
                 (THIRD, "web", day, 100_000)]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["client", "source", "day", "amount"])
    return frame.assign(split="x", has_usage=True).sample(frac=1.0, random_state=7)


NEW_MONTH, NEW_CLIENT = "2027-02", "client-n"


def new_client_document() -> dict[str, Any]:
    """A month whose one client has no figure anywhere yet (its first month)."""
    client = {"client": NEW_CLIENT, "month_to_date": 3_000_000, "projected": 9_000_000,
              "budget": {"low": 1_000_000, "expected": 2_000_000, "high": 3_000_000},
              "status": "above"}  # fmt: skip
    return {"month": NEW_MONTH, "as_of": "2027-02-10T06:00:00Z", "money": MONEY,
            "clients": [client], "anomalies": [], "rule_changes": [], "warnings": []}  # fmt: skip


@dataclass(frozen=True)
class Served:
    service: Service
    tokens: dict[str, str]
    db: str

    def get(self, path: str, role: str | None, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[role]}"} if role else {}
        return httpx.get(self.service.url + path, headers=headers, params=params, timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("watch")
    db, data = f"sqlite:///{tmp / 'store.db'}", str(tmp / "data")
    example_store(db, data)
    catalog = Path(__file__).resolve().parents[1] / "examples" / "saas-three-clients"
    tenantcost("catalog", "load", str(catalog / "catalog.csv"), "--db", db)
    engine = open_engine(resolve_settings(db=db, environ={}))
    record_watch(engine, closed_month_document(), "test", month_closed=True)
    stale = open_month_document() | {"as_of": "2026-12-11T00:00:00Z"}
    record_watch(engine, stale, "test", month_closed=False)  # the latest run wins
    record_watch(
        engine, open_month_document(), "test", month_closed=False, daily=open_month_daily()
    )
    record_watch(engine, new_client_document(), "test", month_closed=False)
    engine.dispose()
    tokens = {
        "admin": create_token(db, "admin", "root"),
        "finance": create_token(db, "finance", "fin"),
        "product": create_token(db, "product", "prod"),
        "account-manager": create_token(db, "account-manager", "am-a", OWN),
        "ingest": create_token(db, "ingest", "app"),
    }
    with running_service(db, data, tmp / "serve.log") as service:
        yield Served(service, tokens, db)


def _sorted(items: list[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted(i.items())) for i in items)


def test_finance_product_and_admin_read_the_recorded_watch_document(served: Served):
    recorded = open_month_document()
    for role in ("finance", "product", "admin"):
        answer = served.get(f"/api/v1/months/{OPEN}/watch", role)
        assert answer.status_code == 200, (role, answer.text)
        doc = answer.json()
        assert doc["month"] == OPEN and doc["as_of"] == "2026-12-12T00:00:00Z"
        assert doc["money"] == MONEY and doc["label"] == "month to date, not issued"
        assert doc["clients"] == sorted(recorded["clients"], key=lambda c: c["client"])
        for name in ("anomalies", "rule_changes", "warnings"):
            assert _sorted(doc[name]) == _sorted(recorded[name]), name
        assert doc["snapshot"]["month_closed"] is False and "actor" not in doc["snapshot"]
    paged = served.get(f"/api/v1/months/{OPEN}/watch", "finance", page=2, per_page=1).json()
    assert [c["client"] for c in paged["clients"]] == [OTHER]
    assert (paged["page"], paged["per_page"], paged["total"]) == (2, 1, 3)
    assert [a["client"] for a in paged["anomalies"]] == [OTHER]
    assert {w["client"] for w in paged["warnings"]} == {None, ORPHAN, OTHER}  # month's + its own
    closed = served.get(f"/api/v1/months/{MONTH}/watch", "product").json()
    assert closed["snapshot"]["month_closed"] is True and len(closed["clients"]) == 3


def test_the_month_watch_is_refused_to_others_and_a_month_never_watched_is_404(served: Served):
    path = f"/api/v1/months/{OPEN}/watch"
    assert served.get(path, None).status_code == 401
    for role in ("account-manager", "ingest"):
        answer = served.get(path, role)
        assert answer.status_code == 403 and OTHER not in answer.text, role
    never = served.get(f"/api/v1/months/{NEVER}/watch", "finance")
    assert never.status_code == 404
    assert f"tenantcost watch --month {NEVER}" in never.json()["detail"]
    assert served.get("/api/v1/months/2026-13/watch", "finance").status_code == 422


def _assert_nothing_of_others(text: str) -> None:
    for name in (OTHER, THIRD, ORPHAN, "Bolt Imports", "Cobalt Labs", "search-api", "rules-v2"):
        assert name not in text, name
    for figure in OTHER_FIGURES:
        assert str(figure) not in text, figure


def test_an_account_manager_reads_its_open_month_as_the_watch_alone(served: Served):
    answer = served.get(f"/api/v1/clients/{OWN}/months/{OPEN}", "account-manager")
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert doc["status"] == "not_issued" and doc["state"] == "open"
    assert doc["amount"] is None and doc["lines"] == [] and doc["run_id"] is None
    assert doc["revision"] is None and doc["bridge"] is None
    watch = doc["watch"]
    assert watch["label"] == "month to date, not issued" and watch["client"] == OWN
    assert (watch["month_to_date"], watch["projected"], watch["status"]) == (
        12_500_000,
        32_291_667,
        "above",
    )
    assert watch["budget"] == {"low": 20_000_000, "expected": 25_000_000, "high": 28_000_000}
    assert watch["as_of"] == "2026-12-12T00:00:00Z"
    assert [(a["source"], a["day"], a["amount"], a["baseline"], a["kind"])
            for a in watch["anomalies"]] == [("import-worker", "2026-12-09", 9_100_000, 910_000,
                                              "spike")]  # fmt: skip
    assert watch["anomalies"][0]["id"] == anomaly_id(OWN, "import-worker", "2026-12-09", "spike")
    assert watch["rule_changes"] == []
    assert [w["kind"] for w in watch["warnings"]] == ["no_usage"]
    assert [w["kind"] for w in watch["month_warnings"]] == ["unbilled"]  # never client-z's
    _assert_nothing_of_others(answer.text)  # client-b's name redacted from client-a's warning
    ghost = served.get(f"/api/v1/clients/no-such-client/months/{OPEN}", "account-manager")
    other = served.get(f"/api/v1/clients/{OTHER}/months/{OPEN}", "account-manager")
    assert other.status_code == ghost.status_code == 404 and other.content == ghost.content
    assert served.get(f"/api/v1/clients/{THIRD}/months/{NEVER}", "finance").status_code == 404
    assert (
        served.get(f"/api/v1/clients/{OWN}/months/{OPEN}/sheet.html", "account-manager").status_code
        == 404
    )  # fmt: skip  (no figure: no sheet)


def test_an_issued_month_keeps_every_field_and_gains_watch(served: Served):
    fields = {"client", "month", "status", "revision", "state", "money", "amount",
              "previous_amount", "difference", "reason", "rule_ids", "run_id", "issued_at",
              "issued_by", "confidence", "lines", "bridge"}  # fmt: skip
    for role in ("account-manager", "finance", "product"):
        doc = served.get(f"/api/v1/clients/{OWN}/months/{MONTH}", role).json()
        internal = {"client_reason"} if role == "finance" else set()  # finance reads both
        assert set(doc) == fields | internal | {"watch", "converted"}, role
        assert doc["converted"] is None  # the ledger only: no other currency to show
        assert doc["amount"] == 123458 and doc["status"] == "issued" and doc["revision"] == 1
        assert doc["watch"]["month_closed"] is True and doc["watch"]["projected"] == 123458
    finance = served.get(f"/api/v1/clients/{OTHER}/months/{OPEN}", "finance").json()
    assert finance["watch"]["rule_changes"][0]["effect"] == -333_333  # finance: every client
    assert finance["status"] == "not_issued"  # no run of 2026-12: the watch alone


def test_the_client_page_shows_month_to_date_not_issued(served: Served):
    page = served.get(f"/clients/{OWN}", "account-manager")  # default: the latest month
    assert page.status_code == 200
    text = page.text
    assert "Month to date, not issued" in text and 'id="not-issued"' in text
    assert re.search(r'id="watch-projected">32\.29 USD', text), text
    assert 'id="watch-status">above' in text and "import-worker" in text
    assert "9.10" in text and "0.91" in text  # the anomaly's amount and baseline
    assert "unbilled" in text and 'id="amount"' not in text  # no figure of the open month
    _assert_nothing_of_others(text)
    issued = served.get(f"/clients/{OWN}", "account-manager", month=MONTH).text
    assert 'id="amount"' in issued and "Month to date, not issued" in issued
    other = served.get(f"/clients/{OTHER}", "account-manager", month=OPEN)
    ghost = served.get("/clients/no-such-client", "account-manager", month=OPEN)
    assert other.status_code == ghost.status_code == 404 and other.text == ghost.text


def _clients_in_table(html: str) -> list[str]:
    table = html.split('id="watch-table"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<th scope="row"><a href="/clients/([^"?]+)', table)


def test_the_month_page_lists_every_clients_band_sorted_and_the_anomalies(served: Served):
    for role in ("finance", "product"):
        page = served.get(f"/months/{OPEN}", role)
        assert page.status_code == 200, (role, page.text[:300])
        assert "Month to date, not issued" in page.text
        assert _clients_in_table(page.text) == [OWN, OTHER, THIRD]
        assert "2 anomalies in 2 clients" in page.text and "search-api" in page.text
    by_status = served.get(f"/months/{OPEN}", "finance", watch_sort="status").text
    assert _clients_in_table(by_status) == [OWN, OTHER, THIRD]  # above, within, no budget
    above = served.get(f"/months/{OPEN}", "finance", watch_sort="above").text
    assert _clients_in_table(above) == [OWN, OTHER, THIRD]  # +4.29, -0.42, no band last
    assert "+4.29" in above
    assert served.get(f"/months/{OPEN}", "finance", watch_sort="nope").status_code == 422
    assert served.get(f"/months/{OPEN}", "account-manager").status_code == 403
    assert served.get(f"/months/{NEVER}", "product").status_code == 404


def test_the_store_sorts_in_sql_on_sqlite_and_postgresql(store_url: str):
    tenantcost("db", "upgrade", "--db", store_url)
    engine = open_engine(resolve_settings(db=store_url, environ={}))
    try:
        doc = open_month_document()
        doc["clients"].append({"client": "client-d", "month_to_date": 1, "projected": 40_000_000,
                               "budget": {"low": 1, "expected": 2, "high": 3},
                               "status": "above"})  # fmt: skip
        first = record_watch(engine, closed_month_document(), "test", month_closed=True)
        snapshot = record_watch(engine, doc, "test", month_closed=False)
        assert latest_snapshot(engine, OPEN).id == snapshot != first  # type: ignore[union-attr]

        def order(o: EntryOrder, **kw: Any) -> list[str]:
            return [e["client"] for e in ranked_entries(engine, snapshot, o, **kw)]

        assert order(EntryOrder.CLIENT) == [OWN, OTHER, THIRD, "client-d"]
        assert order(EntryOrder.STATUS) == [OWN, "client-d", OTHER, THIRD]
        assert order(EntryOrder.ABOVE) == ["client-d", OWN, OTHER, THIRD]
        assert order(EntryOrder.ABOVE, offset=1, limit=2) == [OWN, OTHER]
        assert order(EntryOrder.CLIENT, anomalous=True) == [OWN, OTHER]
        assert watched_months(engine, "client-d") == [OPEN]
        assert watched_months(engine, OWN) == [MONTH, OPEN]
        assert watched_month_list(engine) == [MONTH, OPEN]
    finally:
        engine.dispose()


@pytest.mark.parametrize("width", [390])
def test_the_watch_sections_fit_a_phone(browser, served: Served, width: int):
    pages = [("account-manager", f"/clients/{OWN}?month={OPEN}"), ("finance", f"/months/{OPEN}"),
             ("product", f"/months/{OPEN}?watch_sort=above")]  # fmt: skip
    for role, path in pages:
        context = browser.new_context(viewport={"width": width, "height": 800})
        try:
            page = context.new_page()
            page.goto(served.service.url + "/login")
            page.fill("#token", served.tokens[role])
            page.click("button[type=submit]")
            page.wait_for_load_state()
            response = page.goto(served.service.url + path)
            assert response is not None and response.status == 200, path
            assert page.locator("#watch-h").is_visible()
            got = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
            assert got[0] <= got[1], f"{role} {path}: {got[0]} px wide at {width}"
        finally:
            context.close()


def test_a_client_known_only_by_its_watch_has_a_page_of_its_watch(served: Served):
    page = served.get(f"/clients/{NEW_CLIENT}", "finance")
    assert page.status_code == 200, page.text[:300]
    assert f"No statement of {NEW_MONTH} is issued yet" in page.text
    assert re.search(r'id="watch-projected">9\.00 USD', page.text)
    assert 'id="history-table"' not in page.text and 'id="amount"' not in page.text
    doc = served.get(f"/api/v1/clients/{NEW_CLIENT}/months/{NEW_MONTH}", "product").json()
    assert doc["status"] == "not_issued" and doc["watch"]["projected"] == 9_000_000
    assert served.get(f"/clients/{NEW_CLIENT}", "account-manager").status_code == 404


def test_the_watch_seen_band_chart_score_sentence_and_alert_log(served: Served):
    """Issue 36 §7: the month's projection against the band of the clients with a budget
    (client-a and client-b: 45.87 against 31.00 to 42.00), the client's own, the score in a
    sentence, and the alerts sent for finance and admin only (webhooks by host)."""
    from tenantcost.store.alert_deliveries import Claimant, Delivery, claim, finish

    engine = open_engine(resolve_settings(db=served.db, environ={}))
    try:
        me = Claimant()
        hook = Delivery("k1", "https://hooks.example.com/T0/secret-path", "webhook", OPEN, OWN,
                        "anomaly")  # fmt: skip
        mail = Delivery("k2", "finops@example.com", "email", OPEN, OTHER, "status")
        claim(engine, [hook, mail], me)
        finish(engine, hook, me, sent=True, attempts=1, error=None)
        finish(engine, mail, me, sent=False, attempts=3, error="connection refused")
    finally:
        engine.dispose()
    finance = served.get(f"/months/{OPEN}", "finance").text
    chart = finance.split('id="watch-band-figure"', 1)[1].split("</figure>", 1)[0]
    assert "All clients: projected month against the budget band (outside the band)" in chart
    assert ">45.87<" in chart and ">17.93<" in chart  # projected, month to date of the two
    assert "31.00 to 42.00, expected 37.00" in chart
    assert "The 2 clients with a budget (of 3)" in chart
    assert "median of the previous 14 days" in finance and "reaches 4 or −4" in finance
    log = finance.split('id="watch-alerts"', 1)[1].split("</table>", 1)[0]
    assert "https://hooks.example.com/…" in log and "secret-path" not in finance
    assert "finops@example.com" in log and "connection refused" in log
    assert "2 deliveries this month" in finance
    product = served.get(f"/months/{OPEN}", "product").text
    assert 'id="watch-band-figure"' in product and 'id="watch-alerts' not in product
    own = served.get(f"/clients/{OWN}", "account-manager").text
    mine = own.split('id="watch-band-figure"', 1)[1].split("</figure>", 1)[0]
    assert f"{OWN}: projected month against the budget band (outside the band)" in mine
    assert ">32.29<" in mine and "20.00 to 28.00, expected 25.00" in mine
    assert "median of the previous 14 days" in own and 'id="watch-alerts' not in own
    _assert_nothing_of_others(own)


def test_the_daily_cost_per_source_in_json_and_csv_each_scoped(served: Served):
    """The run's daily sums: the month's days only, conserved, anomalies counted per day and
    source; an account manager reads its own client's, never the month's nor another's."""
    doc = served.get(f"/api/v1/months/{OPEN}/watch/daily", "finance").json()
    assert doc["month"] == OPEN and doc["money"] == MONEY and "client" not in doc
    days = doc["days"]
    assert {d["day"] for d in days} == {f"2026-12-{n:02d}" for n in range(1, 12)}
    daily = open_month_daily()
    in_month = daily[daily["day"] >= pd.Timestamp("2026-12-01", tz="UTC")]
    assert sum(d["amount"] for d in days) == int(in_month["amount"].sum())
    flagged = {(d["day"], d["source"]): d["anomalies"] for d in days if d["anomalies"]}
    assert flagged == {("2026-12-09", "import-worker"): 1, ("2026-12-10", "search-api"): 1}
    nine = {d["source"]: d["amount"] for d in days if d["day"] == "2026-12-09"}
    assert nine == {"import-worker": 9_100_000, "search-api": 7_000_000, "web": 1_100_000}
    csv = served.get(f"/api/v1/months/{OPEN}/watch/daily", "product", format="csv")
    assert (
        csv.status_code == 200 and f"watch-daily-{OPEN}.csv" in csv.headers["content-disposition"]
    )
    assert csv.text.splitlines()[0] == "day,source,amount,anomalies"
    assert "2026-12-09,import-worker,9.100000,1" in csv.text.splitlines()
    assert served.get(f"/api/v1/months/{OPEN}/watch/daily", "account-manager").status_code == 403
    assert served.get(f"/api/v1/months/{NEVER}/watch/daily", "finance").status_code == 404
    own = served.get(f"/api/v1/clients/{OWN}/months/{OPEN}/watch/daily", "account-manager")
    assert own.status_code == 200 and own.json()["client"] == OWN
    assert {d["source"] for d in own.json()["days"]} == {"web", "import-worker"}
    assert sum(d["amount"] for d in own.json()["days"]) == 11 * 1_900_000 + 8_200_000
    _assert_nothing_of_others(own.text)
    own_csv = served.get(f"/api/v1/clients/{OWN}/months/{OPEN}/watch/daily", "account-manager",
                         format="csv")  # fmt: skip
    assert f"watch-daily-{OWN}-{OPEN}.csv" in own_csv.headers["content-disposition"]
    _assert_nothing_of_others(own_csv.text)
    other = served.get(f"/api/v1/clients/{OTHER}/months/{OPEN}/watch/daily", "account-manager")
    ghost = served.get(f"/api/v1/clients/no-such/months/{OPEN}/watch/daily", "account-manager")
    assert other.status_code == ghost.status_code == 404 and other.content == ghost.content


def test_the_daily_chart_marks_each_anomaly_and_links_to_its_day(served: Served):
    page = served.get(f"/clients/{OWN}", "account-manager", month=OPEN).text
    section = page.split('id="watch-daily-h"', 1)[1]
    assert (
        '<a href="#watch-day-2026-12-09" aria-label="2026-12-09: spike in import-worker' in section
    )
    assert ">spike</text>" in section  # a text label, not colour alone
    row = section.split('id="watch-day-2026-12-09"', 1)[1].split("</tr>", 1)[0]
    assert "spike in import-worker" in row and "9.10" in row and "10.10" in row
    assert '<a href="#watch-day-2026-12-09">2026-12-09</a>' in page  # the anomaly table's day
    assert f"/api/v1/clients/{OWN}/months/{OPEN}/watch/daily?format=csv" in section
    _assert_nothing_of_others(page)
    month = served.get(f"/months/{OPEN}", "finance").text
    part = month.split('id="watch-daily-h"', 1)[1]
    assert part.count('<a href="#watch-day-') == 2 and 'id="watch-day-2026-12-10"' in part
    assert "1 anomaly: search-api" in part.split('id="watch-day-2026-12-10"', 1)[1][:400]
    assert f"/api/v1/months/{OPEN}/watch/daily?format=csv" in part
