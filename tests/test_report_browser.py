"""The report pack in a real browser: Debian's headless Chromium driven by Playwright.

Both examples are rendered, their output folder is served over HTTP on 127.0.0.1, and the
browser opens the index and follows every link (every page reached, every file linked): each
must answer 200 and render, no page may log a console error or throw, every in-page anchor
must have its target, and each HTML page is screenshotted (non-empty PNGs in ``tmp_path``).

Chromium comes from Debian (``scripts/test.sh`` installs it), never from ``playwright
install``; a missing browser fails the test with the command to run, it is not skipped.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parents[1]
PACKS = {
    "saas": [
        "--config",
        str(ROOT / "examples/saas-three-clients/rules.yaml"),
        "--month",
        "2026-11",
    ],
    "teams": [
        "--config",
        str(ROOT / "examples/idle-three-teams/rules-even.yaml"),
        "--month",
        "2026-01",
    ],
}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[str]:
    """Both packs rendered into one folder and served on a free loopback port."""
    root = tmp_path_factory.mktemp("served")
    runner = CliRunner()
    for name, args in PACKS.items():
        result = runner.invoke(
            app, ["report", *args, "--view", "internal", "--out", str(root / name)]
        )
        assert result.exit_code == 0, result.output
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _is_png(path: Path) -> bool:
    data = path.read_bytes()
    return len(data) > 1000 and data.startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("pack", sorted(PACKS))
def test_index_and_every_link_render_without_errors(browser, served, pack, tmp_path):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on(
        "console",
        lambda msg: (
            errors.append(f"console: {msg.text} {msg.location}") if msg.type == "error" else None
        ),
    )
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))

    start = urljoin(served, f"{pack}/index.html")
    queue, seen, files = [start], set(), set()
    shots = []
    while queue:  # breadth-first over the HTML pages reachable from the index
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        response = page.goto(url, wait_until="load")
        assert response is not None and response.status == 200, url
        heading = page.locator("h1")
        assert heading.count() == 1 and heading.first.is_visible(), url
        assert page.evaluate("document.documentElement.lang") == "en", url
        shot = tmp_path / f"{len(shots):02d}-{Path(url).stem}.png"
        page.screenshot(path=str(shot), full_page=True)
        shots.append(shot)
        for href in page.eval_on_selector_all(
            "a[href]", "els => els.map(e => e.getAttribute('href'))"
        ):
            target, fragment = urldefrag(urljoin(url, href))
            if fragment and target == url:
                assert page.locator(f"[id='{fragment}']").count() == 1, f"{url}: #{fragment}"
                continue
            assert target.startswith(served), f"{url} links outside the pack: {href}"
            if target.endswith(".html"):
                queue.append(target)
            else:
                files.add(target)

    for url in sorted(files):  # PDF and Markdown files: served, non-empty, the right kind
        response = context.request.get(url)
        assert response.status == 200, url
        body = response.body()
        assert body, url
        if url.endswith(".pdf"):
            assert body.startswith(b"%PDF-"), url
        else:
            assert body.decode("utf-8").startswith("# "), url

    assert errors == [], errors
    clients = [u for u in seen if "/clients/" in u]
    assert len(clients) == 3 and any(u.endswith("finance-summary.html") for u in seen)
    assert len(files) == 8  # 3 sheets + the summary, each as PDF and Markdown
    assert shots and all(_is_png(s) for s in shots)
    context.close()


def test_sheet_charts_are_drawn_and_tables_are_readable(browser, served, tmp_path):
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    page.goto(urljoin(served, "saas/clients/client-b.html"))
    for chart in ("sources-chart", "keys-chart"):
        svg = page.locator(f"svg[aria-labelledby^='{chart}']")
        assert svg.count() == 1
        box = svg.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 40
        assert svg.locator("rect").count() >= 3
    # print layout: the same page emulated for print still shows every section
    page.emulate_media(media="print")
    for section in ("lines", "rule", "unattributed", "confidence", "provenance"):
        assert page.locator(f"section#{section}").is_visible()
    shot = tmp_path / "client-b-print.png"
    page.screenshot(path=str(shot), full_page=True)
    assert _is_png(shot)
    page.close()
