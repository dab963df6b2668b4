"""The two views of a client's sheet (issue 36 §8) and the withheld external rate (§9).

The client view (what an account manager sends) names the client by its catalog name and
leaves out the confidence grade, the amounts under other keys, the reproduce command and the
input files' names; the internal view (finance, admin: ``?view=internal``, ``report --view
internal``) has them. An account manager never gets the internal view. In the bundled
example every pool is shared by fewer than ``privacy.min_pool_clients`` (5) clients, so the
external search service's cost is withheld: its rate (0.065 USD per hour, times the hours of
the period, is that cost) must not appear anywhere, while ``min_pool_clients: 1`` shows it
(the positive control). Real uvicorn on SQLite, real WeasyPrint PDFs read page by page with
``pdftotext``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from bs4 import BeautifulSoup
from sqlalchemy import select

from tenantcost.store.engine import open_engine
from tenantcost.store.models import SheetRender, table
from tenantcost.store.settings import resolve_settings

from .service_server import (
    EXAMPLE,
    MONTH,
    Service,
    create_token,
    example_store,
    running_service,
    tenantcost,
)

RATE = "0.065"
INTERNAL_ITEMS = ("keys-table", "confidence-table", "To reproduce", "usage.csv", "costs.json")
SHEET = f"/api/v1/clients/{{client}}/months/{MONTH}/sheet"


@dataclass(frozen=True)
class Served:
    service: Service
    db: str
    tokens: dict[str, str]

    def get(self, role: str, client: str, fmt: str, view: str | None = None) -> httpx.Response:
        params = {"view": view} if view is not None else {}
        headers = {"Authorization": f"Bearer {self.tokens[role]}"}
        url = self.service.url + SHEET.format(client=client) + f".{fmt}"
        return httpx.get(url, params=params, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("views")
    db, data = f"sqlite:///{folder / 'store.db'}", str(folder / "data")
    example_store(db, data)
    tenantcost("catalog", "load", str(EXAMPLE / "catalog.csv"), "--db", db, "--data", data)
    tokens = {
        "finance": create_token(db, "finance", "fin"),
        "product": create_token(db, "product", "prod"),
        "manager": create_token(db, "account-manager", "dana", "client-b"),
    }
    environ = {"TENANTCOST_PRERENDER": "0"}  # every sheet here is rendered by its request
    with running_service(db, data, folder / "serve.log", environ=environ) as service:
        yield Served(service, db, tokens)


def _text(html: str) -> str:
    return BeautifulSoup(html, "html.parser").get_text(" ")


def test_the_client_view_names_the_client_and_leaves_out_finances_items(served: Served):
    html = served.get("manager", "client-b", "html")
    assert html.status_code == 200, html.text
    page = BeautifulSoup(html.text, "html.parser")
    assert page.find("h1").get_text() == "Cost sheet: Bolt Imports (client-b)"
    assert "Bolt Imports" in page.find("title").get_text()
    for item in INTERNAL_ITEMS:
        assert item not in html.text, item
    assert page.find(id="confidence") is None and "Confidence" not in _text(html.text)
    assert page.find(id="internal-note") is None
    # kept: the rule, its scope and exclusions, the unattributed share, provenance by
    # fingerprint
    for kept in ("rule", "unattributed", "provenance"):
        assert page.find("section", id=kept) is not None, kept
    assert "saas-2026-11" in html.text and "load generators" in html.text
    assert page.select('#provenance code[title^="sha256 "]')
    md = served.get("manager", "client-b", "md")
    assert md.status_code == 200
    assert md.text.startswith("# Cost sheet: Bolt Imports (client-b)\n")
    for item in ("Confidence", "| File |", "```sh", "usage.csv", "--client"):
        assert item not in md.text, item
    # the external cost's pool is withheld (3 clients < 5): so is its rate, on every format
    for body in (html.text, md.text):
        assert "withheld" in body and RATE not in body
        assert "external-search-service (external cost not seen by OpenCost, its amount" in body


def test_the_internal_view_is_finances_and_never_kept(served: Served):
    html = served.get("finance", "client-b", "html", "internal")
    assert html.status_code == 200, html.text
    page = BeautifulSoup(html.text, "html.parser")
    assert page.find(id="internal-note") is not None
    assert page.find("h1").get_text() == "Cost sheet: Bolt Imports (client-b)"
    for item in INTERNAL_ITEMS:
        assert item in html.text, item
    assert "--view internal" in page.select_one(".reproduce").get_text()
    assert RATE not in html.text  # the internal view withholds what the client view does
    md = served.get("finance", "client-b", "md", "internal")
    assert md.status_code == 200 and "## 4. Confidence:" in md.text and "```sh" in md.text
    assert "-internal.md" in md.headers["content-disposition"]
    # the client view is what finance gets without asking, and what is kept
    plain = served.get("finance", "client-b", "md")
    assert plain.status_code == 200 and "Confidence" not in plain.text
    engine = open_engine(resolve_settings(db=served.db, environ={}))
    r = table(SheetRender).c
    with engine.connect() as connection:
        kept = [bytes(b) for b in connection.execute(select(r.body)).scalars()]
    engine.dispose()
    assert kept and not any(b"Internal version" in body for body in kept)
    assert served.get("finance", "client-b", "md", "everything").status_code == 422


@pytest.mark.parametrize(
    ("role", "client", "status"),
    [("manager", "client-b", 403), ("manager", "client-a", 404), ("product", "client-b", 403)],
)
def test_only_finance_and_admin_read_the_internal_view(
    served: Served, role: str, client: str, status: int
):
    for fmt in ("html", "md", "pdf"):
        answer = served.get(role, client, fmt, "internal")
        assert answer.status_code == status, (fmt, answer.text)
        assert "Bolt" not in answer.text and "Acme" not in answer.text


def _pages(pdf: bytes, folder: Path) -> list[list[str]]:
    """Each page's non-empty lines, as pdftotext reads them."""
    path = folder / "sheet.pdf"
    path.write_bytes(pdf)
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True)
    count = int(next(x for x in info.stdout.splitlines() if x.startswith("Pages:")).split()[1])
    pages = []
    for n in range(1, count + 1):
        text = subprocess.run(
            ["pdftotext", "-f", str(n), "-l", str(n), str(path), "-"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        pages.append([line.strip() for line in text.splitlines() if line.strip()])
    return pages


@pytest.mark.parametrize("view", ["client", "internal"])
def test_no_heading_is_left_alone_at_the_bottom_of_a_pdf_page(
    served: Served, view: str, tmp_path: Path
):
    html = served.get("finance", "client-b", "html", view)
    page = BeautifulSoup(html.text, "html.parser")
    title = page.find("h1").get_text(" ", strip=True)
    headings = {" ".join(h.get_text(" ").split()) for h in page.select("h1, h2, h3, h4, caption")}
    pdf = served.get("finance", "client-b", "pdf", view)
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    pages = _pages(pdf.content, tmp_path)
    assert len(pages) >= 2, pages  # a multi-page sheet, or the test checks nothing
    text = " ".join(" ".join(p) for p in pages)
    assert "Bolt Imports" in text and RATE not in text
    assert ("Confidence" in text) is (view == "internal")
    for number, lines in enumerate(pages, start=1):
        body = [x for x in lines if x != title and not x.startswith(f"Page {number} of")]
        assert body, number
        assert " ".join(body[-1].split()) not in headings, (number, body[-3:])


def test_report_writes_the_client_view_unless_told_and_withholds_the_rate(tmp_path: Path):
    folder = tmp_path / "example"
    shutil.copytree(EXAMPLE, folder)
    rules = folder / "rules.yaml"
    base = ["report", "--config", str(rules), "--month", MONTH, "--format", "md"]
    base += ["--client", "client-a"]
    catalog = ["--catalog", str(folder / "catalog.csv")]
    tenantcost(*base, *catalog, "--out", str(tmp_path / "client"))
    client = (tmp_path / "client" / "clients" / "client-a.md").read_text()
    assert client.startswith("# Cost sheet: Acme Analytics (client-a)\n")
    assert "Confidence" not in client and "```sh" not in client and "rules.yaml" not in client
    assert RATE not in client and "its amount is withheld" in client
    # the internal view, and the positive control: with every pool shown (min_pool_clients
    # 1) the external cost's rate is shown too
    rules.write_text(rules.read_text() + "privacy:\n  min_pool_clients: 1\n")
    tenantcost(*base, "--view", "internal", "--out", str(tmp_path / "internal"))
    internal = (tmp_path / "internal" / "clients" / "client-a.md").read_text()
    assert internal.startswith("# Cost sheet: client-a\n")  # no catalog given: the id
    assert "## 4. Confidence:" in internal and "--view internal" in internal
    assert "0.065 USD per hour" in internal and "withheld" not in internal
