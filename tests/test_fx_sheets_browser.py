"""Sheets in another currency, in real Chromium: EUR (2 decimals), GBP (2, a cross rate)
and JPY (0, a cross rate) from the currency example, and BHD (3) as Markdown.

Each page must render without a console error; the lines shown must add up to the total
shown; the conversion part must give the client's ledger amount, the policy and one rate per
day, and redoing the conversion from what the page shows (each day's ledger amount times that
day's rate, as an exact fraction) must give the total shown, rounded."""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "examples" / "currency" / "rules.yaml"
DECIMALS = {"EUR": 2, "GBP": 2, "JPY": 0, "BHD": 3}
runner = CliRunner()


def render(folder: Path, currency: str, fmt: str) -> Path:
    done = runner.invoke(app, ["report", "--config", str(RULES), "--currency", currency,
                               "--format", fmt, "--out", str(folder / currency)])  # fmt: skip
    assert done.exit_code == 0, done.output
    return folder / currency


def number(text: str) -> Decimal:
    return Decimal(text.replace(",", "").strip())


def rate(text: str) -> Fraction:
    top, _, bottom = text.replace(" ", "").partition("÷")
    return Fraction(Decimal(top)) / (Fraction(Decimal(bottom)) if bottom else 1)


@pytest.mark.parametrize("currency", ["EUR", "GBP", "JPY"])
def test_a_converted_sheet_in_chromium_adds_up_and_can_be_redone(browser, tmp_path, currency):
    pack = render(tmp_path, currency, "html")
    page = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((pack / "clients" / "acme.html").as_uri())
    total_text = page.inner_text("#total")
    assert total_text.endswith(f" {currency}")
    total = number(total_text.removesuffix(currency))
    assert -total.as_tuple().exponent == DECIMALS[currency]  # its ISO 4217 decimals
    amounts = page.eval_on_selector_all(
        "#lines-table tbody tr", "rows => rows.map(r => r.lastElementChild.innerText)"
    )
    assert sum(number(a) for a in amounts) == total
    assert number(page.inner_text("#lines-table tfoot td")) == total
    assert page.inner_text("#fx-ledger") == "150.00 USD"
    rows = page.eval_on_selector_all(
        "#fx-table tbody tr", "rows => rows.map(r => Array.from(r.children).map(c => c.innerText))"
    )
    assert [r[0] for r in rows] == ["2026-11-06", "2026-11-07", "2026-11-09"]
    assert sum(number(r[3]) for r in rows) == Decimal("150.00")
    exact = sum(Fraction(number(r[3])) * rate(r[1]) for r in rows)
    step = Fraction(1, 10 ** DECIMALS[currency])
    assert abs(Fraction(total) - exact) <= step / 2
    assert "daily" in page.inner_text("#fx-note")
    shot = tmp_path / f"sheet-{currency}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 1000
    assert errors == []


def test_bhd_shows_three_decimals_and_the_summary_names_the_conversion(tmp_path):
    pack = render(tmp_path, "BHD", "md")
    sheet = (pack / "clients" / "acme.md").read_text()
    assert "| Currency | BHD, shown to 3 decimals |" in sheet
    total = re.search(r"\| \*\*Total\*\* \| \*\*([\d,.]+) BHD\*\* \|", sheet)
    assert total is not None and len(total.group(1).split(".")[1]) == 3
    summary = (pack / "finance-summary.md").read_text()
    assert "converted from the ledger currency USD (reference total 300.00 USD)" in summary
    assert "policy daily" in summary
