"""The finance month page's "Usage" section against a real `tenantcost serve` (uvicorn) on
SQLite and PostgreSQL: the month's usage totals per service and client, the same
figures as `status --usage`; paged (100 rows a page, its own `usage_page` links) when a month
has many clients; account managers get 403 for the whole page and no other client's figure."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

from .service_web_server import MONTH, Served, served_example
from .test_service_pages import logged_in

CLIENTS = 150
runner = CliRunner()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path_factory) -> Iterator[Served]:
    """The example (2026-11, open) plus 2026-12 usage of 150 clients, served."""
    folder = tmp_path_factory.mktemp(f"month-usage-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{folder / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    with served_example(db, folder / "data", close=False) as service:
        usage = folder / "december.csv"
        usage.write_text("window_start,window_end,service,client,requests,cpu_seconds\n" + "".join(
            f"2026-12-01T00:00:00Z,2026-12-01T01:00:00Z,api,c{i:03d},{i + 1},0.5\n"
            for i in range(CLIENTS)) + "2026-12-01T00:00:00Z,2026-12-01T01:00:00Z,api,,7,0.25\n")
        store = ["--db", db, "--data", str(folder / "data")]
        done = runner.invoke(app, ["ingest", "usage", "--usage", str(usage), *store])
        assert done.exit_code == 0, done.output
        yield service


def usage_rows(html: str) -> list[list[str]]:
    """The rows of the page's usage table, as text cells."""
    table = re.search(r'<table id="usage-table">(.*?)</table>', html, flags=re.S)
    assert table, "no usage table"
    body = table.group(1).split("<tbody>", 1)[1]
    return [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", tr) for tr in re.findall(r"<tr>(.*?)</tr>",
                                                                           body, flags=re.S)]


def test_the_month_page_shows_usage_totals_per_service_and_client(served: Served) -> None:
    finance = logged_in(served, "finance")
    page = finance.get(f"/months/{MONTH}")
    assert page.status_code == 200
    assert '<h2 id="usage-h">Usage</h2>' in page.text
    done = runner.invoke(app, ["status", "--usage", "--month", MONTH, "--format", "json",
                               "--db", served.db, "--data", served.data])  # fmt: skip
    expected = json.loads(done.stdout)["months"][0]["usage"]
    assert usage_rows(page.text) == [
        [u["service"], u["client"], f"{u['requests']:,}", f"{u['cpu_seconds']:,}"]
        for u in expected
    ]
    assert ["api", "client-a", "66,348", "604.7"] in usage_rows(page.text)
    assert 'id="usage-summary">6 (service, client) totals, showing 1 to 6<' in page.text


def test_many_clients_are_paged_and_the_empty_client_is_named(served: Served) -> None:
    finance = logged_in(served, "finance")
    first = finance.get("/months/2026-12")
    assert first.status_code == 200
    rows = usage_rows(first.text)
    assert len(rows) == 100
    assert rows[0] == ["api", "(no client)", "7", "0.25"]  # "" sorts first
    # as many decimals in every row of a column as its most precise total needs
    assert rows[1] == ["api", "c000", "1", "0.50"] and rows[-1][1] == "c098"
    assert "151 (service, client) totals, showing 1 to 100" in first.text
    assert 'href="/months/2026-12?usage_page=2#usage-h" rel="next"' in first.text
    second = finance.get("/months/2026-12", params={"usage_page": 2})
    rows = usage_rows(second.text)
    assert [r[1] for r in rows] == [f"c{i:03d}" for i in range(99, CLIENTS)]
    assert rows[-1] == ["api", "c149", "150", "0.5"]
    assert "showing 101 to 151" in second.text and 'rel="next"' not in second.text.split(
        'id="usage-summary"')[1]
    assert finance.get("/months/2026-12", params={"usage_page": 0}).status_code == 422


def test_account_managers_never_see_the_usage_section(served: Served) -> None:
    manager = logged_in(served, "manager")
    for month in (MONTH, "2026-12"):
        page = manager.get(f"/months/{month}", params={"usage_page": 1})
        assert page.status_code == 403 and "usage-table" not in page.text
        assert "client-b" not in page.text and "c001" not in page.text


def test_a_page_beyond_the_last_says_so_without_rows(served: Served) -> None:
    finance = logged_in(served, "finance")
    beyond = finance.get("/months/2026-12", params={"usage_page": 9})
    assert beyond.status_code == 200 and "usage-table" not in beyond.text
    assert 'id="usage-summary">151 (service, client) totals<' in beyond.text
    assert 'href="/months/2026-12?usage_page=8#usage-h" rel="prev"' in beyond.text
