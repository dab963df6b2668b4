"""Figures: one rounding, client-facing provenance, captions kept with their tables.

The bundled example's figures at four decimals are the case for it: client-a is 0.123458
exactly, alone it rounds to 0.1235, yet the three clients (0.123458 + 0.077173 + 0.001569 =
0.202200) must add up to the clients line 0.2022, so the hierarchy shows 0.1234 + 0.0772 +
0.0016. Every page, sheet, index and summary must read that same figure: from files (the
report pack), and from the store through the real service (uvicorn) on SQLite and PostgreSQL.
A revision's displayed figures are frozen: the run it issued is never rewritten, and a
restatement quotes what the clients were sent. The PDF is WeasyPrint's, read page by page with
poppler's ``pdftotext``.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pandas as pd
import pytest
from bs4 import BeautifulSoup
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.money import round_for_display
from tenantcost.report.rounding import client_column, key_columns, largest_remainder

from .service_web_server import Served, served_example
from .test_report import need_pdftotext
from .test_service_pages import logged_in

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
MONTH = "2026-11"
CLIENTS = ["client-a", "client-b", "client-c"]
SHOWN = {"client-a": "0.1234", "client-b": "0.0772", "client-c": "0.0016"}
"""The issue's case: rounded alone client-a reads 0.1235 and the three add to 0.2023."""
runner = CliRunner()


def units(text: str) -> int:
    """A figure shown with four decimals (``0.1234``, ``+0.0029``, ``0.1234 †``) in units."""
    return int(Decimal(text.strip().rstrip(" †").replace(",", "")) * 10_000)


def soup(text: str) -> BeautifulSoup:
    return BeautifulSoup(text, "html.parser")


def pdf_pages(pdf: bytes, folder: Path) -> list[str]:
    path = folder / "sheet.pdf"
    path.write_bytes(pdf)
    out = subprocess.run([need_pdftotext(), "-layout", str(path), "-"], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    return out.split("\f")


def assert_captions_with_tables(pages: list[str]) -> None:
    """The key table's caption is on the page of its first row (issue: caption alone at the
    bottom of page 2, its table on page 3)."""
    caption = [i for i, p in enumerate(pages) if "Your amount under each key, USD\n" in p
               or re.search(r"Your amount under each key, USD\s*$", p, re.M)]  # fmt: skip
    rows = [i for i, p in enumerate(pages) if "the rule as written" in p]
    assert caption and rows, (caption, rows)
    assert caption[0] == rows[0], f"caption on page {caption[0] + 1}, table on {rows[0] + 1}"


def provenance_files(page: BeautifulSoup) -> list[str]:
    return [row.find_all("td")[0].get_text() for row in page.select("#provenance tbody tr")]


# --- the rounding itself -------------------------------------------------------------------

amount_lists = st.lists(st.integers(min_value=-(10**9), max_value=10**9), min_size=1,
                        max_size=30)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(amount_lists, st.integers(min_value=0, max_value=6))
def test_largest_remainder_adds_up_and_matches_the_money_module(amounts, places):
    shown = largest_remainder(amounts, places)
    assert shown.tolist() == round_for_display(amounts, places)
    unit = 10 ** (6 - places)
    assert all(abs(s * unit - a) < unit for s, a in zip(shown.tolist(), amounts, strict=True))


@settings(max_examples=100, deadline=None)
@given(amount_lists, st.integers(min_value=0, max_value=6), st.randoms())
def test_a_client_column_does_not_depend_on_the_order_clients_come_in(amounts, places, rnd):
    column = pd.Series(amounts, index=[f"c{i:03d}" for i in range(len(amounts))])
    shuffled = column.sample(frac=1, random_state=rnd.randint(0, 2**31))
    assert client_column(column, places).to_dict() == client_column(shuffled, places).to_dict()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**7), min_size=2, max_size=12),
       st.integers(min_value=2, max_value=5), st.data())  # fmt: skip
def test_every_key_column_totals_the_clients_line(rule, places, data):
    """Alternative keys split the same money: each column adds up to the same displayed
    total, the clients line (whatever the cascade rounding made of it)."""
    other = list(rule)
    i, j = data.draw(st.integers(0, len(rule) - 1)), data.draw(st.integers(0, len(rule) - 1))
    moved = data.draw(st.integers(0, other[i]))
    other[i] -= moved
    other[j] += moved
    frame = pd.DataFrame({"rule": rule, "other": other}, index=[f"c{k}" for k in range(len(rule))])
    exact = sum(rule) / 10 ** (6 - places)
    line = data.draw(st.sampled_from(sorted({int(exact), int(exact) + (exact != int(exact))})))
    shown = key_columns(frame, places, line)
    assert shown["rule"].sum() == line and shown["other"].sum() == line


def test_the_issue_case_reproduced_then_fixed():
    exact = pd.Series({"client-a": 123458, "client-b": 77173, "client-c": 1569})
    alone = [round_for_display([int(a)], 4)[0] for a in exact]
    assert alone == [1235, 772, 16] and sum(alone) == 2023  # the bug: 0.2023 vs 0.2022
    shown = client_column(exact, 4, total=2022)
    assert shown.to_dict() == {"client-a": 1234, "client-b": 772, "client-c": 16}


# --- from files: the report pack ------------------------------------------------------------


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("figures-pack")
    done = runner.invoke(app, ["report", "--config", str(EXAMPLE / "rules.yaml"), "--month",
                               MONTH, "--format", "html,md,pdf", "--view", "internal",
                               "--out", str(out)])  # fmt: skip
    assert done.exit_code == 0, done.output
    return out


def test_a_client_reads_the_same_on_its_sheet_the_index_and_the_summary(pack: Path):
    index = soup((pack / "index.html").read_text())
    summary = soup((pack / "finance-summary.html").read_text())
    summary_rows = {
        r.find("th").get_text(strip=True): [td.get_text(strip=True) for td in r.find_all("td")]
        for r in summary.select("#clients-table tbody tr")
    }
    for client, figure in SHOWN.items():
        row = next(r for r in index.select("tbody tr") if r.find("th").get_text() == client)
        assert row.find("td").get_text() == figure
        assert summary_rows[client][0].rstrip(" †") == figure
        sheet = soup((pack / "clients" / f"{client}.html").read_text())
        assert sheet.find(id="total").get_text(strip=True) == f"{figure} USD"
        lines = sheet.select("#lines-table tbody tr")
        assert sum(units(r.find_all("td")[-1].get_text()) for r in lines) == units(figure)
        keys = [r.find("td").get_text() for r in sheet.select("#keys-table tbody tr")]
        assert keys[0] == figure
        for shown, summary_cell in zip(keys[1:3], summary_rows[client][1:3], strict=True):
            assert shown == summary_cell.rstrip(" †")  # requests, CPU seconds: same column
        md = (pack / "clients" / f"{client}.md").read_text()
        assert f"| **Total** | **{figure} USD** |" in md
    for col in range(4):  # every column adds up to the displayed total, 0.2022 for all
        shown = [units(cells[col]) for cells in summary_rows.values()]
        assert sum(shown) == 2022


def test_file_sheets_name_inputs_without_directories(pack: Path):
    sheet = soup((pack / "clients" / "client-a.html").read_text())
    assert provenance_files(sheet) == ["rules.yaml", "costs.json", "usage.csv"]
    md = (pack / "clients" / "client-a.md").read_text()
    assert "| rules | `rules.yaml` |" in md and "saas-three-clients/" not in md.split("```")[0]


def test_the_pdf_keeps_the_caption_with_its_table(pack: Path, tmp_path: Path):
    pages = pdf_pages((pack / "clients" / "client-a.pdf").read_bytes(), tmp_path)
    assert len(pages) >= 3  # the case to guard: section 4 crosses a page
    assert_captions_with_tables(pages)
    css = (ROOT / "tenantcost" / "templates" / "report.css").read_text()
    assert 'td code[title^="sha256"] { white-space: nowrap;' in css  # no wrap mid-hash


# --- from the store, through the real service -----------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[Served]:
    """The example run but not closed, served (a fresh store per test and backend)."""
    folder = tmp_path_factory.mktemp(f"figures-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{folder / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    with served_example(db, folder / "data", close=False) as service:
        yield service


def bearer(served: Served, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {served.tokens[who]}"}


def keys_table(text: str) -> tuple[dict[str, list[str]], list[str]]:
    page = soup(text)
    table = page.find("h2", id="clients-h").find_next("table")
    rows = {
        r.find("th").get_text(strip=True): [td.get_text(strip=True) for td in r.find_all("td")]
        for r in table.select("tbody tr")
    }
    totals = [td.get_text(strip=True) for td in table.select("tfoot td")]
    return rows, totals


def test_the_service_shows_one_figure_everywhere_and_labels_a_reopened_run(
    served: Served, tmp_path: Path
):
    api = f"{served.url}/api/v1"
    closed = httpx.post(f"{api}/months/{MONTH}/close", headers=bearer(served, "finance"),
                        json={"allow_incomplete": True}, timeout=120)  # fmt: skip
    assert closed.status_code == 200, closed.text

    finance = logged_in(served, "finance")
    month = finance.get(f"/months/{MONTH}")
    rows, totals = keys_table(month.text)
    assert [rows[c][0] for c in CLIENTS] == [SHOWN[c] for c in CLIENTS]
    for col, total in enumerate(totals):  # 0.1234 + 0.0772 + 0.0016 = 0.2022, every key
        assert sum(units(rows[c][col]) for c in CLIENTS) == units(total) == 2022, col

    manager = logged_in(served, "manager")
    page = manager.get(f"/clients/client-a?month={MONTH}")
    assert 'id="amount">0.1234 USD<' in page.text
    assert "by token:test-finance</dd>" in page.text  # the actor as the close recorded it
    base = f"/api/v1/clients/client-a/months/{MONTH}/sheet"
    sheet = soup(manager.get(f"{base}.html").text)
    assert sheet.find(id="total").get_text(strip=True) == "0.1234 USD"
    assert not any(n in str(sheet) for n in ("rules.yaml", "usage.csv", "costs.json"))
    # the client's view names no input file; finance's internal view names them, no folders
    internal = finance.get(f"{base}.html", params={"view": "internal"})
    files = provenance_files(soup(internal.text))
    assert len(files) == 3 and not any("/" in f or "\\" in f for f in files), files
    assert files[0].startswith("stored rule file ") and files[0].endswith("rules.yaml)")
    assert sorted(files[1:]) == ["batch 1: usage.csv", "batch 2: costs.json"], files
    md = manager.get(f"{base}.md").text
    assert "| **Total** | **0.1234 USD** |" in md
    for text in (str(sheet), md):
        assert "demo_data" not in text and served.data not in text  # no server directories
    pdf = finance.get(f"{base}.pdf", params={"view": "internal"}, timeout=120)  # keys table
    assert pdf.status_code == 200
    assert_captions_with_tables(pdf_pages(pdf.content, tmp_path))

    reopened = httpx.post(f"{api}/months/{MONTH}/reopen", headers=bearer(served, "finance"),
                          json={"reason": "a check"}, timeout=60)  # fmt: skip
    assert reopened.status_code == 200, reopened.text
    month = finance.get(f"/months/{MONTH}").text
    run = soup(month).find(id="run-id").parent.get_text(" ", strip=True)
    assert "(issued as revision 1)" in run and "draft" not in run, run
    assert keys_table(month)[0]["client-a"][0] == "0.1234"  # still revision 1's figure


# --- frozen at close; a restatement quotes what was sent -----------------------------------


def test_a_revision_keeps_its_figures_and_a_restatement_quotes_them(store_url: str, tmp_path: Path):
    from tenantcost.store.cycle import latest_issued
    from tenantcost.store.engine import open_engine
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.shown import compute_shown

    from .test_store_report import close_correct_close, fill_store, ok, store_args

    fill_store(store_url, tmp_path, EXAMPLE / "rules.yaml", [EXAMPLE / "costs.json"],
               EXAMPLE / "usage.csv")  # fmt: skip
    db = store_args(store_url, tmp_path)
    ok("close", "--month", MONTH, "--allow-incomplete", *db)
    engine = open_engine(resolve_settings(db=store_url, environ={}))
    try:
        first = latest_issued(engine, MONTH)
        assert first is not None
        with engine.connect() as connection:
            before = compute_shown(connection, first.run_id)
        close_correct_close(store_url, tmp_path)  # reopen, corrected usage, revision 2
        with engine.connect() as connection:
            after = compute_shown(connection, first.run_id)
    finally:
        engine.dispose()
    assert before.clients.equals(after.clients) and before.cascade == after.cascade
    assert before.clients["rule"].to_dict() == {"client-a": 1234, "client-b": 772, "client-c": 16}
    ok("report", "--month", MONTH, "--from-db", "--format", "md", *db, "--out", tmp_path / "p")
    summary = (tmp_path / "p" / "finance-summary.md").read_text()
    restated = dict(
        (m[0], m[1:]) for m in re.findall(r"^> \| (client-\w) \| ([-+0-9.]+) \| ([-+0-9.]+) \| "
                                          r"([-+0-9.]+) \|$", summary, re.M)
    )  # fmt: skip
    assert restated["client-a"][0] == "0.1234"  # what revision 1 sent, not 0.1235
    for client, (was, now, difference) in restated.items():
        assert units(now) - units(was) == units(difference), client
        sheet = (tmp_path / "p" / "clients" / f"{client}.md").read_text()
        assert f"| **Total** | **{now} USD** |" in sheet
    assert list(itertools.chain(restated)) == CLIENTS
