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


SLOW_FIXTURES = frozenset({"postgres_admin_url", "browser"})
"""Fixtures that make a test slow by themselves: a PostgreSQL database (the cluster, a new
database, the migrations) or Chromium. A test that uses one, directly or through another
fixture, is marked ``slow`` here, so the quick subset (``-m "not slow"``, docs/development.md)
needs no mark to be remembered; tests slow for other reasons carry ``@pytest.mark.slow``."""


SLOW_MODULES = frozenset({
    "test_billing_reader",
    "test_bridge",
    "test_engines",
    "test_explain_cli",
    "test_figures",
    "test_focus_export",
    "test_invoice_cli",
    "test_limits",
    "test_meter_delivery",
    "test_meter_servers",
    "test_nested_windows",
    "test_opencost_json_fast",
    "test_properties",
    "test_redaction_surfaces",
    "test_report",
    "test_report_engines",
    "test_service_access",
    "test_service_garbage",
    "test_service_hostile_routes",
    "test_service_otlp",
    "test_service_pages",
    "test_service_pricing",
    "test_service_tokens",
    "test_sheet_cache",
    "test_sheet_privacy",
    "test_split_arithmetic",
    "test_store_batches",
    "test_store_compaction",
    "test_store_cycle",
    "test_store_ingest",
    "test_store_month_bridge",
    "test_store_report",
    "test_store_usage_totals",
    "test_unit_economics",
    "test_watch",
})
"""Modules whose tests, PostgreSQL and browsers left out, still took 9 s or more of a worker's
time on 2026-12-05 (``--durations=0`` of the quick subset on the idle 2-core machine): they
start servers, run the CLI as subprocesses, render sheets, or run hypothesis over the whole
engine. Their tests are marked ``slow``; together they were about three quarters of that
subset's time."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        slow_module = item.path.stem in SLOW_MODULES
        if slow_module or fixtures & SLOW_FIXTURES or "postgresql" in params.values():
            item.add_marker(pytest.mark.slow)
