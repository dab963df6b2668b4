"""Product teams: the ``product`` role, the served pricing page and client names.

Against a real ``tenantcost serve`` (uvicorn) on the bundled example with its catalog loaded,
on SQLite and on a real PostgreSQL (the name search is SQL on both):

* ``/pricing`` and ``GET /api/v1/months/{M}/unit-economics`` give the figures of
  ``unit-economics --from-db --format json`` (the same document, to the micro-unit), the
  projection of a month in progress labelled an estimate; product, finance and admin only;
* product reads issued figures only: an open month's draft is never shown to it;
* the catalog's names beside ids, search by id or name, paged as before, scoped for account
  managers;
* the page fits 390 px in Chromium with chart text >= 11 px.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from .service_server import (
    EXAMPLE,
    MONTH,
    Service,
    create_token,
    example_store,
    invoke,
    running_service,
    tenantcost,
)

IN_PROGRESS = "2026-11-20T00:00:00Z"
AFTER = "2026-12-02T00:00:00Z"


@dataclass(frozen=True)
class Served:
    service: Service
    tokens: dict[str, str]
    db: str
    data: str

    def get(self, path: str, role: str | None, **params: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[role]}"} if role else {}
        return httpx.get(
            self.service.url + path,
            params=params or None,
            headers=headers,
            timeout=60,
            follow_redirects=False,
        )  # fmt: skip  (None: keeps ?query)


def _tokens(db: str) -> dict[str, str]:
    return {
        "admin": create_token(db, "admin", "root-admin"),
        "finance": create_token(db, "finance", "fin"),
        "product": create_token(db, "product", "pricing-team"),
        "account-manager": create_token(db, "account-manager", "am-a", "client-a"),
    }


def _store(tmp: Path, backend: str, request: pytest.FixtureRequest, *, close: bool) -> str:
    if backend == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    example_store(db, str(tmp / "data"), close=close)
    tenantcost("catalog", "load", str(EXAMPLE / "catalog.csv"), "--db", db,
               "--data", str(tmp / "data"))  # fmt: skip
    return db


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"pricing-{request.param}")
    db = _store(tmp, request.param, request, close=True)
    with running_service(db, str(tmp / "data"), tmp / "serve.log") as service:
        yield Served(service, _tokens(db), db, str(tmp / "data"))


def cli_document(served: Served, *args: str) -> dict:
    out = tenantcost("unit-economics", "--month", MONTH, "--from-db", "--format", "json",
                     "--db", served.db, "--data", served.data, *args)  # fmt: skip
    return json.loads(out)


@pytest.mark.parametrize(("by", "as_of"), [("plan", IN_PROGRESS), ("segment", AFTER)])
def test_the_api_gives_the_cli_document_to_every_role_that_may_price(
    served: Served, by: str, as_of: str
) -> None:
    expected = cli_document(served, "--by", by, "--as-of", as_of)
    for role in ("product", "finance", "admin"):
        answer = served.get(f"/api/v1/months/{MONTH}/unit-economics", role, by=by, as_of=as_of)
        assert answer.status_code == 200, answer.text
        got = answer.json()
        # the example's cost data covers 1 h of November's 720: every figure on the projected
        # basis (the run rate, x 720 exactly), never that hour's cost against a month's revenue
        assert (got["basis"], got["coverage"]) == ("projected", round(1 / 720, 9))
        assert drop(got, PROJECTED) == drop(expected, PROJECTED)
        month_cost = {c["client"]: c["cost"] for c in expected["clients"]}
        assert {c["client"]: c["cost"] for c in got["clients"]} == {
            c: 720 * a for c, a in month_cost.items()}  # fmt: skip
        assert got["totals"]["cost"] == 720 * expected["totals"]["cost"]
        assert got["totals"]["revenue"] == expected["totals"]["revenue"]  # not projected
    assert (expected["projection"] is not None) is (as_of == IN_PROGRESS)
    for role, status in (("account-manager", 403), (None, 401)):
        assert served.get(f"/api/v1/months/{MONTH}/unit-economics", role).status_code == status


PROJECTED = {"basis", "coverage", "residual", "totals", "plans", "segments", "clients",
             "concentration", "not_in_catalog", "under_margin_floor"}  # fmt: skip
"""The document's keys a projected basis changes (the rest is the CLI's, to the byte)."""


def drop(doc: dict, keys: set[str]) -> dict:
    return {k: v for k, v in doc.items() if k not in keys}


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_pricing_page_shows_the_documents_figures(served: Served) -> None:
    doc = cli_document(served, "--as-of", IN_PROGRESS)
    page = served.get("/pricing", "product", month=MONTH, by="plan", as_of=IN_PROGRESS)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html, text = page.text, _text(page.text)
    assert "Estimate: the month is in progress" in text
    assert "These are estimates, not issued figures." in text
    assert "issued revision 1" in text
    # the totals and every plan, with the catalog's names and the price floors
    # 1 h of cost data: the projected basis (x 720), marked, against the month's revenue
    assert "Projected: the cost data covers 0.1 % of the month" in text
    assert "432.295 USD" in text  # all-in total 600,410 micro-USD x 720 at 3 decimals
    for plan in doc["plans"]:
        assert f'<th scope="row">{plan["plan"]}</th>' in html
    for client in doc["clients"]:
        assert client["client"] in html and client["name"] in html
        assert f'href="/clients/{client["client"]}?month={MONTH}"' in html  # its page
    assert "263.948" in text and "879.827" in text  # business: all-in per client, price floor
    assert "Gini coefficient 0.402" in text
    # charts: labelled axes with units, text never under 11 px
    assert "mean cost per client, USD" in html and "gross margin, % of revenue" in html
    sizes = [int(s) for s in re.findall(r'font-size="(\d+)"', html)]
    assert sizes and min(sizes) >= 11
    assert html.count('class="bar all-in"') == len(doc["plans"])
    # a finished month: no projection, no estimate label
    after = _text(served.get("/pricing", "product", month=MONTH, as_of=AFTER).text)
    assert "Estimate" not in after and "432.295 USD" in after  # closed, but 1 h: projected


def test_the_pricing_page_is_for_product_finance_and_admin(served: Served) -> None:
    for role in ("product", "finance", "admin"):
        page = served.get("/pricing", role)
        assert page.status_code == 200, (role, page.text[:300])
        assert f"Pricing: {MONTH} by plan" in page.text  # the latest month by default
    denied = served.get("/pricing", "account-manager")
    assert denied.status_code == 403 and "Acme Analytics" not in denied.text
    anonymous = served.get("/pricing", None)
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login")
    assert served.get("/pricing", "product", month="2026-10").status_code == 404
    assert served.get("/pricing", "product", by="colour").status_code == 422


def test_product_reads_every_clients_issued_figures_the_cascade_and_the_comparison(
    served: Served,
) -> None:
    months = served.get("/api/v1/months", "product").json()
    assert [m["month"] for m in months] == [MONTH]
    for client in ("client-a", "client-b", "client-c"):
        doc = served.get(f"/api/v1/clients/{client}/months/{MONTH}", "product").json()
        assert doc["status"] == "issued" and doc["revision"] == 1
        page = served.get(f"/clients/{client}", "product")
        assert page.status_code == 200
    cascade = served.get(f"/api/v1/months/{MONTH}/reconciliation", "product").json()
    assert cascade["status"] == "issued" and cascade["revision"] == 1
    compare = served.get(f"/api/v1/months/{MONTH}/compare", "product", keys="requests")
    assert compare.status_code == 200
    for path in (f"/months/{MONTH}", "/months"):  # issued months, without finance's workings
        assert served.get(path, "product").status_code == 200, path
    for path in (f"/months/{MONTH}/finance-summary.html", "/api/v1/tokens",
                 f"/api/v1/batches?month={MONTH}"):  # fmt: skip
        assert served.get(path, "product").status_code == 403, path


def test_names_beside_ids_and_search_by_id_or_name(served: Served) -> None:
    def found(role: str, **params: str) -> dict:  # the search's fields (the list has more)
        doc = served.get("/api/v1/clients", role, sort="id", **params).json()
        doc["items"] = [{k: i[k] for k in ("id", "name", "statement")} for i in doc["items"]]
        return {k: doc[k] for k in ("items", "page", "per_page", "total")}

    every = found("product")
    assert every["items"] == [
        {"id": "client-a", "name": "Acme Analytics", "statement": True},
        {"id": "client-b", "name": "Bolt Imports", "statement": True},
        {"id": "client-c", "name": "Cobalt Labs", "statement": True},
    ]
    by_name = found("admin", q="ANALYTICS")
    assert by_name["items"] == [{"id": "client-a", "name": "Acme Analytics", "statement": True}]
    by_id = found("admin", q="nt-b")
    assert by_id["items"] == [{"id": "client-b", "name": "Bolt Imports", "statement": True}]
    # "b" is in client-b's id and in two names: counted and paged in SQL, as before
    paged = found("admin", q="b", per_page="1", page="2")
    assert paged == {"items": [{"id": "client-c", "name": "Cobalt Labs", "statement": True}],
                     "page": 2,
                     "per_page": 1, "total": 2}  # fmt: skip
    assert found("admin", q="%")["total"] == 0  # no wildcard
    # an account manager matches and reads its own clients' names only
    mine = found("account-manager")
    assert mine["items"] == [{"id": "client-a", "name": "Acme Analytics", "statement": True}]
    assert found("account-manager", q="bolt")["total"] == 0
    listed = served.get("/clients", "account-manager", q="acme").text
    assert "Acme Analytics" in listed and "Bolt" not in listed and "Cobalt" not in listed
    own = served.get("/clients/client-a", "account-manager").text
    assert 'id="client-name">Acme Analytics<' in own
    assert "Bolt Imports" not in own and "Cobalt Labs" not in own
    # the pages: the list, a client, the month's clients under each key
    assert "Bolt Imports" in served.get("/clients", "finance", q="bolt").text
    assert 'id="client-name">Cobalt Labs<' in served.get("/clients/client-c", "product").text
    month = served.get(f"/months/{MONTH}", "finance").text
    for name in ("Acme Analytics", "Bolt Imports", "Cobalt Labs"):
        assert f'<span class="client-name">{name}</span>' in month


def _log_in(browser, served: Served, role: str, width: int, target: str):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(f"{served.service.url}/login?" + urlencode({"next": target}))
    page.fill("#token", served.tokens[role])
    page.keyboard.press("Enter")
    page.wait_for_url(f"{served.service.url}{target}")
    return context, page


def test_the_pricing_page_fits_a_phone_with_readable_charts(browser, served: Served) -> None:
    for width in (390, 1280):
        target = f"/pricing?month={MONTH}&as_of={IN_PROGRESS}"
        context, page = _log_in(browser, served, "product", width, target)
        assert page.locator("h1").count() == 1
        assert page.locator('nav a[href="/pricing"][aria-current="page"]').count() == 1
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), width
        smallest = page.evaluate(
            "Math.min(...[...document.querySelectorAll('svg.chart text')].map("
            "t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))"
        )
        assert smallest >= 11, (width, smallest)
        assert page.locator("svg.chart").count() == 3  # cost, margin, margin across months
        context.close()
    context, page = _log_in(browser, served, "account-manager", 390, "/clients")
    assert page.locator('nav a[href="/pricing"]').count() == 0  # no link to a page it may not open
    context.close()


@pytest.fixture(params=["sqlite"])
def open_month(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    db = _store(tmp_path, request.param, request, close=False)
    with running_service(db, str(tmp_path / "data"), tmp_path / "serve.log") as service:
        yield Served(service, _tokens(db), db, str(tmp_path / "data"))


def test_product_never_reads_a_draft(open_month: Served) -> None:
    """The month was run, never closed: finance prices the draft, product sees nothing; a
    plan without a figure prices on both, draft and issued."""
    served = open_month
    assert served.get("/api/v1/months", "product").json() == []
    assert served.get("/api/v1/clients", "product").json()["total"] == 0
    for path in (
        f"/api/v1/clients/client-a/months/{MONTH}",
        f"/api/v1/clients/client-a/months/{MONTH}/sheet.html",
        "/clients/client-a",
        f"/api/v1/months/{MONTH}/reconciliation",
        f"/api/v1/months/{MONTH}/compare?keys=requests",
        f"/api/v1/months/{MONTH}/unit-economics",
        f"/pricing?month={MONTH}",
    ):
        assert served.get(path, "product").status_code == 404, path
    empty = served.get("/pricing", "product")
    assert empty.status_code == 200 and "No month to price yet" in empty.text
    draft = served.get("/pricing", "finance", month=MONTH)
    assert draft.status_code == 200 and "(not issued)" in draft.text
    assert served.get(f"/api/v1/months/{MONTH}/compare", "finance", keys="requests").json()
    # A catalog plan whose only client has no figure in the month has no mean cost nor price
    # floor: it answered 500 (``auto_places`` of None), for finance on the draft and for
    # product on the default page once the month is issued. It is listed, its bar says so.
    catalog = Path(served.data).parent / "catalog-premium.csv"
    catalog.write_text(
        (EXAMPLE / "catalog.csv").read_text()
        + "client-z,Zinc Works,premium,enterprise,Lee Wong,50.00,USD,2026-01-01,\n"
    )
    store = ("--db", served.db, "--data", served.data)
    tenantcost("catalog", "load", str(catalog), *store)
    draft = served.get("/pricing", "finance", month=MONTH)
    assert draft.status_code == 200, draft.text[-500:]
    assert '<th scope="row">premium</th>' in draft.text and "no client figure" in draft.text
    assert served.get("/pricing", "product").status_code == 200  # nothing issued yet
    tenantcost("close", "--month", MONTH, "--allow-incomplete", *store)
    issued = served.get("/pricing", "product")
    assert issued.status_code == 200, issued.text[-500:]
    assert f"Pricing: {MONTH} by plan" in issued.text and "no client figure" in issued.text
    api = served.get(f"/api/v1/months/{MONTH}/unit-economics", "product").json()
    premium = next(p for p in api["plans"] if p["plan"] == "premium")
    assert premium["cost_per_client"]["mean"] is None


def test_unit_economics_out_html_writes_the_page_to_the_folder_only(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = invoke("unit-economics", "--config", str(EXAMPLE / "rules.yaml"),
                  "--costs", str(EXAMPLE / "costs.json"), "--usage", str(EXAMPLE / "usage.csv"),
                  "--catalog", str(EXAMPLE / "catalog.csv"), "--month", MONTH,
                  "--as-of", AFTER, "--format", "html", "--out", str(out))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert done.stdout == f"{out / 'unit_economics.html'}\n"
    assert "<html" not in done.stdout and "<html" in (out / "unit_economics.html").read_text()
    assert f"wrote 5 files to {out}" in done.stderr
