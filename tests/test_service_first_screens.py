"""Each reader's first screen on the demo company, in real Chromium, at a laptop's and a phone's
viewport: the issue's claims about what one sees without scrolling.

``GET /`` sends each role to its answer (``tenantcost/service/landing.py``): finance and admin
to the latest month's close dashboard, whose reference total, gap and waterfall must show above
the fold at 1366x768; product to pricing; an account manager with one client to that client's
page, one with several to the client list. :mod:`tests.test_service_phone` runs axe and the
key-column check on every page; here, the embedded sheet (a document of its own, which that
test leaves out) gets axe at both widths, and the client page's link to the sheet's internal
view is checked for who gets it.
"""

from __future__ import annotations

import importlib.util
import re

import httpx
import pytest

from .test_service_phone import (
    ADMIN,
    AXE_RUN,
    FINANCE,
    MANAGER,
    MANAGER_ONE,
    PRODUCT,
    SEVERE,
    Demo,
    _axe_context,
    demo,  # noqa: F401  (the module's fixture: the demo company served)
)

SCREENS = ((1366, 768), (390, 844))
HAS_LANDING = importlib.util.find_spec("tenantcost.service.landing") is not None
FOLD = """(ids) => ids.map(id => { const e = document.getElementById(id);
  if (!e) return `${id}: missing`;
  const r = e.getBoundingClientRect();
  return r.height > 0 && r.bottom <= innerHeight && r.right <= innerWidth ? '' :
    `${id}: ${Math.round(r.top)}..${Math.round(r.bottom)} px (screen ${innerHeight})`; })
  .filter(Boolean)"""
"""The ids among ``ids`` that are missing or not wholly on the first screen."""
ABOVE_FOLD = {
    ADMIN: ["reference-total", "gap", "month-waterfall"],
    FINANCE: ["reference-total", "gap", "month-waterfall"],
}


def _login(page, url: str, token: str) -> None:
    page.goto(url + "/login")
    page.fill("#token", token)
    with page.expect_navigation():
        page.keyboard.press("Enter")


@pytest.mark.skipif(not HAS_LANDING, reason="GET / per role (service/landing.py) not merged")
def test_each_role_lands_on_its_answer_with_it_on_the_first_screen(browser, demo: Demo):  # noqa: F811
    one = httpx.get(demo.url + "/api/v1/clients", timeout=60,
                    headers={"Authorization": f"Bearer {demo.tokens[MANAGER_ONE]}"})  # fmt: skip
    assert one.status_code == 200 and one.json()["total"] == 1, one.text
    expected = {
        ADMIN: r"/months/\d{4}-\d{2}",
        FINANCE: r"/months/\d{4}-\d{2}",
        PRODUCT: r"/pricing",
        MANAGER: r"/clients",
        MANAGER_ONE: re.escape(f"/clients/{one.json()['items'][0]['id']}"),
    }
    finance = {"Authorization": f"Bearer {demo.tokens[FINANCE]}"}
    months = httpx.get(demo.url + "/api/v1/months", headers=finance, timeout=60).json()
    problems: list[str] = []
    for width, height in SCREENS:
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        for role, path in expected.items():
            context.clear_cookies()
            _login(page, demo.url, demo.tokens[role])
            response = page.goto(demo.url + "/")
            assert response is not None and response.status == 200, role
            landed = page.url.removeprefix(demo.url)
            if not re.fullmatch(path, landed):
                problems.append(f"{role} at {width} px: / lands on {landed}, not {path}")
                continue
            if role in ABOVE_FOLD and width == SCREENS[0][0]:
                latest = max(m["month"] for m in months)
                assert landed == f"/months/{latest}", f"{role}: not the latest month: {landed}"
                for hidden in page.evaluate(FOLD, ABOVE_FOLD[role]):
                    problems.append(f"{role} at {width}x{height}: below the fold: {hidden}")
            if role == MANAGER_ONE:
                assert page.locator("h1").first.inner_text().strip(), "the client page's title"
        context.close()
    assert not problems, "\n".join(problems)


def test_the_internal_sheet_link_is_finances_and_admins_only(demo: Demo):  # noqa: F811
    latest = demo.closed[-1]
    client = demo.mine
    for role in (ADMIN, FINANCE, PRODUCT, MANAGER):
        with httpx.Client(base_url=demo.url, timeout=60) as session:
            form = session.get("/login").text
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
            assert csrf, form
            session.post("/login", data={"token": demo.tokens[role], "csrf_token": csrf.group(1)})
            page = session.get(f"/clients/{client}?month={latest}")
            assert page.status_code == 200, (role, page.status_code)
            hrefs = re.findall(r'href="([^"]*view=internal[^"]*)"', page.text)
            if role in (ADMIN, FINANCE):
                assert len(hrefs) == 3, (role, hrefs)
                for href in hrefs:
                    opened = session.get(href.replace("&amp;", "&"))
                    assert opened.status_code == 200, (role, href, opened.status_code)
                assert "Internal" in session.get(hrefs[0]).text
            else:
                assert hrefs == [] and "internal-sheet" not in page.text, role


def test_the_embedded_sheet_passes_axe_at_both_widths(browser, demo: Demo):  # noqa: F811
    """The sheet the client page embeds (client view for the manager, internal for finance) is
    its own document: axe-core on it at 1366 and 390 px, no serious or critical violation
    (its tables scroll in focusable, named boxes)."""
    latest, client = demo.closed[-1], demo.mine
    base = f"/api/v1/clients/{client}/months/{latest}/sheet.html"
    problems: list[str] = []
    for width, _ in SCREENS:
        context = _axe_context(browser, width)
        page = context.new_page()
        for role, path in ((MANAGER, base), (FINANCE, base + "?view=internal")):
            context.clear_cookies()
            _login(page, demo.url, demo.tokens[role])
            response = page.goto(demo.url + path)
            assert response is not None and response.status == 200, (role, path)
            problems += [
                f"{role} {width} px {path}: {v['impact']} {v['id']} ({v['help']}) {v['nodes']}"
                for v in page.evaluate(AXE_RUN)
                if v["impact"] in SEVERE
            ]
        context.close()
    assert not problems, "\n".join(problems)
