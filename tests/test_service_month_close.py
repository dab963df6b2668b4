"""The month-close dashboard (issue 36 §2) against a real uvicorn on 127.0.0.1, on the
bundled example (SQLite): finance's first screen (the months strip, the reference total and
the gap, coverage, what blocks a close, the waterfall beside them, the forms behind a
``<details>`` button), above the fold at 1366 x 768 in real Chromium; and, on a reopened
month run again after a correction, the preview of what the close would restate, client by
client, old -> new, before anything is issued."""

from __future__ import annotations

import re
from pathlib import Path

from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings

from .service_web_server import MONTH, Served, served_example
from .test_service_browser import check_page, correct_usage, log_in_with_keyboard, watch
from .test_service_pages import CSRF, logged_in

LAPTOP = {"width": 1366, "height": 768}


def first_screen_has_the_strip_totals_coverage_and_blockers(closed: Served) -> None:
    finance = logged_in(closed, "finance")
    text = finance.get(f"/months/{MONTH}").text
    strip = re.search(r'<nav class="month-strip".*?</nav>', text, re.S)
    assert strip is not None
    assert f'<a href="/months/{MONTH}" aria-current="page">{MONTH}</a>' in strip.group(0)
    assert 'closed</span> <span class="muted">rev. 1</span>' in strip.group(0)
    # the cascade's own foot: reference total 0.6434 USD, gap 0.0000 (the example's figures)
    assert 'id="reference-total">0.6434<' in text
    assert 'id="gap">0.0000<' in text and 'id="gap-state">closes<' in text
    assert re.search(r'id="coverage">costs 1 of 720 h <span class="bad">incomplete</span> · '
                     r'usage 1 of 720 h <span class="bad">incomplete</span> · billing no '
                     r"billing data", text)  # fmt: skip
    assert "Closed: revision 1 is issued; reopen the month to change it." in text
    # the reopen form behind its button, one waterfall on the page, the invoice slot empty
    assert re.search(r'<details class="cycle-form">\s*<summary class="button danger">Reopen…',
                     text)  # fmt: skip
    assert text.count('aria-labelledby="cascade-chart-t cascade-chart-d"') == 1
    assert 'id="invoice-total"' not in text  # the example has no billing data
    product = logged_in(closed, "product").get(f"/months/{MONTH}").text
    assert 'id="month-strip"' not in product and 'id="blockers"' not in product
    assert 'aria-labelledby="cascade-chart-t cascade-chart-d"' in product


def reference_total_gap_and_waterfall_are_above_the_fold(browser, closed: Served) -> None:
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    errors = watch(page)
    log_in_with_keyboard(page, closed.url, closed.tokens["finance"])
    page.goto(f"{closed.url}/months/{MONTH}")
    check_page(page)
    for selector in ("#reference-total", "#gap", "#coverage", "#blockers",
                     "svg[aria-labelledby^='cascade-chart']", "#month-strip"):  # fmt: skip
        box = page.locator(selector).bounding_box()
        assert box is not None, selector
        assert box["y"] + box["height"] <= LAPTOP["height"], (selector, box)
    assert not page.locator("#reopen-form").is_visible()  # behind its button
    page.get_by_text("Reopen…").click()
    assert page.locator("#reopen-form").is_visible()
    assert errors == [], errors
    context.close()


def reopened_and_run_again(served: Served) -> str:
    """Reopen, correct client-b's usage, run the month: the page a close would follow."""
    from tenantcost.store.runs import run_month

    finance = logged_in(served, "finance")
    csrf = CSRF.search(finance.get(f"/months/{MONTH}").text).group(1)  # type: ignore[union-attr]
    reopened = finance.post(
        f"/months/{MONTH}/reopen", data={"csrf_token": csrf, "reason": "client-b under-counted"}
    )
    assert reopened.status_code == 303
    before = finance.get(f"/months/{MONTH}").text
    assert 'id="close-preview"' not in before  # no run since the reopen: nothing to show
    correct_usage(served)
    settings = resolve_settings(db=served.db, data=served.data, environ={})
    store = Store(open_engine(settings), DataDir(served.data))
    try:
        run_month(store, MONTH, key=None, actor="tests")  # what a close would issue
    finally:
        store.engine.dispose()
    return finance.get(f"/months/{MONTH}").text


def test_finance_month_close_dashboard(browser, tmp_path: Path):
    """One store for the three steps (building it is most of the time): the closed month's
    first screen over HTTP, then in Chromium at 1366 x 768, then reopened and run again."""
    with served_example(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "data",
                        close=True) as served:  # fmt: skip
        first_screen_has_the_strip_totals_coverage_and_blockers(served)
        reference_total_gap_and_waterfall_are_above_the_fold(browser, served)
        text = reopened_and_run_again(served)
    assert "(reopened)" in text and 'id="close-preview"' in text
    table = text.split('id="preview-table"')[1].split("</table>")[0]
    rows = re.findall(r'<tr><th scope="row"><a href="/clients/([^"?]+)\?month=2026-11">.*?'
                      r'<td class="num">([^<]+)</td><td class="num">([^<]+)</td>'
                      r'<td class="num (rise|fall)">([^<]+) ', table)  # fmt: skip
    assert rows, text
    clients = [r[0] for r in rows]
    assert "client-b" in clients and len(set(clients)) == len(clients)
    for _, old, new, way, change in rows:  # old + change = new, exactly as shown
        assert change.startswith("+" if way == "rise" else "-")
        sign = 1 if way == "rise" else -1
        assert round(float(old) + sign * float(change[1:]), 6) == round(float(new), 6)
    assert re.search(r'id="preview-summary">\d+ clients? would change<', text)
