"""The web app in a real browser: Debian's headless Chromium driven by Playwright against a
real uvicorn on an ephemeral 127.0.0.1 port, on a SQLite store of the bundled example.

* An account manager logs in (with the keyboard), searches, opens the client page and the
  sheet, downloads the PDF, and gets the 404 page for another client's URL, the same page
  as for a client that does not exist.
* Finance closes the month and sees revision 1; reopens it with a reason; the usage is
  corrected through the API; closing again shows revision 2 with its reason, and the
  client's page says the month was restated, by how much and why.

Every page is checked for one ``h1``, ``lang="en"``, no console error, and no sideways
scrolling at phone width (390 px). Chromium comes from Debian (``scripts/test.sh`` installs
it), never from ``playwright install``; a missing browser fails the test, it is not skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .service_web_server import MONTH, Served, served_example

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1100, "height": 900}


@pytest.fixture
def closed_store(tmp_path: Path) -> Iterator[Served]:
    with served_example(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "data",
                        close=True) as service:  # fmt: skip
        yield service


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Served]:
    with served_example(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "data",
                        close=False) as service:  # fmt: skip
        yield service


def watch(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    return errors


def check_page(page) -> None:
    """One h1, the language, and nothing wider than the screen."""
    assert page.locator("h1").count() == 1
    assert page.evaluate("document.documentElement.lang") == "en"
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], f"{page.url}: {width} px wide"


def log_in_with_keyboard(page, url: str, token: str) -> None:
    page.goto(url + "/")
    assert page.url.startswith(url + "/login")
    check_page(page)
    assert page.evaluate("document.activeElement.id") == "token"  # focused on arrival
    page.keyboard.type(token)
    page.keyboard.press("Enter")
    page.wait_for_url(lambda u: "/login" not in u)  # the role's landing (GET / answers 303)
    page.goto(url + "/clients")


def test_account_manager_searches_opens_a_sheet_downloads_the_pdf_and_meets_404(
    browser, closed_store: Served, tmp_path: Path
):
    url = closed_store.url
    context = browser.new_context(viewport=PHONE, accept_downloads=True)
    page = context.new_page()
    errors = watch(page)
    log_in_with_keyboard(page, url, closed_store.tokens["manager"])
    check_page(page)
    page.get_by_label("Search clients").fill("client")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/clients?q=client*")
    rows = page.locator("#clients-table tbody tr")
    assert rows.count() == 1 and "client-a" in rows.first.inner_text()
    assert "client-b" not in page.content()
    page.get_by_role("link", name="client-a").click()
    page.wait_for_url(url + f"/clients/client-a?month={MONTH}")
    check_page(page)
    assert page.locator("#amount").inner_text() == "0.1234 USD"  # one rounding: every page reads it
    assert page.locator("#status").inner_text().lower() == "issued"
    assert page.locator("#history-table tbody tr").count() == 1
    assert page.locator("svg[aria-labelledby^='history-chart']").count() == 1

    frame = page.frame_locator("iframe.sheet")  # the sheet itself, embedded
    assert frame.locator("h1").inner_text() == "Cost sheet: client-a"
    assert frame.locator("#total").inner_text() == "0.1234 USD"  # the page's figure
    with page.expect_download() as download_info:
        page.locator("#pdf-link").click()
    pdf = tmp_path / download_info.value.suggested_filename
    download_info.value.save_as(pdf)
    assert pdf.suffix == ".pdf" and pdf.read_bytes().startswith(b"%PDF-")
    assert pdf.stat().st_size > 5000

    page.locator("#sheet-link").click()
    page.wait_for_url(f"**/api/v1/clients/client-a/months/{MONTH}/sheet.html")
    assert page.locator("h1").inner_text() == "Cost sheet: client-a"

    assert errors == [], errors  # below, the 404 and 403 answers log "Failed to load resource"
    other = page.goto(url + "/clients/client-b")
    assert other is not None and other.status == 404
    check_page(page)
    assert page.locator("h1").inner_text() == "Page not found"
    body_other = page.locator("main").inner_html()
    missing = page.goto(url + "/clients/no-such-client")
    assert missing is not None and missing.status == 404
    assert page.locator("main").inner_html() == body_other
    forbidden = page.goto(url + f"/months/{MONTH}")
    assert forbidden is not None and forbidden.status == 403
    assert page.locator("h1").inner_text() == "Not allowed"

    page.goto(url + "/clients")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/login?logged_out=1")
    page.goto(url + "/clients/client-a")
    assert "/login" in page.url
    assert all(re.search(r"status of 40[34] ", e) for e in errors) and len(errors) == 3, errors
    context.close()


def correct_usage(served: Served) -> None:
    """client-b's API requests were under-counted: the application posts the hour again."""
    rows = [
        ("api", "client-a", 66348, 604.7),
        ("api", "client-b", 17100, 75.9),
        ("api", "client-c", 342, 3.4),
        ("import-worker", "client-a", 115, 22.9),
        ("import-worker", "client-b", 160, 480.0),
        ("import-worker", "client-c", 12, 6.1),
    ]
    records = [{"window_start": "2026-11-03T10:00:00Z", "window_end": "2026-11-03T11:00:00Z",
                "service": s, "client": c, "requests": r, "cpu_seconds": cpu}
               for s, c, r, cpu in rows]  # fmt: skip
    answer = httpx.post(f"{served.url}/api/v1/usage", json={"mode": "replace", "records": records},
                        headers={"Authorization": f"Bearer {served.tokens['ingest']}"},
                        timeout=60)  # fmt: skip
    assert answer.status_code == 200, answer.text


def test_finance_closes_reopens_with_a_reason_and_closes_again(browser, open_store: Served):
    url = open_store.url
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    errors = watch(page)
    log_in_with_keyboard(page, url, open_store.tokens["finance"])
    page.get_by_role("link", name="Months").click()
    page.get_by_role("link", name=MONTH).click()
    page.wait_for_url(url + f"/months/{MONTH}")
    check_page(page)
    assert page.locator("#state").inner_text().lower() == "open"
    assert page.locator("#cascade-table").count() == 1  # the draft run's cascade
    page.get_by_text("Close…").click()  # the form behind its button
    box = page.get_by_label("Close even though hours lack costs or usage")
    assert not box.is_checked()  # incomplete, yet never pre-ticked: one click issues nothing
    box.check()
    page.get_by_role("button", name=f"Close {MONTH}").click()
    # the confirmation step: the missing hours, nothing issued yet
    confirm = page.locator("#confirm-close")
    assert "719 of 720 hours lack costs" in confirm.inner_text()
    # costs and usage, each lacking the spans before and after the example's one hour
    assert page.locator("#missing-table tbody tr").count() == 4
    assert page.locator("#state").inner_text().lower() == "open"
    check_page(page)
    page.get_by_role("button", name=f"Close {MONTH} incomplete").click()
    page.wait_for_url("**?done=closed-1")
    assert page.locator("#message").inner_text() == "Closed: revision 1 issued."
    assert page.locator("#revision").inner_text() == "1"
    assert page.locator("#state").inner_text().lower() == "closed"

    page.get_by_text("Reopen…").click()
    page.get_by_label("Reason (finance and admin only)").fill(
        "client-b's API requests were under-counted"
    )
    page.get_by_label("Reason for clients").fill("API requests were corrected")
    page.get_by_role("button", name=f"Reopen {MONTH}").click()
    page.wait_for_url("**?done=reopened")
    assert page.locator("#state").inner_text().lower() == "open"
    correct_usage(open_store)
    page.reload()
    page.get_by_text("Close…").click()
    page.get_by_label("Close even though hours lack costs or usage").check()
    page.get_by_role("button", name=f"Close {MONTH}").click()
    page.get_by_role("button", name=f"Close {MONTH} incomplete").click()
    page.wait_for_url("**?done=closed-2")
    assert page.locator("#message").inner_text() == "Closed: revision 2 issued."
    assert page.locator("#revision").inner_text() == "2"
    events = page.locator("#events-table tbody tr")
    assert events.count() == 3
    assert "under-counted" in events.nth(1).inner_text()

    page.goto(url + "/clients/client-b")
    check_page(page)
    assert page.locator("#status").inner_text().lower() == "restated"
    assert page.locator("#revision").inner_text() == "2"
    assert page.locator("#reason").inner_text() == "client-b's API requests were under-counted"
    assert page.locator("#clients-read").inner_text() == "API requests were corrected"
    notice = page.locator(".notice", has_text="Restated: revision 2").inner_text()
    assert "replaces revision 1" in notice and "under-counted" in notice
    assert errors == [], errors
    context.close()
