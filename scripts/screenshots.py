"""The screenshots of docs/service.md ("What each role sees first"), made by the product's code.

Why a script: a picture in the docs that no code makes drifts from the pages the day a
template changes. This one builds the demo company with
:func:`tenantcost.service.demo.build_demo` (the builder of ``serve --demo`` and the browser
tests) at a fixed seed and a fixed ``now``, so the same commit gives the same company; serves
it with ``tenantcost serve`` (real uvicorn, on a free 127.0.0.1 port); logs in with each
role's printed token in Debian's headless Chromium; follows ``GET /`` (each role's landing)
and saves the first screen only, at a laptop's 1366x768 and a phone's 390x844, as a 256-colour
PNG in ``docs/img/``. ``tests/test_screenshots.py`` checks that the docs show exactly the
shots :data:`SHOTS` lists.

Run it from the repository root after a change to a first screen::

    python3 scripts/screenshots.py            # writes docs/img/first-screen-*.png

It needs Playwright for Python and ``/usr/bin/chromium`` (``bash scripts/test.sh`` installs
both), and takes about a minute: the demo's build is most of it.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from collections.abc import Iterator

    from playwright.sync_api import Browser

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "img"
SEED = 2026
"""The demo's default seed (:data:`tenantcost.service.demo_company.DEFAULT_SEED`)."""
NOW = "2026-12-15T14:00:00Z"
"""The fixed clock: the open month is 2026-12 to its 15th, 14:00 UTC; 2026-06 to 2026-11 are
closed."""
ROLES = ("admin", "finance", "product", "account-manager", "account-manager-one")
"""The demo's tokens (:func:`tenantcost.service.demo.demo_token_specs`), one per reader."""
SCREENS = ((1366, 768), (390, 844))
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


@dataclass(frozen=True)
class Shot:
    """One first screen: whose, at which viewport, and its file under ``docs/img``."""

    role: str
    width: int
    height: int

    @property
    def name(self) -> str:
        return f"first-screen-{self.role}-{self.width}.png"


SHOTS = tuple(Shot(role, width, height) for role in ROLES for width, height in SCREENS)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serving(db: str, data: str, secret: str, log: Path) -> Iterator[str]:
    """``tenantcost serve`` on the store, up until the block ends; yields its base URL."""
    port = _free_port()
    env = {**os.environ, "TENANTCOST_SECRET": secret}
    command = [sys.executable, "-m", "tenantcost", "serve", "--db", db, "--data", data,
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"tenantcost serve did not come up: {log.read_text()}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=15)


def _save(png: bytes, path: Path) -> None:
    """The screenshot as a 256-colour PNG: text and flat colours survive, the file is small."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def take(browser: Browser, url: str, tokens: dict[str, str], out: Path) -> dict[str, str]:
    """Every shot of :data:`SHOTS` into ``out``; the path each role landed on."""
    landed: dict[str, str] = {}
    for shot in SHOTS:
        context = browser.new_context(viewport={"width": shot.width, "height": shot.height})
        page = context.new_page()
        page.goto(url + "/login")
        page.fill("#token", tokens[shot.role])
        with page.expect_navigation():
            page.keyboard.press("Enter")
        response = page.goto(url + "/")
        if response is None or response.status != 200:
            raise SystemExit(f"{shot.role}: GET / answered {response and response.status}")
        landed[shot.role] = page.url.removeprefix(url)
        _save(page.screenshot(full_page=False), out / shot.name)
        context.close()
    return landed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=IMAGES, help="folder of the PNGs")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    from tenantcost.service.demo import build_demo

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tenantcost-shots-") as folder:
        demo = build_demo(Path(folder), seed=SEED, now=NOW)
        missing = set(ROLES) ^ set(demo.tokens)
        if missing:
            raise SystemExit(f"the demo's tokens and ROLES differ: {sorted(missing)}")
        log = Path(folder) / "serve.log"
        with _serving(demo.db, demo.data, demo.secret, log) as url, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                landed = take(browser, url, demo.tokens, args.out)
            finally:
                browser.close()
    total = sum((args.out / shot.name).stat().st_size for shot in SHOTS)
    for role, path in landed.items():
        print(f"{role:20} lands on {path}")
    print(f"{len(SHOTS)} screenshots, {total / 1e6:.2f} MB, in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
