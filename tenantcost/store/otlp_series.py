"""OTLP points into the store: each series' last point, and the usage batches of a request.

:func:`ingest_points` stores what :func:`tenantcost.otlp.points` read from one
``POST /v1/metrics``. It reads the kept last point of the request's series (table
``otlp_series``), plans the increments (:func:`tenantcost.otlp.plan`) and stores each calendar
month's usage as one ``sum`` batch through the usage path of ``ingest usage``
(:func:`tenantcost.store.ingest.ingest_usage_source`: the usage reader's checks, the store's
checks, atomic batches, closed months refused), with every metric column of the store (0 where
no point gave one). The series' new last points are written in that batch's own transaction
(its ``in_transaction`` hook), so a batch and the baselines it consumed commit together: a
crash, a lost answer or a restart neither counts a point twice nor loses it.

**Concurrency.** The plan is made before the batch takes the store's write lock (the batch is
built from it), so the hook first checks that the series it advances still hold the points the
plan started from; if another request (an exporter's retry racing its first attempt, another
worker) moved one meanwhile, the batch rolls back and the request is planned again from the
new points. What an earlier month's committed batch already consumed is then "received", so
nothing is added twice.

**Refused months.** A month whose batch is refused refuses its points with that reason. If
the month is closed (and only then), its series still advance (in a transaction of their
own): the next point adds only what is new, in its own month, rather than carrying the
closed month's usage into the next. A batch refused by another store check advances nothing.

**Expiry.** A series not seen for ``expiry`` (the settings' ``otlp.series_expiry_hours``,
:data:`EXPIRY` by default) is not read, and every write deletes it (a restarted process
exports new series: ``service.instance.id`` changes). A kept point dated more than an hour
ahead of now (left by a version that took such points) is not read either: it would make
every true point look received already.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, delete, update

from tenantcost.errors import InputError
from tenantcost.otlp import MAX_AHEAD_NS, STATE_COLUMNS, MonthPart, Plan, Points, plan
from tenantcost.store.data import Store
from tenantcost.store.lock import StoreLocked, write_transaction
from tenantcost.store.models import OtlpSeries, table, utcnow
from tenantcost.store.month_state import MonthClosed

EXPIRY = timedelta(hours=48)
ATTEMPTS = 5
"""Plans of one request before giving up on a series that keeps moving (503, retried)."""
CHUNK = 2_000
"""Keys per ``IN (...)`` list (SQLite and PostgreSQL limit a statement's parameters)."""


class _Moved(Exception):
    """A series the plan advances holds another point than the plan started from."""


@dataclass
class Outcome:
    """What one request did."""

    refused: list[pd.DataFrame]
    """``point, reason`` frames (the plan's and refused months')."""
    received: int = 0
    batches: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def ingest_points(
    store: Store,
    found: Points,
    mapped: Sequence[str],
    *,
    actor: str,
    origin: str,
    wait: float,
    expiry: timedelta = EXPIRY,
) -> Outcome:
    """Store a request's points (see the module docstring); raises
    :class:`~tenantcost.store.lock.StoreLocked` when the store stays locked."""
    columns = _batch_columns(store, mapped)
    keys = found.rows["key"].unique()  # made Python text a chunk at a time (_fetch)
    for _ in range(ATTEMPTS):
        with store.engine.connect() as conn:
            kept = _fetch(conn, keys, expiry)
        planned = plan(found.rows, kept, columns)
        try:
            outcome = _store(store, planned, kept, actor=actor, origin=origin, wait=wait,
                             expiry=expiry)  # fmt: skip
        except _Moved:
            continue
        outcome.refused.insert(0, found.refused)  # what could never be usage
        return outcome
    raise StoreLocked("the series of this export kept changing under concurrent exports")


Kept: TypeAlias = pd.DataFrame
"""Series' kept last points: ``start, time, value`` (int64, int64, float64) indexed by key,
as :func:`tenantcost.otlp.plan` reads them. A frame, not a dict of tuples: an export may
hold 100,000 series, and Python objects per series cost about 250 bytes each."""


def read_state(engine: Engine, keys: Sequence[str], expiry: timedelta = EXPIRY) -> pd.DataFrame:
    """The kept last point of those series that have one, indexed by key."""
    with engine.connect() as conn:
        return _fetch(conn, keys, expiry)


def state_frame(rows: Sequence[tuple[Any, ...]]) -> Kept:
    """``(key, start, time, value)`` rows as :data:`Kept`."""
    frame = pd.DataFrame(list(rows), columns=STATE_COLUMNS)
    return frame.astype(
        {"key": object, "start": "int64", "time": "int64", "value": "float64"}
    ).set_index("key")  # fmt: skip (object keys: Arrow text is converted at each lookup)


def _fetch(conn: Connection, keys: Any, expiry: timedelta) -> Kept:
    """The kept points of ``keys``, on the connection's own DBAPI cursor (in its transaction),
    a chunk of keys per statement: SQLAlchemy's compiling of thousands of bound parameters
    and its per-row result processing cost more than the query. Expired series, and points
    more than an hour ahead, are not read (the module docstring, "Expiry")."""
    cursor = _cursor(conn)
    mark = _mark(conn)
    now = utcnow()
    oldest = _stored_time(conn, now - expiry)
    latest = time.time_ns() + MAX_AHEAD_NS
    frames = [state_frame([])]
    for first in range(0, len(keys), CHUNK):
        chunk = tuple(str(k) for k in keys[first : first + CHUNK])
        cursor.execute(
            "SELECT key, start_unix_nano, time_unix_nano, value FROM otlp_series "
            f"WHERE key IN ({', '.join([mark] * len(chunk))}) "
            f"AND seen_at >= {mark} AND time_unix_nano <= {mark}",
            (*chunk, oldest, latest),
        )
        rows = cursor.fetchall()
        if rows:
            frames.append(state_frame(rows))
    return pd.concat(frames) if len(frames) > 1 else frames[0]


def _cursor(conn: Connection) -> Any:
    connection = conn.connection.dbapi_connection
    assert connection is not None
    return connection.cursor()


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def _stored_time(conn: Connection, moment: datetime) -> Any:
    """``moment`` as the ``seen_at`` column stores it (UTC), for the DBAPI cursor."""
    bind = table(OtlpSeries).c.seen_at.type.bind_processor(conn.dialect)
    return bind(moment) if bind is not None else moment


def _replace(conn: Connection, new: Kept, now: datetime) -> None:
    """Delete the series' kept points and insert ``new`` (an executemany per chunk of
    series: the rows are made as Python tuples a chunk at a time)."""
    cursor = _cursor(conn)
    mark = _mark(conn)
    at = _stored_time(conn, now)
    for first in range(0, len(new), CHUNK):
        part = new.iloc[first : first + CHUNK]
        chunk = tuple(part.index.tolist())
        cursor.execute(
            f"DELETE FROM otlp_series WHERE key IN ({', '.join([mark] * len(chunk))})", chunk
        )
        cursor.executemany(
            "INSERT INTO otlp_series (key, start_unix_nano, time_unix_nano, value, seen_at) "
            f"VALUES ({', '.join([mark] * 5)})",
            [(k, a, t, v, at) for k, a, t, v in zip(chunk, part["start"].tolist(),
             part["time"].tolist(), part["value"].tolist(), strict=True)],
        )  # fmt: skip


def _store(
    store: Store,
    planned: Plan,
    kept: Kept,
    *,
    actor: str,
    origin: str,
    wait: float,
    expiry: timedelta,
) -> Outcome:
    """Each month's batch with its series, in month order; then the seen series refreshed."""
    outcome = Outcome([planned.refused], planned.received)
    expected = kept
    written = pd.Index([], dtype=object)
    for number, part in enumerate(planned.parts, 1):
        new = _as_kept(part.state)
        written = written.union(new.index)
        last = number == len(planned.parts)
        seen = sorted(set(planned.seen).difference(written)) if last else None
        writer = _StateWriter(new, _held(expected, new.index), seen, expiry)
        try:
            if part.usage.empty:
                with write_transaction(store.engine, wait) as conn:
                    writer(conn)
            else:
                uid, notes = _ingest_part(store, part, actor, origin, wait, writer)
                outcome.batches.append(uid)
                outcome.warnings.extend(notes)
        except InputError as exc:  # a closed month (MonthClosed), a store check
            outcome.refused.append(pd.DataFrame({"point": part.points, "reason": exc.message}))
            if not isinstance(exc, MonthClosed):  # only a closed month advances its series
                written = written.difference(new.index)
                new = new.iloc[:0]
                writer = _StateWriter(new, new, seen, expiry)
            with write_transaction(store.engine, wait) as conn:
                writer(conn)
        expected = pd.concat([expected[new.index.get_indexer(expected.index) < 0], new])
    if not planned.parts and planned.seen:  # only points received already: still seen
        with write_transaction(store.engine, wait) as conn:
            _refresh(conn, planned.seen, utcnow(), expiry)
    return outcome


def _as_kept(state: pd.DataFrame) -> Kept:
    kept = state.astype({"key": object}).set_index("key")[["start", "time", "value"]]
    return kept.astype({"start": "int64", "time": "int64", "value": "float64"})


def _held(kept: Kept, keys: pd.Index) -> Kept:
    """The kept points of ``keys`` (unique) that have one, in a stable order (for comparing).
    A lookup of ``kept`` in ``keys``' hash table: ``isin`` converted all of ``keys``."""
    return kept[keys.get_indexer(kept.index) >= 0].sort_index()


@dataclass(frozen=True)
class _StateWriter:
    """The ``in_transaction`` hook: check the series still hold ``expected`` (a series
    absent from it has no kept point), then keep their ``new`` last points; for the
    request's last batch, also refresh its other ``seen`` series and delete the expired
    ones."""

    new: Kept
    expected: Kept
    seen: list[str] | None
    expiry: timedelta

    def __call__(self, conn: Connection, _done: object = None) -> None:
        now = utcnow()
        held = _held(_fetch(conn, self.new.index.tolist(), self.expiry), self.new.index)
        if not held.equals(self.expected):
            raise _Moved()
        _replace(conn, self.new, now)
        if self.seen is not None:
            _refresh(conn, self.seen, now, self.expiry)


def _refresh(conn: Connection, keys: list[str], now: datetime, expiry: timedelta) -> None:
    """Mark the request's series seen now, and delete those not seen for ``expiry``."""
    s = table(OtlpSeries)
    conn.execute(delete(s).where(s.c.seen_at < now - expiry))
    for first in range(0, len(keys), CHUNK):
        chunk = keys[first : first + CHUNK]
        conn.execute(update(s).where(s.c.key.in_(chunk)).values(seen_at=now))


def _ingest_part(
    store: Store, part: MonthPart, actor: str, origin: str, wait: float, writer: _StateWriter
) -> tuple[str, tuple[str, ...]]:
    """One month's usage as one ``sum`` batch, read back by the usage reader (its checks,
    as ``ingest usage`` and ``POST /api/v1/usage``), the series written in its transaction."""
    from tenantcost.readers.usage import read_usage
    from tenantcost.split import connect
    from tenantcost.store.ingest import ingest_usage_source
    from tenantcost.usage_source import FrameUsage

    with tempfile.TemporaryDirectory(prefix="tenantcost-otlp-") as tmp:
        path = Path(tmp) / "otlp.parquet"
        part.usage.to_parquet(path, index=False)
        try:
            source = FrameUsage(read_usage([path]), origin=origin)
            done = ingest_usage_source(store, source, connect(), period=None, mode="sum",
                                       actor=actor, wait=wait, in_transaction=writer)  # fmt: skip
        except InputError as exc:  # named as the exporter knows it, not by a temporary file
            kind = MonthClosed if isinstance(exc, MonthClosed) else InputError  # kept apart
            raise kind(exc.one_line().replace(str(path), f"{part.month} usage")) from None
    return done.uid, done.warnings


def _batch_columns(store: Store, mapped: Sequence[str]) -> list[str]:
    """The metric columns of the stored usage (of its latest batch, as ingest compares), then
    the mapped ones it lacks (a batch with those is refused by ingest, saying why)."""
    from tenantcost.split import connect
    from tenantcost.store.ingest import stored_metrics

    with store.engine.connect() as conn:
        latest = stored_metrics(conn, store.data, connect())
    stored = latest[1] if latest is not None else []
    return [*stored, *(c for c in mapped if c not in stored)]


def rejected_points(outcome: Outcome) -> np.ndarray:
    """The distinct data points refused (a point feeding two columns counts once)."""
    frames = [f["point"].to_numpy(dtype="int64") for f in outcome.refused if len(f)]
    return np.unique(np.concatenate(frames)) if frames else np.array([], dtype="int64")
