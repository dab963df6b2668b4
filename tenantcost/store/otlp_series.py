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

**Refused months.** A month whose batch is refused (closed, or a store check) refuses its
points with that reason, and its series still advance (in a transaction of their own): the
next point adds only what is new, in its own month.

**Expiry.** Every write deletes series not seen for :data:`EXPIRY` (a restarted process
exports new series: ``service.instance.id`` changes).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, delete, update

from tenantcost.errors import InputError
from tenantcost.otlp import STATE_COLUMNS, MonthPart, Plan, Points, plan
from tenantcost.store.data import Store
from tenantcost.store.lock import StoreLocked, write_transaction
from tenantcost.store.models import OtlpSeries, table, utcnow

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
) -> Outcome:
    """Store a request's points (see the module docstring); raises
    :class:`~tenantcost.store.lock.StoreLocked` when the store stays locked."""
    columns = _batch_columns(store, mapped)
    keys = found.rows["key"].unique().tolist()
    for _ in range(ATTEMPTS):
        with store.engine.connect() as conn:
            kept = _fetch(conn, keys)
        planned = plan(found.rows, state_frame(kept), columns)
        try:
            outcome = _store(store, planned, kept, actor=actor, origin=origin, wait=wait)
        except _Moved:
            continue
        outcome.refused.insert(0, found.refused)  # what could never be usage
        return outcome
    raise StoreLocked("the series of this export kept changing under concurrent exports")


Kept = dict[str, tuple[int, int, float]]
"""Series key -> its kept last point (start, time, value), as Python ints and float."""


def read_state(engine: Engine, keys: Sequence[str]) -> pd.DataFrame:
    """The kept last point of those series that have one, indexed by key."""
    with engine.connect() as conn:
        return state_frame(_fetch(conn, keys))


def state_frame(kept: Kept) -> pd.DataFrame:
    """:data:`Kept` as the frame :func:`tenantcost.otlp.plan` reads (indexed by key)."""
    frame = pd.DataFrame([(k, *v) for k, v in kept.items()], columns=STATE_COLUMNS)
    return frame.astype({"start": "int64", "time": "int64", "value": "float64"}).set_index("key")


def _fetch(conn: Connection, keys: Sequence[str]) -> Kept:
    """The kept points of ``keys``, on the connection's own DBAPI cursor (in its transaction),
    a chunk of keys per statement: SQLAlchemy's compiling of thousands of bound parameters
    and its per-row result processing cost more than the query."""
    cursor = _cursor(conn)
    mark = _mark(conn)
    kept: Kept = {}
    for first in range(0, len(keys), CHUNK):
        chunk = tuple(keys[first : first + CHUNK])
        cursor.execute(
            "SELECT key, start_unix_nano, time_unix_nano, value FROM otlp_series "
            f"WHERE key IN ({', '.join([mark] * len(chunk))})",
            chunk,
        )
        kept.update((str(k), (int(a), int(t), float(v))) for k, a, t, v in cursor.fetchall())
    return kept


def _cursor(conn: Connection) -> Any:
    connection = conn.connection.dbapi_connection
    assert connection is not None
    return connection.cursor()


def _mark(conn: Connection) -> str:
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def _replace(conn: Connection, new: Kept, now: datetime) -> None:
    """Delete the series' kept points and insert ``new`` (one executemany)."""
    cursor = _cursor(conn)
    mark = _mark(conn)
    keys = list(new)
    for first in range(0, len(keys), CHUNK):
        chunk = tuple(keys[first : first + CHUNK])
        cursor.execute(
            f"DELETE FROM otlp_series WHERE key IN ({', '.join([mark] * len(chunk))})", chunk
        )
    seen = table(OtlpSeries).c.seen_at.type.bind_processor(conn.dialect)
    at = seen(now) if seen is not None else now  # as the column type stores it (UTC)
    rows = [(k, a, t, v, at) for k, (a, t, v) in new.items()]
    if rows:  # a row per series, not per point
        cursor.executemany(
            "INSERT INTO otlp_series (key, start_unix_nano, time_unix_nano, value, seen_at) "
            f"VALUES ({', '.join([mark] * 5)})",
            rows,
        )


def _store(
    store: Store, planned: Plan, kept: Kept, *, actor: str, origin: str, wait: float
) -> Outcome:
    """Each month's batch with its series, in month order; then the seen series refreshed."""
    outcome = Outcome([planned.refused], planned.received)
    expected = dict(kept)
    written: set[str] = set()
    for number, part in enumerate(planned.parts, 1):
        new = _as_kept(part.state)
        written.update(new)
        last = number == len(planned.parts)
        seen = sorted(set(planned.seen) - written) if last else None
        writer = _StateWriter(new, {k: expected.get(k) for k in new}, seen)
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
            with write_transaction(store.engine, wait) as conn:
                writer(conn)
        expected.update(new)
    if not planned.parts and planned.seen:  # only points received already: still seen
        with write_transaction(store.engine, wait) as conn:
            _refresh(conn, planned.seen, utcnow())
    return outcome


def _as_kept(state: pd.DataFrame) -> Kept:
    rows = zip(state["key"].tolist(), state["start"].tolist(), state["time"].tolist(),
               state["value"].tolist(), strict=True)  # fmt: skip
    return {k: (int(a), int(t), float(v)) for k, a, t, v in rows}


@dataclass(frozen=True)
class _StateWriter:
    """The ``in_transaction`` hook: check the series still hold ``expected`` (None: no kept
    point), then keep their ``new`` last points; for the request's last batch, also refresh
    its other ``seen`` series and delete the expired ones."""

    new: Kept
    expected: dict[str, tuple[int, int, float] | None]
    seen: list[str] | None

    def __call__(self, conn: Connection, _done: object = None) -> None:
        keys = list(self.new)
        now = utcnow()
        held = _fetch(conn, keys)
        if any(held.get(k) != v for k, v in self.expected.items()):
            raise _Moved()
        _replace(conn, self.new, now)
        if self.seen is not None:
            _refresh(conn, self.seen, now)


def _refresh(conn: Connection, keys: list[str], now: datetime) -> None:
    """Mark the request's series seen now, and delete those not seen for :data:`EXPIRY`."""
    s = table(OtlpSeries)
    conn.execute(delete(s).where(s.c.seen_at < now - EXPIRY))
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
            raise InputError(exc.one_line().replace(str(path), f"{part.month} usage")) from None
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
