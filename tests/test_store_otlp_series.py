"""The OTLP series state in the store (tenantcost.store.otlp_series) on SQLite and PostgreSQL:
a series not seen for 48 hours expires, a seen one is kept; a month the store refuses (a
batch lacking the column a stored rule splits by) refuses its points with the store's reason,
and its series do not advance (only a closed month's do)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pandas as pd
from sqlalchemy import insert, select

from tenantcost.config.otlp import OtlpSettings
from tenantcost.otlp import points
from tenantcost.store.data import DataDir, Store
from tenantcost.store.engine import open_engine
from tenantcost.store.models import Batch, BatchFile, OtlpSeries, table, utcnow
from tenantcost.store.otlp_series import Outcome, ingest_points, read_state
from tenantcost.store.rules import load_rule_file
from tenantcost.store.schema import upgrade
from tenantcost.store.settings import resolve_settings

from .test_otlp import SETTINGS, T0, counter


def open_store(url: str, data: Path) -> Store:
    engine = open_engine(resolve_settings(db=url, environ={}), create=True)
    upgrade(engine)
    return Store(engine, DataDir(str(data)))


def post(store: Store, request: object, settings: OtlpSettings = SETTINGS) -> Outcome:
    found = points(request, settings)
    return ingest_points(store, found, list(settings.metrics), actor="test", origin="test",
                         wait=5)  # fmt: skip


def test_series_unseen_for_48_hours_expire(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url, tmp_path / "data")
    with store.engine.begin() as conn:
        conn.execute(insert(table(OtlpSeries)), [
            {"key": "old", "start_unix_nano": 1, "time_unix_nano": 2, "value": 3.0,
             "seen_at": utcnow() - timedelta(hours=49)},
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
