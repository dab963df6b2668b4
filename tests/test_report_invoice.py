"""What users see of the invoice: client sheets, the finance summary, reconciliation.json and
the web month page, on the examples/invoice-close hour.

The pack is ``tenantcost report --billing`` on the example's FOCUS 1.2 file (the rule file's
``billing.sources`` left out, so the option is what brings the billing data in). The expected
figures are tests/test_invoice_example.py's, computed with exact fractions.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tenantcost.report.display import format_amount
from tenantcost.report.invoice_view import billing_basis, invoice_ids_text, invoice_view
from tenantcost.service.page_data import stored_invoice

from .test_invoice_cascade import node
from .test_invoice_cascade import run as run_core
from .test_invoice_example import FIGURES, by_part, expected_invoice

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "invoice-close"
FOCUS = EXAMPLE / "billing" / "2026-11" / "focus.csv"
CLIENTS = ("client-a", "client-b", "client-c")
BILLED = ("billed: Amazon Relational Database Service", "NAT gateway", "credits")
"""The example's shared billed entries: every client has a line from each."""
AT = "2026-12-01T00:00:00Z"


def rules_without_sources(folder: Path) -> Path:
    """The example's rule file with absolute inputs and no ``billing.sources`` (so the
    billing data comes from ``--billing``)."""
    text = (EXAMPLE / "rules.yaml").read_text(encoding="utf-8")
    text = text.replace("  sources: [billing/]", "")
    for name in ("costs.json", "usage.csv"):
        text = text.replace(f"[{name}]", f"[{EXAMPLE / name}]")
    assert "sources" not in yaml.safe_load(text)["billing"]
    path = folder / "rules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """``tenantcost report --billing FOCUS.csv`` on the example (HTML and Markdown; the PDF
    is WeasyPrint's rendering of the same HTML): the pack and the decimals it shows."""
    folder = tmp_path_factory.mktemp("invoice-pack")
    out = folder / "pack"
    done = subprocess.run(
        [sys.executable, "-m", "tenantcost", "report", "--config",
         str(rules_without_sources(folder)), "--billing", str(FOCUS), "--out", str(out),
         "--format", "html,md", "--generated-at", AT],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = (out / "finance-summary.md").read_text(encoding="utf-8")
    places = re.search(r"shown to (\d) decimals", summary)
    assert places is not None
    return out, int(places.group(1))


def check_invoice(doc: dict[str, Any]) -> None:
    """The ``invoice`` object against the example's fractions: totals, invoices, repricing,
    the parts (zero lines aside) and the bridge by name."""
    for key, value in expected_invoice(FIGURES).items():
        assert doc[key] == value, key
    assert sum(line["amount"] for line in doc["lines"]) == doc["billed_total"]
    parts: dict[str, int] = {}
    for part, _, amount in FIGURES.invoice_lines():
        parts[part] = parts.get(part, 0) + amount
    nonzero = {p: a for p, a in by_part(doc["lines"]).items() if a}
    assert nonzero == {p: a for p, a in parts.items() if a}
    bridge = {ln["name"]: ln["amount"] for ln in doc["lines"] if ln["part"] == "bridge"}
    assert {n: a for n, a in bridge.items() if a or n == "rounding"} == FIGURES.bridge


def md_rows(text: str, first_cell: str) -> list[list[str]]:
    """The Markdown table rows whose first cell starts with ``first_cell``."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first_cell):
            rows.append(cells)
    return rows


def test_client_sheets_say_billed_rates_and_invoice_and_show_billed_lines(
    pack_dir: tuple[Path, int],
) -> None:
    out, places = pack_dir
    for client in CLIENTS:  # the lines are rounded with the total: each within a unit
        md = (out / "clients" / f"{client}.md").read_text(encoding="utf-8")
        html = (out / "clients" / f"{client}.html").read_text(encoding="utf-8")
        for text in (md, html):
            assert "billed effective (amortized) rates" in text
            assert "reconciles to invoice INV-2026-11-001" in text
            assert "They reconcile to invoice INV-2026-11-001." in text
        for label in BILLED:  # each billed pool's line, with the fraction figure
            rows = md_rows(md, f"{label} (billed service)")
            assert len(rows) == 1, (client, label)
            shown = int(rows[0][-1].replace(",", "").replace(".", "")) * 10 ** (6 - places)
            assert abs(shown - FIGURES.lines[(client, label)]) < 10 ** (6 - places)  # rounded
            assert f'{label}<span class="sub">billed service</span>' in html
        total = format_amount(FIGURES.clients[client], places)
        assert f"**Total** | **{total} USD**" in md and f'id="total">{total} USD<' in html
        # privacy: no other client's name, nor a company figure a total would give away
        company = (FIGURES.billed_total, sum(FIGURES.clients.values()), FIGURES.opencost)
        for text in (md, html):
            for other in set(CLIENTS) - {client}:
                assert other not in text, (client, other)
            for figure in company:
                assert format_amount(figure, places) not in text, (client, figure)
            assert "Invoice cascade" not in text and "corporate IT" not in text


def test_finance_summary_shows_the_invoice_cascade_and_repricing(
    pack_dir: tuple[Path, int],
) -> None:
    out, places = pack_dir
    md = (out / "finance-summary.md").read_text(encoding="utf-8")
    invoice = json.loads((out / "reconciliation.json").read_text(encoding="utf-8"))["invoice"]
    section = md.split("## 2. Invoice cascade", 1)[1].split("### Repricing", 1)[0]
    unit = 10 ** (6 - places)
    shown = []
    for line in invoice["lines"]:  # every line, in order, within one display unit
        row = next(r for r in md_rows(section, line["part"]) if r[1] == line["name"])
        value = int(row[3].replace(",", "").replace(".", ""))
        assert abs(value * unit - line["amount"]) < unit, line
        shown.append((line["part"], value))
    in_scope = sum(v for p, v in shown if p not in ("outside", "bridge"))
    effective = md_rows(section, "**=**")[0]
    assert effective[1] == "**effective cost in scope**"
    assert int(effective[3].strip("*").replace(".", "")) == in_scope
    assert abs(in_scope * unit - FIGURES.effective_in_scope) < unit
    billed = format_amount(FIGURES.billed_total, places)
    assert sum(v for _, v in shown) * unit == int(billed.replace(".", "")) * unit
    assert f"| **=** | **Invoice total (billed)** | | **{billed}** |" in section
    assert md_rows(section, "invoice")[0][1:] == [
        "INV-2026-11-001", "Σ billed cost of its rows, rounded once", billed,
    ]  # fmt: skip
    assert f"| **Gap** | closes | | **{format_amount(0, places)}** |" in section
    for name in ("Purchase", "Usage / Savings Plan", "rounding", "corporate IT"):
        assert f"| {name} |" in section
    repricing = md_rows(md.split("### Repricing per cluster", 1)[1], "cluster-one")[0]
    ratio = f"{FIGURES.billed_effective / FIGURES.opencost:.4f}"
    assert repricing[4:] == [
        format_amount(FIGURES.opencost, places), format_amount(FIGURES.billed_effective, places),
        ratio,
    ]  # fmt: skip
    html = (out / "finance-summary.html").read_text(encoding="utf-8")
    assert f'id="invoice-billed-total">{billed}<' in html
    assert f'id="invoice-gap">{format_amount(0, places)}<' in html
    assert "Repricing per cluster" in html and f">{ratio}<" in html
    assert "billed effective (amortized) rates; reconciles to invoice INV-2026-11-001" in html
    index = (out / "index.html").read_text(encoding="utf-8")
    assert 'href="reconciliation.json"' in index and f"{billed} USD billed" in index


def test_reconciliation_json_carries_the_invoice_object(pack_dir: tuple[Path, int]) -> None:
    out, _ = pack_dir
    doc = json.loads((out / "reconciliation.json").read_text(encoding="utf-8"))
    check_invoice(doc["invoice"])
    assert doc["billed_total"] == FIGURES.billed_total
    assert doc["opencost_estimate"] == FIGURES.opencost
    assert doc["gap"] == 0


def test_estimates_are_marked_and_invoice_ids_listed() -> None:
    """``--allow-unbilled``: finance's repricing marks the estimated periods and keeps them
    out of the ratio; a client's sheet says part of its figure is an estimate."""
    _result, _billing, invoice = run_core([node(0, "0.4")], allow_unbilled=True)
    doc = invoice.to_json()
    view = invoice_view(doc, 6)
    assert view is not None and view.estimates and view.closes
    billed, estimated = view.repricing
    assert (billed.estimate, billed.billed, billed.ratio) == (False, "0.400000", "0.8000")
    assert (estimated.estimate, estimated.billed, estimated.ratio) == (True, "-", "-")
    assert estimated.opencost == "0.500000"
    basis = billing_basis(doc, lambda text: text)
    assert basis is not None and "OpenCost's estimate" in basis.estimate
    assert invoice_view(None, 2) is None and billing_basis(None, str) is None
    assert invoice_ids_text(["INV-1", "INV-2"]) == "invoices INV-1, INV-2"
    assert invoice_ids_text(["(no invoice id)"]).startswith("the billing data's total")


def test_month_page_reads_the_stored_invoice_and_shows_it(pack_dir: tuple[Path, int]) -> None:
    """The month page's accessor tolerates runs without a recorded cascade; with one (a
    JSON text, as a store column holds it) the page's invoice block shows its figures."""
    from tenantcost.service.pages import _environment

    out, places = pack_dir
    invoice = json.loads((out / "reconciliation.json").read_text(encoding="utf-8"))["invoice"]
    assert stored_invoice({}) is None and stored_invoice({"invoice": None}) is None
    assert stored_invoice({"invoice": ""}) is None
    assert stored_invoice({"invoice": json.dumps(invoice)}) == invoice
    assert stored_invoice({"invoice": invoice}) == invoice
    view = invoice_view(stored_invoice({"invoice": json.dumps(invoice)}), places)
    html = _environment().get_template("_invoice.html").render(invoice=view, number=None)
    billed = format_amount(FIGURES.billed_total, places)
    assert '<h2 id="invoice-h">Invoice cascade</h2>' in html
    assert f'id="invoice-billed-total">{billed}<' in html and "INV-2026-11-001" in html
    assert f">{format_amount(FIGURES.billed_effective, places)}<" in html


def test_served_month_page_shows_the_recorded_invoice(
    tmp_path: Path, pack_dir: tuple[Path, int]
) -> None:
    """Through uvicorn: a run whose store row records the invoice cascade (the store's
    ``run.invoice``) shows it to finance on the month page."""
    from sqlalchemy import update

    from tenantcost.store.engine import open_engine
    from tenantcost.store.models import Run, table
    from tenantcost.store.settings import resolve_settings

    from .service_web_server import MONTH, SECRET, Served, build_store, running_service
    from .test_service_pages import logged_in

    out, places = pack_dir
    invoice = json.loads((out / "reconciliation.json").read_text(encoding="utf-8"))["invoice"]
    db, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    tokens = build_store(db, data, close=True)
    engine = open_engine(resolve_settings(db=db, data=data, environ={}))
    with engine.begin() as conn:  # recorded with the run, before a worker reads the month
        conn.execute(update(table(Run)).values(invoice=json.dumps(invoice)))
    engine.dispose()
    with running_service(db, data) as url:
        page = logged_in(Served(url, db, data, SECRET, tokens), "finance").get(
            f"/months/{MONTH}"
        ).text
    assert "Invoice cascade" in page and "Repricing per cluster" in page
    assert f'id="invoice-billed-total">{format_amount(FIGURES.billed_total, places)}<' in page
