"""Every page at desktop and phone width, in a real browser, for each person who reads them.

``tenantcost serve --demo`` (the real command: two closed months, the catalog, one token per
role, printed with what each may do) runs on a free 127.0.0.1 port, and Debian's headless
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

Every role walks the pages :data:`PAGES` lists for it, with the status it must get (the
product role opens pricing, client and month pages; the month pages without finance's
workings). A page added to the service is one line of :data:`PAGES`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

from .postgres_fixture import free_port

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = (1280, 390)
MIN_CHART_TEXT_PX = 11.0
ADMIN, FINANCE, PRODUCT, MANAGER = "admin", "finance", "product", "account-manager"
EVERYONE = frozenset({ADMIN, FINANCE, PRODUCT, MANAGER})
CLUSTER = frozenset({ADMIN, FINANCE, PRODUCT})


@dataclass(frozen=True)
class Page:
    """One page: its path, who opens it (with the status they get) and its least charts."""

    path: str
    roles: frozenset[str]
    charts: int = 0
    status: int = 200


PAGES = [
    Page("/clients", EVERYONE),
    Page("/clients/client-a", EVERYONE, charts=3),  # history + the embedded sheet's two
    Page("/clients/client-a?month=2026-10", EVERYONE, charts=3),
    Page("/clients/client-b", CLUSTER, charts=3),  # new in 2026-11: no previous month
    Page("/api/v1/clients/client-a/months/2026-11/sheet.html", EVERYONE, charts=2),
    Page("/months", CLUSTER),  # product: the issued months, without finance's workings
    Page("/months/2026-11", CLUSTER, charts=1),  # the cascade's waterfall
    Page("/months/2026-10", CLUSTER, charts=1),
    Page("/pricing?month=2026-11&by=plan", CLUSTER, charts=2),
    Page("/pricing?month=2026-10&by=segment", CLUSTER, charts=2),
    Page("/clients/no-such-client", EVERYONE, status=404),
    Page("/months/2026-11", frozenset({MANAGER}), status=403),  # the "Not allowed" page
    Page("/pricing?month=2026-11", frozenset({MANAGER}), status=403),
]
"""Every service page, by role (``/docs``, the same for everyone, has its own test). Add
``Page("/pricing?month=2026-11&by=plan", CLUSTER, charts=N)`` and the like as parts land."""

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


def _announcement(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    lines = []
    while not lines or not lines[-1].lstrip().startswith("store"):
        line = process.stdout.readline()
        assert line, "serve --demo ended before announcing its store: " + "".join(lines)
        lines.append(line)
    return "".join(lines)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Iterator[Demo]:
    """``tenantcost serve --demo`` up, its tokens read from what it prints."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTCOST_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "tenantcost", "serve", "--demo", "--port", str(port)],
        env=env, cwd=tmp_path_factory.mktemp("demo"), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        text = _announcement(process)
        tokens = dict(re.findall(r"^  (\S+) token.*? (tc_\S+)$", text, flags=re.M))
        url = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        while time.monotonic() - started < 60:
            try:
                if httpx.get(url + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield Demo(url, tokens, text)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_demo_announces_four_tokens_with_what_each_may_do_and_two_closed_months(demo: Demo):
    assert set(demo.tokens) == EVERYONE, demo.announcement
    assert "2026-10 and 2026-11 ingested, run and closed" in demo.announcement
    may = re.findall(r"^  (\S+) token.*\n      may: (.+)$", demo.announcement, flags=re.M)
    assert [role for role, _ in may] == [ADMIN, FINANCE, PRODUCT, MANAGER]
    said = dict(may)
    assert "manage tokens" in said[ADMIN] and "manage tokens" not in said[FINANCE]
    assert "close" in said[FINANCE] and said[MANAGER].startswith("client-a's figures only")
    assert "close" not in said[MANAGER] and "close" not in said[PRODUCT]
    admin = {"Authorization": f"Bearer {demo.tokens[ADMIN]}"}
    months = httpx.get(demo.url + "/api/v1/months", headers=admin).json()
    assert {(m["month"], m["state"]) for m in months} >= {("2026-10", "closed"),
                                                           ("2026-11", "closed")}  # fmt: skip
    tokens = httpx.get(demo.url + "/api/v1/tokens", headers=admin).json()
    assert sorted(t["role"] for t in tokens) == sorted(EVERYONE)


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
    """The demo's client-a shows why a run is rounded once (docs/report.md, "Rounding"):
    0.123458 USD, which rounded alone reads 0.1235 but in the run's one rounding 0.1234. Its
    sheet total, the bridge's "this period" row and the client page must read the one figure,
    and the API's bridge parts sum to its change."""
    manager = {"Authorization": f"Bearer {demo.tokens[MANAGER]}"}
    base = f"{demo.url}/api/v1/clients/client-a/months/2026-11"
    sheet = httpx.get(f"{base}/sheet.md", headers=manager, timeout=120).text
    total = re.search(r"^\| \*\*Total\*\* \| \*\*([0-9.]+) USD", sheet, flags=re.M)
    now = re.search(r"^> \| 2026-11 \(this period\) \| ([0-9.]+) \|", sheet, flags=re.M)
    assert total and now, sheet
    assert now.group(1) == total.group(1) == "0.1234"
    bridge = httpx.get(base, headers=manager, timeout=60).json()["bridge"]
    assert bridge["previous_month"] == "2026-10" and bridge["previous_revision"] == 1
    assert sum(p["amount"] for p in bridge["parts"]) == bridge["difference"] != 0
    with httpx.Client(base_url=demo.url, timeout=60) as browser_like:
        login = browser_like.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
        form = {"token": demo.tokens[MANAGER], **({"csrf_token": csrf.group(1)} if csrf else {})}
        browser_like.post("/login", data=form)
        page = browser_like.get("/clients/client-a").text
    assert "0.1234" in page and "0.1235" not in page


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
    page.wait_for_url(demo.url + "/clients")
    walked = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for want in (p for p in PAGES if role in p.roles):
            if not _open(page, demo.url + want.path, want, role, width):
                continue
            charts = _measure(page, f"{role} at {width} px, {want.path}")
            assert charts >= want.charts, f"{role} {width} {want.path}: {charts} charts"
            walked.append((width, want.path))
    expected = len([p for p in PAGES if role in p.roles])
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
    for args in (["report", *common, *html, "--out", str(out / "pack")],
                 ["unit-economics", *common, *html, "--out", str(out / "ue")]):
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
