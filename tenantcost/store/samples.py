"""Gauge samples in the store: the declared kinds (``rules load``), sample batches (``ingest
usage`` of files with a ``time`` column) and what ``run`` reads back.

A sample batch is a ``usage`` batch (listed, withdrawn and named by runs like any) whose rows
are ``usage_sample`` rows, not Parquet files: a level at an instant belongs to no window, so
it has no cell to replace. The same (metric, service, client, time) sent again by a later
batch is the same instant measured again, and its level wins when read (the larger batch id,
:mod:`tenantcost.gauges`). A sample holds up to ``stale_after`` past its time, so a batch is
refused when any month it can reach is closed. The kinds are declared by the rule files'
``metrics:`` (:mod:`tenantcost.store.usage_metrics`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from sqlalchemy import Connection, and_, func, insert, select, tuple_

from tenantcost.config.metrics import Metric
from tenantcost.errors import InputError
from tenantcost.gauge_usage import is_sample_input
from tenantcost.readers.samples import read_samples
from tenantcost.store.data import Store
from tenantcost.store.ingest import Ingested, InTransaction, check_mode, ingest_usage
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import Batch, UsageSample, table, utcnow
from tenantcost.store.month_state import refuse_if_closed
from tenantcost.store.rules import sha256_hex
from tenantcost.store.usage_metrics import stored_gauges
from tenantcost.usage_source import is_url
from tenantcost.windows import Period

HOUR_US = 3_600_000_000
LOOK_BACK_US = 31 * 24 * HOUR_US
"""How far before a period a series' last sample is looked for, to name it stale (a series
silent for longer is a client gone: it is not reported every month)."""


def ingest_usage_files(
    store: Store,
    paths: Sequence[str | Path],
    *,
    period: Period | None,
    mode: str,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
) -> Ingested:
    """``ingest usage``: window files as a usage batch (:func:`~tenantcost.store.ingest.
    ingest_usage`), sample files (a ``time`` column) as a sample batch; one batch is one of
    the two."""
    sampled = [p for p in paths if not is_url(p) and is_sample_input(Path(p))]
    if not sampled:
        return ingest_usage(store, paths, period=period, mode=mode, actor=actor,
                            dry_run=dry_run, wait=wait)  # fmt: skip
    if len(sampled) < len(paths):
        other = next(p for p in paths if p not in sampled)
        raise InputError(
            f"gauge samples (a time column, {sampled[0]}) and window usage ({other}) in one "
            "ingest: one batch is one of the two; ingest them apart",
            file=str(other),
        )
    if check_mode(mode) == "sum":
        raise InputError(
            "--mode sum: gauge samples are levels, not counts; a sample re-sent for the same "
            "instant replaces its level (ingest them without --mode)",
            file=", ".join(str(p) for p in paths),
        )
    return ingest_samples(store, paths, period=period, actor=actor, dry_run=dry_run, wait=wait)


def ingest_samples(
    store: Store,
    paths: Sequence[str | Path],
    *,
    period: Period | None,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
    in_transaction: InTransaction | None = None,
    origin: str | None = None,
) -> Ingested:
    """Store the samples of ``paths`` as one usage batch (all or nothing); ``origin`` is the
    batch's source (default: the paths)."""
    with store.engine.connect() as conn:
        gauges = stored_gauges(conn)
    given = ", ".join(str(p) for p in paths)
    if not gauges:
        raise InputError(
            "these are gauge samples (a time column) but the store declares no gauge: load a "
            "rule file whose metrics: declares them (kind: gauge) first",
            file=given,
        )
    samples = read_samples(paths, gauges)
    skipped = 0
    if period is not None:
        inside = samples["t_us"].between(_us(period.start), _us(period.end) - 1)
        skipped = int((~inside).sum())
        samples = samples.loc[inside].reset_index(drop=True)
    if samples.empty:
        raise InputError("no samples to ingest" + (" in the period" if skipped else ""),
                         file=given)  # fmt: skip
    return store_samples(store, samples, gauges, origin=origin or given, actor=actor,
                         dry_run=dry_run, wait=wait, in_transaction=in_transaction,
                         skipped=skipped)  # fmt: skip


def store_samples(
    store: Store,
    samples: pd.DataFrame,
    gauges: dict[str, Metric],
    *,
    origin: str,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
    in_transaction: InTransaction | None = None,
    skipped: int = 0,
) -> Ingested:
    """Store checked samples (``metric, service, client, t_us, value``: the canonical sample
    table of :mod:`tenantcost.readers.samples`, every metric one of ``gauges``, no instant
    twice) as one usage batch, all or nothing; refused when a month they reach is closed."""
    first, last = int(samples["t_us"].min()), int(samples["t_us"].max())
    window_from = _at(first // HOUR_US * HOUR_US)
    window_to = _at(last // HOUR_US * HOUR_US + HOUR_US)
    reach = max(gauges[m].stale_seconds for m in samples["metric"].unique()) * 1_000_000
    sha = _digest(samples)
    done = Ingested("usage", "", "replace", len(samples), 0, 0, skipped, window_from, window_to,
                    sha, 0, 0, dry_run=dry_run)  # fmt: skip
    if dry_run:
        return done
    uid = uuid.uuid4().hex
    with write_transaction(store.engine, wait) as conn:
        refuse_if_closed(conn, window_from.to_pydatetime(), _at(last + reach).to_pydatetime(),
                         "ingest usage")  # fmt: skip
        inserted = conn.execute(
            insert(table(Batch)).values(
                uid=uid, kind="usage", source=origin, mode="replace", rows=len(samples),
                sha256=sha, window_from=window_from.to_pydatetime(),
                window_to=window_to.to_pydatetime(), actor=actor, status="committed",
                created_at=utcnow())
        ).inserted_primary_key  # fmt: skip
        assert inserted is not None
        batch_id = int(inserted[0])
        _insert_samples(conn, samples, batch_id)
        done = Ingested("usage", uid, "replace", len(samples), 0, 0, skipped, window_from,
                        window_to, sha, 0, 0, dry_run=False)  # fmt: skip
        if in_transaction is not None:
            in_transaction(conn, done)
    return done


def _insert_samples(conn: Connection, samples: pd.DataFrame, batch_id: int) -> None:
    """Insert the samples as plain tuples through the driver's ``executemany`` (a dict per
    row through SQLAlchemy took three times as long for 240,000 samples)."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    columns = ("batch_id", "metric", "service", "client", "t_us", "value")
    sql = (
        f"INSERT INTO {UsageSample.__tablename__} ({', '.join(columns)}) "
        f"VALUES ({', '.join([mark] * len(columns))})"
    )
    rows = zip(
        [batch_id] * len(samples),
        samples["metric"].tolist(),
        samples["service"].tolist(),
        samples["client"].tolist(),
        samples["t_us"].astype("int64").tolist(),
        samples["value"].tolist(),
        strict=True,
    )
    conn.exec_driver_sql(sql, list(rows))


def stored_samples(
    conn: Connection, gauges: dict[str, Metric], start: pd.Timestamp, end: pd.Timestamp
) -> pd.DataFrame:
    """The committed samples that can reach ``[start, end)`` (from ``start - stale_after``),
    and each series' latest sample before those (within :data:`LOOK_BACK_US`), to name it
    stale: ``metric, service, client, t_us, value, rank`` (rank: the batch id)."""
    s, b = table(UsageSample).c, table(Batch).c
    reach = max((g.stale_seconds for g in gauges.values()), default=0) * 1_000_000
    lo, hi = _us(start) - reach, _us(end)
    live = and_(b.status == "committed", s.metric.in_(list(gauges)))
    columns = (s.metric, s.service, s.client, s.t_us, s.value, b.id.label("rank"))
    near = select(*columns).join_from(table(UsageSample), table(Batch), b.id == s.batch_id)
    latest = (
        select(s.metric, s.service, s.client, func.max(s.t_us).label("t_us"))
        .join_from(table(UsageSample), table(Batch), b.id == s.batch_id)
        .where(live, s.t_us < lo, s.t_us >= lo - LOOK_BACK_US)
        .group_by(s.metric, s.service, s.client)
        .subquery()
    )
    key = tuple_(s.metric, s.service, s.client, s.t_us)
    before = near.where(live, key.in_(select(latest)))
    query = near.where(live, s.t_us >= lo, s.t_us < hi).union_all(before)
    rows = conn.execute(query).all()
    return pd.DataFrame(
        [tuple(r) for r in rows],
        columns=["metric", "service", "client", "t_us", "value", "rank"],
    ).astype({"t_us": "int64", "rank": "int64"})


def _digest(samples: pd.DataFrame) -> str:
    ordered = samples.sort_values(["metric", "service", "client", "t_us"], kind="stable")
    lines = (
        ordered["metric"] + " " + ordered["service"] + " " + ordered["client"] + " "
        + ordered["t_us"].astype(str) + " " + ordered["value"]
    )  # fmt: skip
    return sha256_hex("\n".join(lines.tolist()))


def _us(moment: pd.Timestamp) -> int:
    return int(pd.Timestamp(moment).value // 1000)


def _at(t_us: int) -> pd.Timestamp:
    return pd.Timestamp(t_us * 1000, tz="UTC")
