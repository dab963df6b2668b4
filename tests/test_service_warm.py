"""What a fresh worker prepares before its first request (tenantcost/service/warm.py), in
process on the bundled example's store (SQLite): each month's latest issued revision's
displayed figures and the latest month's finance page are kept, so the first reads reuse
them; an empty store only makes it a no-op. And the store's rows-to-frame helper gives the
frame pandas builds from the rows themselves."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import func, select

from tenantcost.service import memo
from tenantcost.service.demo import example_store
from tenantcost.service.page_views import month_view
from tenantcost.service.pages import _environment
from tenantcost.service.warm import warm_up
from tenantcost.store import shown
from tenantcost.store.connection import result_frame
from tenantcost.store.cycle import latest_issued
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.models import Run, RunClient, table
from tenantcost.store.settings import resolve_settings


def _store(tmp_path, close: bool = True) -> Store:
    db, data = f"sqlite:///{tmp_path / 'store.db'}", str(tmp_path / "data")
    example_store(db, data, close=close, actor="tests")
    return Store(open_engine(resolve_settings(db=db, data=data, environ={})), DataDir(data))


def test_a_worker_keeps_the_issued_months_figures_and_the_latest_month_page(tmp_path):
    store = _store(tmp_path)
    engine = store.engine
    with engine.connect() as connection:
        found = connection.execute(select(table(Run).c.month).distinct()).scalars()
        months = sorted(str(m) for m in found)
    issued = [i for i in (latest_issued(engine, m) for m in months) if i is not None]
    assert issued, "the example closes a month"
    key = str(engine.url)
    for i in issued:
        shown._cache.pop((key, i.run_id), None)
    memo._kept.clear()

    warm_up(engine, _environment(), store)

    for i in issued:  # each issued revision's one rounding, computed once, kept
        assert (key, i.run_id) in shown._cache
        assert shown.run_shown(engine, i.run_id) is shown._cache[(key, i.run_id)]
    kept = [k for k in memo._kept if k[1] == "month_view"]
    assert [k[2][0] for k in kept] == [months[-1]]  # the latest month's page
    view = memo._kept[kept[0]]
    assert month_view(engine, months[-1], 1, store, 1) is view  # the first read reuses it
    assert view.run is not None and view.run.cascade  # a whole page, not a placeholder


def test_an_empty_store_warms_nothing_and_answers_as_before(tmp_path, caplog):
    from tenantcost.store.schema import upgrade

    db = f"sqlite:///{tmp_path / 'empty.db'}"
    settings = resolve_settings(db=db, data=str(tmp_path / "data"), environ={})
    engine = open_engine(settings, create=True)
    upgrade(engine)
    memo._kept.clear()
    warm_up(engine, _environment(), Store(engine, DataDir(str(tmp_path / "data"))))
    assert not [k for k in memo._kept if k[1] == "month_view"]
    assert "warming the worker up failed" not in caplog.text


def test_result_frame_is_the_frame_of_the_rows(tmp_path):
    store = _store(tmp_path, close=False)
    rc = table(RunClient).c
    query = select(rc.run_id, rc.client, rc.amount).order_by(rc.client)
    with store.engine.connect() as connection:
        expected = pd.DataFrame(connection.execute(query).all(), columns=["run_id", "client",
                                                                           "amount"])
        got = result_frame(connection.execute(query))
        named = result_frame(connection.execute(query), ["r", "c", "a"])
        empty = result_frame(connection.execute(query.where(rc.amount < 0)))
        count = connection.execute(select(func.count()).select_from(table(RunClient))).scalar()
    assert len(got) == count > 0
    pd.testing.assert_frame_equal(got, expected)
    assert list(named.columns) == ["r", "c", "a"] and named["a"].tolist() == got["amount"].tolist()
    assert empty.empty and list(empty.columns) == ["run_id", "client", "amount"]
