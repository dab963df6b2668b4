"""Every page at desktop and phone width, in a real browser, for each person who reads them.

The demo company (:func:`tenantcost.service.demo.build_demo`, what ``serve --demo`` serves,
built once per run by :mod:`tests.demo_company_store`) is served by ``tenantcost serve`` on a
free 127.0.0.1 port, and Debian's headless
Chromium (one browser for the module, one page per role, reused across widths) logs in with
each printed token and opens every page of :data:`PAGES` at 1280 and 390 px. Each must:

* not scroll sideways: ``document.documentElement.scrollWidth <= innerWidth``, in the page
  and in every frame it embeds (the client page's sheet); tables may scroll inside their own
  box, the page may not;
* draw its charts with text of at least 11 CSS px (the font size times the SVG's scale on
  screen, :data:`SVG_TEXT_PX`), and draw at least the charts the table expects, so the check
  cannot pass on a page whose charts vanished.

The sheets written from files (``report`` and ``unit-economics`` on the bundled example) are
checked the same way from ``file://``. ``/docs`` is opened with every request off 127.0.0.1
aborted and recorded: Swagger UI must render from the service's own files, with none.

Every role walks the pages :func:`pages` lists for it, with the status it must get (the
product role opens pricing, client and month pages; the month pages without finance's
workings). A page added to the service is one line of :func:`pages`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.service.demo import Demo as BuiltDemo

from .demo_company_store import shared_demo
from .service_web_server import running_service

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (1280, 390)
MIN_CHART_TEXT_PX = 11.0
ADMIN, FINANCE, PRODUCT, MANAGER = "admin", "finance", "product", "account-manager"
MANAGER_ONE = "account-manager-one"
EVERYONE = frozenset({ADMIN, FINANCE, PRODUCT, MANAGER})
EVERY_TOKEN = EVERYONE | {MANAGER_ONE}
CLUSTER = frozenset({ADMIN, FINANCE, PRODUCT})


@dataclass(frozen=True)
class Page:
    """One page: its path, who opens it (with the status they get) and its least charts."""

    path: str
    roles: frozenset[str]
    charts: int = 0
    status: int = 200


def pages(demo: Demo) -> list[Page]:
    """Every service page, by role (``/docs``, the same for everyone, has its own test), on
    the demo company: ``mine`` is a client of the several-client manager, ``other`` one of
    another manager's, ``latest`` and ``before`` the last two closed months."""
    mine, other, latest, before = demo.mine, demo.other, demo.closed[-1], demo.closed[-2]
    return [
        Page("/clients", EVERYONE),
        Page(f"/clients/{mine}", EVERYONE, charts=1),  # the open month: no sheet for some
        Page(f"/clients/{mine}?month={latest}", EVERYONE, charts=3),  # history + sheet's two
        Page(f"/clients/{mine}?month={before}", EVERYONE, charts=3),
        Page(f"/clients/{other}?month={latest}", CLUSTER, charts=3),
        Page(f"/api/v1/clients/{mine}/months/{latest}/sheet.html", EVERYONE, charts=1),
        Page("/months", CLUSTER),  # product: the issued months, without finance's workings
        Page(f"/months/{latest}", CLUSTER, charts=1),  # the cascade's waterfall
        Page(f"/months/{before}", CLUSTER, charts=1),
        Page(f"/pricing?month={latest}&by=plan", CLUSTER, charts=2),
        Page(f"/pricing?month={before}&by=segment", CLUSTER, charts=2),
        Page("/clients/no-such-client", EVERYONE, status=404),
        Page(f"/clients/{other}", frozenset({MANAGER}), status=404),  # another's: as missing
        Page(f"/months/{latest}", frozenset({MANAGER}), status=403),  # the "Not allowed" page
        Page(f"/pricing?month={latest}", frozenset({MANAGER}), status=403),
    ]


SVG_TEXT_PX = """() => [...document.querySelectorAll('svg text')]
  .filter(t => t.getClientRects().length > 0)
  .map(t => { const m = t.getScreenCTM();
              return parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b); })"""
"""The on-screen size of every visible chart text: its font size times the SVG's scale."""
MEASURE = f"""() => ({{scroll: document.documentElement.scrollWidth, inner: innerWidth,
  charts: [...document.querySelectorAll('svg.chart')].filter(s => s.getClientRects().length)
          .length, text: ({SVG_TEXT_PX})()}})"""


@dataclass(frozen=True)
class Demo:
    url: str
    tokens: dict[str, str]
    announcement: str
    closed: tuple[str, ...]
    mine: str
    other: str


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Iterator[Demo]:
    """The run's demo company served (``tenantcost serve``, as ``serve --demo`` does), with
    the announcement ``serve --demo`` prints for it."""
    built = shared_demo(tmp_path_factory)
    mine, other = _two_clients(built)
    with running_service(built.db, built.data, built.secret) as url:
        port = int(url.rsplit(":", 1)[1])
        yield Demo(url, built.tokens, built.announce("127.0.0.1", port), built.closed, mine,
                   other)  # fmt: skip


def _two_clients(built: BuiltDemo) -> tuple[str, str]:
    """A client of the several-client manager with issued figures in the last two closed
    months, and another manager's client with figures in the last one."""
    from sqlalchemy import text

    from tenantcost.store.engine import open_engine
    from tenantcost.store.settings import resolve_settings

    engine = open_engine(resolve_settings(db=built.db, data=built.data, environ={}))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT client, count(DISTINCT month) FROM statement WHERE month IN (:a, :b) "
                    "GROUP BY client ORDER BY client"
                ),
                {"a": built.closed[-1], "b": built.closed[-2]},
            )
            both = {str(client) for client, months in rows if months == 2}
    finally:
        engine.dispose()
    scope = set(built.scopes[MANAGER])
    return min(both & scope), min(both - scope)


def test_the_demo_announces_a_token_per_reader_with_what_each_may_do_and_its_months(demo: Demo):
    assert set(demo.tokens) == EVERY_TOKEN, demo.announcement
    assert f"{demo.closed[0]} to {demo.closed[-1]} closed" in demo.announcement
    may = re.findall(r"^  (\S+) token.*\n      may: (.+)$", demo.announcement, flags=re.M)
    assert [role for role, _ in may] == [ADMIN, FINANCE, PRODUCT, MANAGER, MANAGER_ONE]
    said = dict(may)
    assert "manage tokens" in said[ADMIN] and "manage tokens" not in said[FINANCE]
    assert "close" in said[FINANCE] and re.match(r"these \d+ clients' figures only", said[MANAGER])
    assert "close" not in said[MANAGER] and "close" not in said[PRODUCT]
    assert said[MANAGER_ONE].endswith("figures only: list months, search clients, open client "
                                      "pages and sheets, see a month's top movers (among the "
                                      "clients in scope)")  # fmt: skip
    admin = {"Authorization": f"Bearer {demo.tokens[ADMIN]}"}
    months = httpx.get(demo.url + "/api/v1/months", headers=admin).json()
    assert {(m["month"], m["state"]) for m in months} >= {(m, "closed") for m in demo.closed}
    tokens = httpx.get(demo.url + "/api/v1/tokens", headers=admin).json()
    assert sorted(t["role"] for t in tokens) == sorted([*EVERYONE, MANAGER])


def _measure(page, where: str) -> int:
    """Check the page and its frames at the current width; the number of charts drawn."""
    charts = 0
    for frame in page.frames:
        if frame.url in ("", "about:blank"):
            continue
        got = frame.evaluate(MEASURE)
        assert got["scroll"] <= got["inner"], f"{where} ({frame.url}): {got['scroll']} px wide"
        small = [size for size in got["text"] if size < MIN_CHART_TEXT_PX - 0.01]
        assert not small, f"{where} ({frame.url}): chart text of {min(small):.1f} px"
        charts += got["charts"]
    return charts


def _open(page, url: str, want: Page, role: str, width: int) -> bool:
    """Go to the page, check its status and wait for what it embeds."""
    response = page.goto(url)
    assert response is not None
    assert response.status == want.status, f"{role} {width} {want.path}: {response.status}"
    for frame in page.locator("iframe").all():
        frame.scroll_into_view_if_needed()
        frame.content_frame.locator("h1").wait_for()
    return True


def test_a_clients_amount_reads_the_same_on_its_sheet_bridge_page_and_api(demo: Demo):
    """A demo client's figure, rounded once by its run (docs/report.md, "Rounding"): its sheet
    total, the bridge's "this period" row and the client page read the one figure, and the
    API's bridge parts sum to its change."""
    manager = {"Authorization": f"Bearer {demo.tokens[MANAGER]}"}
    latest = demo.closed[-1]
    base = f"{demo.url}/api/v1/clients/{demo.mine}/months/{latest}"
    sheet = httpx.get(f"{base}/sheet.md", headers=manager, timeout=120).text
    total = re.search(r"^\| \*\*Total\*\* \| \*\*([0-9.,]+) USD", sheet, flags=re.M)
    now = re.search(rf"^> \| {latest} \(this period\) \| ([0-9.,]+) \|", sheet, flags=re.M)
    assert total and now, sheet
    assert now.group(1) == total.group(1)
    bridge = httpx.get(base, headers=manager, timeout=60).json()["bridge"]
    assert bridge["previous_month"] == demo.closed[-2]
    assert sum(p["amount"] for p in bridge["parts"]) == bridge["difference"]
    with httpx.Client(base_url=demo.url, timeout=60) as browser_like:
        login = browser_like.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
        form = {"token": demo.tokens[MANAGER], **({"csrf_token": csrf.group(1)} if csrf else {})}
        browser_like.post("/login", data=form)
        page = browser_like.get(f"/clients/{demo.mine}").text
    assert total.group(1) in page


@pytest.mark.parametrize("role", [ADMIN, FINANCE, PRODUCT, MANAGER])
def test_every_page_fits_both_widths_with_readable_charts(browser, demo: Demo, role: str):
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    page = context.new_page()
    for width in WIDTHS:  # the login form too
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(demo.url + "/login")
        _measure(page, f"/login at {width} px")
    page.fill("#token", demo.tokens[role])
    page.keyboard.press("Enter")
    page.wait_for_url(lambda u: "/login" not in u)  # the role's landing (GET / answers 303)
    walked = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for want in (p for p in pages(demo) if role in p.roles):
            if not _open(page, demo.url + want.path, want, role, width):
                continue
            charts = _measure(page, f"{role} at {width} px, {want.path}")
            assert charts >= want.charts, f"{role} {width} {want.path}: {charts} charts"
            walked.append((width, want.path))
    expected = len([p for p in pages(demo) if role in p.roles])
    assert len(walked) == expected * len(WIDTHS), walked
    context.close()


def test_docs_render_with_no_network_beyond_the_service_at_both_widths(browser, demo: Demo):
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 900})
    off_site: list[str] = []

    def only_loopback(route) -> None:
        if route.request.url.startswith(demo.url + "/"):
            route.continue_()
        else:
            off_site.append(route.request.url)
            route.abort("internetdisconnected")

    context.route("**/*", only_loopback)
    page = context.new_page()
    page.goto(demo.url + "/docs")
    page.wait_for_selector(".opblock", timeout=15_000)
    assert page.locator(".opblock").count() >= 15
    _measure(page, "/docs at 1280 px")
    page.set_viewport_size({"width": 390, "height": 900})
    _measure(page, "/docs at 390 px")
    assert off_site == []
    context.close()


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[Path]:
    """The report pack (sheets, finance summary, index, unit economics) and the unit-economics
    page, written from the bundled example's files."""
    out = tmp_path_factory.mktemp("written")
    example = ROOT / "examples" / "saas-three-clients"
    common = ["--config", str(example / "rules.yaml"), "--month", "2026-11",
              "--catalog", str(example / "catalog.csv")]  # fmt: skip
    html = ["--format", "html"]  # the PDFs are WeasyPrint's layout, not a screen's
    runner = CliRunner()
    for args in (
        ["report", *common, *html, "--out", str(out / "pack")],
        ["unit-economics", *common, *html, "--out", str(out / "ue")],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    pages = sorted(out.rglob("*.html"))
    names = {p.name for p in pages}
    assert {"index.html", "finance-summary.html", "client-a.html", "unit_economics.html"} <= names
    return pages


def test_sheets_written_from_files_fit_both_widths(browser, written: list[Path]):
    page = browser.new_page(viewport={"width": WIDTHS[0], "height": 900})
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for path in written:
            page.goto(path.as_uri())
            charts = _measure(page, f"{path.name} at {width} px")
            assert path.name == "index.html" or charts >= 1, f"{path.name}: no chart drawn"
    page.close()


AXE = ROOT / "tests" / "a11y" / "node_modules" / "axe-core" / "axe.min.js"
"""npm's axe-core, pinned by ``tests/a11y/package-lock.json`` (``scripts/test.sh``: npm ci)."""
AXE_WIDTHS = (1366, 390)
SEVERE = frozenset({"serious", "critical"})
AXE_RUN = """async () => (await axe.run({exclude: [['tbody > tr:nth-child(n+13)']]},
    {resultTypes: ['violations'], iframes: false})).violations
  .map(v => ({id: v.id, impact: v.impact, help: v.help,
              nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))"""
"""Every rule axe-core has (no tag filter, so every serious and critical rule runs) on the page.
A table's rows past the 12th are left out (they repeat the first rows' markup; on the demo's
month page they made axe take seconds); the embedded sheet (the report's own document) too."""
PHONE_CHECKS = """() => {
  const out = {hidden: [], breaks: []};
  const key = /^(amount|change|status)\\b/i;
  for (const table of document.querySelectorAll('main table')) {
    if (!table.getClientRects().length) continue;
    const box = (table.closest('.table-wrap') || table.parentElement).getBoundingClientRect();
    for (const th of table.querySelectorAll('thead th')) {
      const label = th.textContent.trim(), right = th.getBoundingClientRect().right;
      if (key.test(label) && right > Math.min(innerWidth, box.right) + 1)
        out.hidden.push(`${table.id}: "${label}" ends at ${Math.round(right)} px`);
    }
  }
  const word = /[\\p{L}\\p{N}]/u, range = document.createRange();
  const walker = document.createTreeWalker(document.querySelector('main'), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.data, parent = node.parentElement;
    if (text.trim().length < 2 || !parent.getClientRects().length || parent.closest('.hash, svg'))
      continue;
    let top = null;
    for (let i = 0; i < text.length; i++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect) continue;
      if (top !== null && rect.top > top + 2 && word.test(text[i - 1]) && word.test(text[i]))
        out.breaks.push(`${parent.tagName.toLowerCase()}: ${text.slice(0, i)}|${text.slice(i)}`);
      top = rect.top;
    }
  }
  return out;
}"""
"""At the current width: the key columns (a header starting with amount, change or status) of
every table that end right of the screen or of their table's box, and every line break
between two letters or digits (a word or an id broken mid-word; fingerprints, ``.hash``,
excepted)."""


def _axe_pages(demo: Demo, token: str) -> list[str]:
    """The pages one token opens, found from the store through the API (never the demo's ids):
    the client list; the first listed client's page, by default and at the newest month of
    each kind (closed, restated, open: the watch's sections); the month list and those months'
    pages; pricing; a missing client (the 404 page). A role refused a page gets its error page."""
    headers = {"Authorization": f"Bearer {token}"}
    listed = httpx.get(demo.url + "/api/v1/months", headers=headers, timeout=60)
    months = listed.json() if listed.status_code == 200 else []
    newest: dict[tuple[str, bool], str] = {}
    for m in months:  # a month of each kind, the newest
        kind = (m["state"], m.get("revisions", 0) > 1)
        newest[kind] = max(newest.get(kind, ""), m["month"])
    chosen = sorted(set(newest.values()))
    clients = httpx.get(demo.url + "/api/v1/clients?per_page=1", headers=headers, timeout=60)
    client = quote(clients.json()["items"][0]["id"], safe="")
    return ["/clients", f"/clients/{client}",
            *(f"/clients/{client}?month={m}" for m in chosen),
            "/months", *(f"/months/{m}" for m in chosen),
            "/pricing", "/clients/no-such-client-of-the-a11y-test"]  # fmt: skip


def _axe_context(browser, width: int):
    """One context per width: the pages' CSP forbids any script, so ``bypass_csp`` lets axe in,
    added to every document (the page and its frames) before the page's own content."""
    assert AXE.exists(), f"{AXE} missing: run npm ci --prefix tests/a11y (scripts/test.sh does)"
    context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
    context.add_init_script(path=str(AXE))
    return context


def test_no_serious_accessibility_violation_and_key_columns_on_screen_for_every_role(
    browser, demo: Demo
):
    """axe-core on every page, for a token of each role the demo prints, at 1366 and 390 px: no
    serious or critical violation. At both widths the key columns of every table (amount, change,
    status) end on the screen, and no word or id breaks between two letters.
    ``TENANTCOST_SCREENSHOTS=DIR`` also saves each page's first screen there."""
    shots = os.environ.get("TENANTCOST_SCREENSHOTS")
    problems: list[str] = []
    visited = 0
    roles = [role for role in demo.tokens if role in EVERYONE]  # one token per role
    assert len(roles) == len(EVERYONE), demo.announcement
    pages = {role: _axe_pages(demo, demo.tokens[role]) for role in roles}
    for width in AXE_WIDTHS:
        context = _axe_context(browser, width)
        page = context.new_page()
        page.goto(demo.url + "/login")
        for v in page.evaluate(AXE_RUN):
            if v["impact"] in SEVERE:
                problems.append(
                    f"login {width} px: {v['impact']} {v['id']} ({v['help']}) {v['nodes']}"
                )
        for name in roles:
            token, errors = demo.tokens[name], set()
            context.clear_cookies()
            page.goto(demo.url + "/login")
            page.fill("#token", token)
            with page.expect_navigation():
                page.keyboard.press("Enter")
            for path in pages[name]:
                response = page.goto(demo.url + path)
                assert response is not None and response.status in (200, 403, 404), path
                where = f"{name} {width} px {path} ({response.status})"
                visited += 1
                if response.status != 200 and response.status in errors:
                    continue  # the same error page again
                errors.add(response.status)
                for v in page.evaluate(AXE_RUN):
                    if v["impact"] in SEVERE:
                        problems.append(
                            f"{where}: {v['impact']} {v['id']} ({v['help']}) {v['nodes']}"
                        )
                checked = page.evaluate(PHONE_CHECKS)
                problems += [f"{where}: key column off screen: {h}" for h in checked["hidden"]]
                problems += [f"{where}: broken mid-word: {b}" for b in checked["breaks"]]
                if shots:
                    slug = re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-") or "home"
                    page.screenshot(path=f"{shots}/{name}-{width}-{slug}.png")
        context.close()
    assert not problems, "\n".join(problems)
    assert visited == len(AXE_WIDTHS) * sum(len(p) for p in pages.values()) >= 2 * 4 * 7
