"""The OTLP series state in the store (tenantcost.store.otlp_series) on SQLite and PostgreSQL:
a series not seen for 48 hours expires, a seen one is kept; a month the store refuses (a
batch lacking the column a stored rule splits by) refuses its points with the store's reason,
and its series do not advance (only a closed month's do)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import delete, insert, select, update

from tenantcost.config.otlp import OtlpSettings
from tenantcost.otlp import points
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.models import Batch, BatchFile, OtlpSeries, UsageSample, table, utcnow
from tenantcost.store.otlp_series import Outcome, ingest_points, read_state
from tenantcost.store.rules import load_rule_file
from tenantcost.store.schema import upgrade
from tenantcost.store.settings import resolve_settings

from .test_otlp import GAUGES, LEVELS, SETTINGS, T0, counter, gauge, wrap


def open_store(url: str, data: Path) -> Store:
    engine = open_engine(resolve_settings(db=url, environ={}), create=True)
    upgrade(engine)
    return Store(engine, DataDir(str(data)))


def post(store: Store, request: object, settings: OtlpSettings = SETTINGS,
         gauges: frozenset[str] = frozenset()) -> Outcome:  # fmt: skip
    found = points(request, settings, gauges=gauges)
    return ingest_points(store, found, settings.counter_columns, actor="test", origin="test",
                         wait=5)  # fmt: skip


def test_series_unseen_for_48_hours_expire(store_url: str, tmp_path: Path) -> None:
    """Forgotten between 48 and 49 hours after the last export (``seen_at`` is refreshed
    once an hour): a row seen 49 hours ago is deleted, one seen 47 hours ago kept."""
    store = open_store(store_url, tmp_path / "data")
    with store.engine.begin() as conn:
        conn.execute(insert(table(OtlpSeries)), [
            {"key": "old", "start_unix_nano": 1, "time_unix_nano": 2, "value": 3.0,
             "seen_at": utcnow() - timedelta(hours=49, minutes=1)},
            {"key": "recent", "start_unix_nano": 1, "time_unix_nano": 2, "value": 3.0,
             "seen_at": utcnow() - timedelta(hours=47)},
        ])  # fmt: skip
    outcome = post(store, counter([(T0, T0 + 10**9, 2.5)], 2))
    assert len(outcome.batches) == 1
    with store.engine.connect() as conn:
        keys = set(conn.execute(select(table(OtlpSeries).c.key)).scalars())
    assert "old" not in keys and "recent" in keys and len(keys) == 2
    kept = read_state(store.engine, sorted(keys - {"recent"}))
    assert kept.to_dict("records") == [{"start": T0, "time": T0 + 10**9, "value": 2.5}]
    store.engine.dispose()


def test_gauge_points_are_a_sample_batch_per_month_beside_the_counters(
    store_url: str, tmp_path: Path
) -> None:
    """A request's counters are their sum batch; its gauge points one sample batch per
    calendar month of their times, the levels as exact text."""
    store = open_store(store_url, tmp_path / "data")
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES_WITH_A_GAUGE)
    load_rule_file(store.engine, rules, actor="test")
    december = int(pd.Timestamp("2026-12-01T00:00:00.5Z").value)
    request = wrap(
        counter([(T0, T0 + 10**9, 2.5)], 2).resource_metrics[0].scope_metrics[0].metrics[0],
        gauge({"as_int": 1073741824}, {"as_double": 0.25, "client": "client-b"},
              {"as_int": 7, "time_unix_nano": december + 1_234}),
    )  # fmt: skip
    outcome = post(store, request, LEVELS, GAUGES)
    assert pd.concat(outcome.refused).empty and len(outcome.batches) == 3
    s, b = table(UsageSample).c, table(Batch).c
    with store.engine.connect() as conn:
        rows = conn.execute(select(s.metric, s.service, s.client, s.t_us, s.value, b.uid, b.source)
                            .join_from(table(UsageSample), table(Batch), b.id == s.batch_id)
                            .order_by(s.t_us, s.client)).all()  # fmt: skip
    assert [tuple(r)[:5] for r in rows] == [
        ("storage_bytes", "api", "client-a", T0 // 1000, "1073741824"),
        ("storage_bytes", "api", "client-b", T0 // 1000, "0.25"),
        ("storage_bytes", "api", "client-a", december // 1000 + 1, "7"),
    ]
    assert rows[0].uid != rows[2].uid and {r.uid for r in rows} < set(outcome.batches)
    assert {r.source for r in rows} == {"test"}
    assert stored_cpu_seconds(store, tmp_path / "data") == 2.5
    store.engine.dispose()


RULES_WITH_A_GAUGE = """\
currency: USD
metrics:
  storage_bytes: {kind: gauge, unit: byte, stale_after: 6h}
rules:
  - id: by-requests
    effective_from: "2020-01-01"
    workloads:
      - match: {namespace: api}
        class: shared
        service: api
        key: requests
    unmatched: error
"""


def test_a_batch_the_store_refuses_refuses_its_points_and_advances_nothing(
    store_url: str, tmp_path: Path
) -> None:
    store = open_store(store_url, tmp_path / "data")
    first = post(store, counter([(T0, T0 + 10**9, 1.0)], 2))
    assert len(first.batches) == 1
    wider = OtlpSettings.model_validate({"metrics": {
        **{c: m.model_dump() for c, m in SETTINGS.metrics.items()},
        "bytes_out": {"name": "app.bytes", "value": "sum"}}})  # fmt: skip
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES_BY_BYTES_OUT)
    load_rule_file(store.engine, rules, actor="test")
    refused = post(store, counter([(T0, T0 + 2 * 10**9, 4.0)], 2))  # lacks bytes_out
    reasons = pd.concat(refused.refused)["reason"].tolist()
    assert len(reasons) == 1 and "bytes_out" in reasons[0] and "lacks" in reasons[0]
    post(store, counter([(T0, T0 + 3 * 10**9, 4.5)], 2), wider)  # a new metric is stored
    # the refused point is no baseline (only a closed month's is): 4.5 counts from 1.0
    assert stored_cpu_seconds(store, tmp_path / "data") == 1.0 + 3.5
    store.engine.dispose()


RULES_BY_BYTES_OUT = """\
currency: USD
rules:
  - id: by-bytes
    effective_from: "2020-01-01"
    workloads:
      - match: {namespace: api}
        class: shared
        service: api
        key: bytes_out
    unmatched: error
"""


def stored_cpu_seconds(store: Store, data: Path) -> float:
    b, f = table(Batch).c, table(BatchFile).c
    with store.engine.connect() as conn:
        paths = (
            conn.execute(
                select(f.path).join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
            )
            .scalars()
            .all()
        )
    return float(sum(pd.read_parquet(data / p)["cpu_seconds"].sum() for p in paths))


def _series(store: Store) -> dict[str, tuple[int, int, float, object]]:
    s = table(OtlpSeries).c
    with store.engine.connect() as conn:
        rows = conn.execute(select(s.key, s.start_unix_nano, s.time_unix_nano, s.value,
                                   s.seen_at)).all()  # fmt: skip
    return {r.key: (r.start_unix_nano, r.time_unix_nano, r.value, r.seen_at) for r in rows}


def test_a_series_moved_by_another_request_is_planned_again(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the read of a request's series and its batch, another request advances one
    (an exporter's retry racing its first attempt): the write finds it moved, the batch rolls
    back, and the request is planned again from the new point: nothing is added twice."""
    import tenantcost.store.otlp_series as series

    store = open_store(store_url, tmp_path / "data")
    post(store, counter([(T0, T0 + 10**9, 1.0)], 2))
    (key,) = _series(store)
    real_plan, calls = series.plan, []

    def racing(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:  # the other request commits 3.0 after this one read 1.0
            with store.engine.begin() as conn:
                conn.execute(update(table(OtlpSeries)).where(table(OtlpSeries).c.key == key)
                             .values(time_unix_nano=T0 + 2 * 10**9, value=3.0))  # fmt: skip
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(series, "plan", racing)
    before = stored_cpu_seconds(store, tmp_path / "data")
    outcome = post(store, counter([(T0, T0 + 3 * 10**9, 4.0)], 2))
    assert len(calls) == 2 and len(outcome.batches) == 1
    assert stored_cpu_seconds(store, tmp_path / "data") - before == 1.0  # 4.0 - 3.0, once
    assert _series(store)[key][:3] == (T0, T0 + 3 * 10**9, 4.0)
    store.engine.dispose()


def test_row_ids_known_to_the_process_are_checked_against_their_key(
    store_url: str, tmp_path: Path
) -> None:
    """The series' rows are read by the row ids this process saw (SQLite); a row deleted
    and stored again under another id, or an id now holding another series, is read by its
    key instead: the increments stay exact."""
    store = open_store(store_url, tmp_path / "data")
    two = counter([(T0, T0 + 10**9, 1.0)], 2)
    two.resource_metrics.extend(counter([(T0, T0 + 10**9, 5.0)], 2, client="client-b")
                                .resource_metrics)  # fmt: skip
    post(store, two)
    post(store, counter([(T0, T0 + 2 * 10**9, 2.0)], 2))  # the ids are known now
    rows = _series(store)
    with store.engine.begin() as conn:  # the same rows again, in the other order: new ids
        conn.execute(delete(table(OtlpSeries)))
        for key in sorted(rows, reverse=True):
            start, time, value, seen = rows[key]
            conn.execute(insert(table(OtlpSeries)).values(
                key=key, start_unix_nano=start, time_unix_nano=time, value=value,
                seen_at=seen))  # fmt: skip
    later = counter([(T0, T0 + 3 * 10**9, 2.5)], 2)
    later.resource_metrics.extend(counter([(T0, T0 + 3 * 10**9, 6.0)], 2, client="client-b")
                                  .resource_metrics)  # fmt: skip
    outcome = post(store, later)
    assert pd.concat(outcome.refused).empty and outcome.received == 0
    assert stored_cpu_seconds(store, tmp_path / "data") == 6.0 + 2.5  # each its last value
    store.engine.dispose()


def test_an_expired_row_of_the_series_is_replaced_and_seen_at_refreshed_hourly(
    store_url: str, tmp_path: Path
) -> None:
    """A series' own row unseen for 50 hours is no baseline: its point counts whole and
    replaces it. A row seen 10 minutes ago keeps its seen_at when advanced; one seen two
    hours ago is marked seen now."""
    store = open_store(store_url, tmp_path / "data")
    post(store, counter([(T0, T0 + 10**9, 1.0)], 2))
    (key,) = _series(store)
    s = table(OtlpSeries).c

    def seen(ago: timedelta) -> None:
        with store.engine.begin() as conn:
            conn.execute(update(table(OtlpSeries)).values(seen_at=utcnow() - ago))

    seen(timedelta(hours=50))
    post(store, counter([(T0, T0 + 2 * 10**9, 3.0)], 2))
    assert stored_cpu_seconds(store, tmp_path / "data") == 1.0 + 3.0  # no baseline: whole
    seen(timedelta(minutes=10))
    kept = _series(store)[key][3]
    post(store, counter([(T0, T0 + 3 * 10**9, 4.0)], 2))
    assert _series(store)[key] == (T0, T0 + 3 * 10**9, 4.0, kept)  # seen_at unchanged
    seen(timedelta(hours=2))
    post(store, counter([(T0, T0 + 4 * 10**9, 4.5)], 2))
    with store.engine.connect() as conn:
        age = utcnow() - conn.execute(select(s.seen_at)).scalar_one()
    assert age < timedelta(minutes=5)
    assert stored_cpu_seconds(store, tmp_path / "data") == 1.0 + 3.0 + 1.0 + 0.5
    store.engine.dispose()
