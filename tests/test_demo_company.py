"""The demo is a company (issue 36 §1): deterministic for a seed, and holding what a newcomer
must see: a hundred clients, half a year closed, a restatement, budgets, invoices, a watch
with an anomaly, realistic totals and idle."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pandas as pd
import pytest
from sqlalchemy import text

from tenantcost.service.demo import Demo
from tenantcost.service.demo_company import DEFAULT_SEED, SINGLE_MANAGER, make_company
from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings

from .demo_company_store import shared_demo

NOW = pd.Timestamp("2026-12-05T12:30:00Z")


def test_a_seed_and_a_month_give_the_same_company_and_another_seed_another():
    one, again = make_company(DEFAULT_SEED, NOW), make_company(DEFAULT_SEED, NOW)
    other = make_company(DEFAULT_SEED + 1, NOW)
    for month in one.months:
        pd.testing.assert_frame_equal(one.usage[month], again.usage[month])
        pd.testing.assert_frame_equal(one.costs[month], again.costs[month])
    pd.testing.assert_frame_equal(one.catalog, again.catalog)
    assert one.billing.keys() == again.billing.keys()
    for month, lines in one.billing.items():
        pd.testing.assert_frame_equal(lines, again.billing[month])
    assert set(one.catalog["name"]) != set(other.catalog["name"])
    assert (
        one.costs[one.closed[0]]["total_cost"].sum()
        != other.costs[other.closed[0]]["total_cost"].sum()
    )


def test_the_generated_inputs_look_like_a_saas():
    company = make_company(DEFAULT_SEED, NOW)
    catalog = company.catalog
    assert len(catalog) >= 100 and catalog["client"].is_unique
    assert 3 <= catalog["plan"].nunique() <= 4 and catalog["segment"].nunique() >= 3
    managers = catalog["account_manager"].value_counts()
    assert len(managers) >= 4 and managers[SINGLE_MANAGER] == 1 and managers.max() > 1
    assert (catalog["end"] != "").sum() >= 3  # churn
    assert (catalog["start"] > f"{company.closed[0]}-01").sum() >= 3  # new clients
    assert company.closed == ["2026-06", "2026-07", "2026-08", "2026-09", "2026-10", "2026-11"]
    assert company.open_month == "2026-12"
    services = {m: set(company.usage[m]["service"]) for m in company.months}
    assert "search" not in services[company.closed[0]] and "search" in services["2026-12"]
    assert {"window_start", "window_end", "service", "client", "requests", "cpu_seconds"} == set(
        company.usage["2026-12"].columns
    )  # the meter's shape
    hours = company.usage["2026-12"]["window_start"].nunique()
    assert hours == 4 * 24 + 12  # the open month's hours up to now, hourly
    for month in company.closed:
        costs = company.costs[month]
        total = costs["total_cost"].sum()
        idle = costs.loc[costs["name"] == "__idle__", "total_cost"].sum()
        assert 20_000 <= total <= 80_000, (month, total)
        assert 0.25 <= idle / total <= 0.35, (month, idle / total)
    assert company.spike is not None and company.spike[1] == pd.Timestamp("2026-12-04", tz="UTC")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    yield shared_demo(tmp_path_factory)


def test_the_demo_store_holds_what_the_issue_lists(demo: Demo):
    engine = open_engine(resolve_settings(db=demo.db, data=demo.data, environ={}))
    try:
        with engine.connect() as connection:

            def rows(query: str, **binds: object) -> list[tuple[object, ...]]:
                return [tuple(r) for r in connection.execute(text(query), binds)]

            assert rows("SELECT count(*) FROM catalog_client")[0][0] >= 100
            states = dict(rows(
                "SELECT month, max(revision) FROM statement GROUP BY month"))  # fmt: skip
            assert sorted(states) == list(demo.closed) and len(demo.closed) >= 6
            assert states[demo.restated] == 2 and sum(r == 1 for r in states.values()) == 5
            totals = dict(rows(
                "SELECT r.month, r.reference_total FROM run r JOIN ("
                "SELECT month, max(finished_at) AS f FROM run GROUP BY month) l "
                "ON l.month = r.month AND l.f = r.finished_at"))  # fmt: skip
            for month in demo.closed:
                assert 20_000 * 10**6 <= int(totals[month]) <= 80_000 * 10**6, month
            assert demo.month in totals  # the open month's draft run
            assert rows("SELECT count(*) FROM budget_version WHERE month = :m",
                        m=demo.month)[0][0] == 1  # fmt: skip
            billed = {str(s)[:7] for (s,) in rows(
                "SELECT DISTINCT billing_period_start FROM billing_cell")}  # fmt: skip
            assert set(demo.closed) <= billed
            flagged = rows(
                "SELECT e.entry FROM watch_entry e JOIN watch_snapshot s ON s.id = e.snapshot_id "
                "WHERE s.month = :m AND e.anomalies > 0", m=demo.month)  # fmt: skip
    finally:
        engine.dispose()
    anomalies = [a for (entry,) in flagged for a in json.loads(str(entry))["anomalies"]]
    if pd.Timestamp.now(tz="UTC").day >= 2:  # a complete day of the month to score
        assert any(a["kind"] == "spike" and a["source"] == "api" for a in anomalies), anomalies
    assert len(demo.scopes["account-manager"]) > 1 and len(demo.scopes["account-manager-one"]) == 1
    print(f"demo built in {demo.seconds:.1f} s")
