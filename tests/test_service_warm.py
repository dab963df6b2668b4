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


def test_a_months_usage_totals_are_kept_while_another_month_is_ingested(tmp_path):
    """The month page's usage totals depend on that month's batches only: usage of December
    arriving keeps November's (the same object), usage of November computes them again."""
    from typer.testing import CliRunner

    from tenantcost.cli import app
    from tenantcost.service.month_usage import usage_view

    store = _store(tmp_path, close=False)
    cli = ["--db", str(store.engine.url), "--data", store.data.root]

    def ingest(day: str, requests: int) -> None:
        usage = tmp_path / f"usage-{day}.csv"
        header = "window_start,window_end,service,client,requests,cpu_seconds\n"
        usage.write_text(f"{header}{day}T05:00:00Z,{day}T06:00:00Z,api,client-a,{requests},0.5\n")
        done = CliRunner().invoke(app, ["ingest", "usage", "--usage", str(usage), *cli])
        assert done.exit_code == 0, done.output

    def computed() -> list[object]:  # November's totals as kept, one per computation
        return [v for k, v in memo._kept.items() if k[1] == "usage_totals"
                and k[2][0] == "2026-11"]  # fmt: skip

    memo._kept.clear()
    first = usage_view(store, "2026-11", 1, 1)
    assert first is not None and first.rows and len(computed()) == 1
    ingest("2026-12-01", 5)  # another month: a new store generation, the same totals
    assert usage_view(store, "2026-11", 1, 1) == first and len(computed()) == 1
    ingest("2026-11-02", 1000)  # this month: computed again, with the new requests
    again = usage_view(store, "2026-11", 1, 1)
    assert again is not None and again != first and len(computed()) == 2
    column = again.metrics.index("requests")
    before = {(r.service, r.client): r.values[column] for r in first.rows}
    after = {(r.service, r.client): r.values[column] for r in again.rows}
    changed = [k for k in after if after[k] != before.get(k)]
    assert changed == [("api", "client-a")], (before, after)
