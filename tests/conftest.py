"""Fixtures shared by several test modules.

The PostgreSQL cluster starts only when a test asks for it (the store tests), once per
session, and stops at teardown. ``browser`` is Debian's headless Chromium driven by
Playwright (the report pack's and the web app's browser tests), never one downloaded by
``playwright install``; a missing browser fails the test with the command to run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .postgres_fixture import running_postgres

os.environ.setdefault("TENANTCOST_PRERENDER", "0")
"""Servers the tests start render sheets on demand only: a background rendering of every
issued revision's PDFs would compete for the CI's two cores and write to stores the tests are
checking. ``tests/test_sheet_cache.py`` turns it on for the servers that test it."""

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    """A real PostgreSQL 15 on 127.0.0.1 (``postgresql+psycopg://postgres@127.0.0.1:PORT/``)."""
    with running_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """An empty store database on each backend: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    from .postgres_fixture import new_database

    return new_database(request.getfixturevalue("postgres_admin_url"))


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} not found: the browser tests need Debian's chromium. Run the README "
            "test command, bash scripts/test.sh, which installs it (apt-get install chromium)."
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "playwright is not installed: run bash scripts/test.sh (pip install -e .[test])"
        )
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
