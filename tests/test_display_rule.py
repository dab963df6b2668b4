"""One figure, one rounding, frozen with its revision; catalog names redacted for managers.

The bundled example (one hour of November, closed as revision 1, catalog loaded), reopened
with a reason for clients that names two other clients by their catalog names, and closed
again (revision 2). Through a real server:

* a client's amount is the same string on its page and on its sheet, at the decimals the
  close froze on the close event (migration 0025);
* an issued revision keeps its decimals when the display rule changes afterwards, while a
  draft would follow the new rule;
* client-a's account manager reads the reason with Bolt Imports and Cobalt Labs redacted,
  whatever their case, and its own name as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from html import unescape

import httpx
import pytest
from sqlalchemy import select

from tenantcost.report import display_rule
from tenantcost.report.privacy import REDACTED
from tenantcost.store.display import decide_places, run_places
from tenantcost.store.engine import open_engine
from tenantcost.store.models import MonthEvent, table
from tenantcost.store.settings import resolve_settings
from tenantcost.store.shown import compute_shown

from .service_server import EXAMPLE, MONTH, create_token, example_store, running_service, tenantcost

REASON = "Usage of Bolt Imports' batch and cobalt labs was counted for Acme Analytics"


@dataclass(frozen=True)
class Served:
    url: str
    db: str
    headers: dict[str, str]

    def get(self, path: str, **params: str) -> str:
        answer = httpx.get(self.url + path, params=params, headers=self.headers, timeout=120)
        assert answer.status_code == 200, answer.text[:300]
        return answer.text


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("display-rule")
    db, data = f"sqlite:///{tmp / 'store.db'}", str(tmp / "data")
    store = ("--db", db, "--data", data)
    example_store(db, data, close=True)
    tenantcost("catalog", "load", str(EXAMPLE / "catalog.csv"), *store)
    tenantcost("reopen", "--month", MONTH, "--reason", "internal", "--client-reason", REASON,
               *store)  # fmt: skip
    tenantcost("close", "--month", MONTH, "--allow-incomplete", "--force", *store)
    token = create_token(db, "account-manager", "am-a", "client-a")
    with running_service(db, data, tmp / "serve.log") as service:
        yield Served(service.url, db, {"Authorization": f"Bearer {token}"})


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_a_clients_amount_is_one_string_on_its_page_and_its_sheet(served: Served) -> None:
    engine = open_engine(resolve_settings(db=served.db, environ={}))
    e = table(MonthEvent).c
    with engine.connect() as connection:
        events = connection.execute(
            select(e.revision, e.run_id, e.display_rule, e.display_places)
            .where(e.action == "close")
            .order_by(e.id)
        ).all()
        assert [(r.revision, r.display_rule) for r in events] == [(1, 2), (2, 2)]
        shown = compute_shown(connection, str(events[-1].run_id))
    assert shown.places == events[-1].display_places == 4
    amount = f"{shown.rule['client-a'] / 10**shown.places:.{shown.places}f}"
    assert amount == "0.1234"
    page = _text(served.get("/clients/client-a", month=MONTH))
    sheet = _text(served.get(f"/api/v1/clients/client-a/months/{MONTH}/sheet.html"))
    assert f"{amount} USD" in page and amount in sheet
    assert "0.1235" not in page and "0.1235" not in sheet


def test_an_issued_revision_keeps_its_decimals_when_the_rule_changes(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(resolve_settings(db=served.db, environ={}))
    e = table(MonthEvent).c
    with engine.connect() as connection:
        run_id = str(connection.execute(
            select(e.run_id).where(e.action == "close").order_by(e.id.desc()).limit(1)
        ).scalar())  # fmt: skip
        before = compute_shown(connection, run_id)
        changed = replace(display_rule.RULES[2], currency_places={"USD": 6})
        monkeypatch.setitem(display_rule.RULES, 2, changed)
        assert decide_places(connection, run_id) == 6  # a draft would follow the new rule
        assert run_places(connection, run_id) == 4  # the issued revision does not
        after = compute_shown(connection, run_id)
        assert (after.places, after.rule) == (before.places, before.rule)
        # a revision closed before 0025 (nothing recorded) reads by version 1, as then
        connection.execute(table(MonthEvent).update().values(display_places=None))
        assert run_places(connection, run_id) == 4
        connection.rollback()


def test_another_clients_catalog_name_reaches_no_manager(served: Served) -> None:
    page = _text(served.get("/clients/client-a", month=MONTH))
    told = f"Usage of {REDACTED}' batch and {REDACTED} was counted for Acme Analytics"
    assert told in page
    for fmt in ("html", "md"):
        sheet = served.get(f"/api/v1/clients/client-a/months/{MONTH}/sheet.{fmt}")
        assert "bolt imports" not in sheet.lower() and "cobalt labs" not in sheet.lower(), fmt
    document = served.get(f"/api/v1/clients/client-a/months/{MONTH}")
    assert "bolt" not in document.lower() and "cobalt" not in document.lower()
