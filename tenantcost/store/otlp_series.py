"""OTLP points into the store: each series' last point, and the usage batches of a request.

:func:`ingest_points` stores what :func:`tenantcost.otlp.points` read from one
``POST /v1/metrics``. It reads the kept last point of the request's series (table
``otlp_series``), plans the increments (:func:`tenantcost.otlp.plan`) and stores each calendar
month's usage as one ``sum`` batch through the usage path of ``ingest usage``
(:func:`tenantcost.store.ingest.ingest_usage_source`: the usage reader's checks, the store's
checks, atomic batches, closed months refused), with the mapped counter columns (ingest adds 0
to the stored columns a ``sum`` batch lacks). The series' new last points are written in that
batch's own transaction (its ``in_transaction`` hook), so a batch and the baselines it
consumed commit together: a crash, a lost answer or a restart neither counts a point twice nor
loses it.

**Concurrency.** The plan is made before the batch takes the store's write lock (the batch is
built from it), so the hook checks that the series it advances still hold the points the plan
started from, in the same pass that writes them: each update names the point it replaces and
each insert a series that had none, so the rows written tell whether a series moved
(:func:`_advance`). If another request (an exporter's retry racing its first attempt, another
worker) moved one meanwhile, the batch rolls back and the request is planned again from the
new points. What an earlier month's committed batch already consumed is then "received", so
nothing is added twice. The series' points are read and written as columns, a statement per
10,000 series on SQLite and one per request on PostgreSQL (arrays), never a Python object
per series beyond the driver's rows.

**Refused months.** A month whose batch is refused refuses its points with that reason. If
the month is closed (and only then), its series still advance (in a transaction of their
own): the next point adds only what is new, in its own month, rather than carrying the
closed month's usage into the next. A batch refused by another store check advances nothing.

**Gauges.** The request's gauge samples (:attr:`tenantcost.otlp.Points.samples`) are stored
after its counters, one sample batch per calendar month of their times
(:func:`tenantcost.store.samples.store_samples`: refused when a month a level reaches is
closed), each refusing its own points only. A sample has no series state: a retried export
stores its levels again, as a later batch re-sending the same instants, which changes no
level.

**Expiry.** A series not seen for ``expiry`` (the settings' ``otlp.series_expiry_hours``,
:data:`EXPIRY` by default) is not read, and every write deletes it (a restarted process
exports new series: ``service.instance.id`` changes). A series' ``seen_at`` is refreshed
when it is older than ``expiry / 48`` (an hour by default), not at every export: rewriting
it moved the row in its index, which cost as much as writing the point itself. So a series
is forgotten once not seen for between ``expiry`` and ``expiry + expiry / 48`` (48 to 49
hours), never sooner. A kept point dated more than an hour
ahead of now (left by a version that took such points) is not read either: it would make
every true point look received already.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, delete, update

from tenantcost.errors import InputError
from tenantcost.otlp import MAX_AHEAD_NS, MonthPart, Plan, Points, plan
from tenantcost.readers.samples import SAMPLES_COLUMNS
from tenantcost.store.data import Store
from tenantcost.store.lock import StoreLocked, write_transaction
from tenantcost.store.models import OtlpSeries, table, utcnow
from tenantcost.store.month_state import MonthClosed

EXPIRY = timedelta(hours=48)
ATTEMPTS = 5
"""Plans of one request before giving up on a series that keeps moving (503, retried)."""
CHUNK = 10_000
"""Keys per ``IN (...)`` list on SQLite (at most 32,766 parameters a statement)."""


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
    """Store a request's points (see the module docstring); ``mapped`` are the counter
    columns of the settings (a batch lacking a stored column adds 0 to it: ingest fills it);
    raises :class:`~tenantcost.store.lock.StoreLocked` when the store stays locked."""
    keys = found.rows["key"].unique()  # object text, as the frame holds it
    for _ in range(ATTEMPTS):
        with store.engine.connect() as conn:
            window = _Window.now(conn, expiry)
            kept = _fetch(conn, keys, window)
        planned = plan(found.rows, kept, list(mapped))
        try:
            with _WRITING:
                outcome = _store(store, planned, kept, window, actor=actor, origin=origin,
                                 wait=wait, expiry=expiry)  # fmt: skip
        except _Moved:
            continue
        outcome.refused.insert(0, found.refused)  # what could never be usage
        if len(found.samples):
            _store_samples(store, found.samples, outcome, actor=actor, origin=origin, wait=wait)
        return outcome
    raise StoreLocked("the series of this export kept changing under concurrent exports")


def _store_samples(
    store: Store, samples: pd.DataFrame, outcome: Outcome, *, actor: str, origin: str,
    wait: float
) -> None:  # fmt: skip
    """The request's gauge samples, one sample batch per calendar month of their times; a
    month the store refuses refuses its own points (with the store's reason)."""
    from tenantcost.store.samples import store_samples
    from tenantcost.store.usage_metrics import stored_gauges

    with store.engine.connect() as conn:
        gauges = stored_gauges(conn)  # a kind never changes: those points() took are here
    month = samples["t_us"].to_numpy().astype("datetime64[us]").astype("datetime64[M]")
    columns = [c for c in SAMPLES_COLUMNS if c != "origin"]
    for this in np.unique(month):
        part = samples[month == this]
        try:
            done = store_samples(store, part[columns].reset_index(drop=True), gauges,
                                 origin=origin, actor=actor, wait=wait)  # fmt: skip
        except InputError as exc:  # a closed month a level reaches
            outcome.refused.append(pd.DataFrame({"point": part["point"].to_numpy(),
                                                 "reason": exc.message}))  # fmt: skip
            continue
        outcome.batches.append(done.uid)


Kept: TypeAlias = pd.DataFrame
"""Series' kept last points: ``start, time, value`` (int64, int64, float64) indexed by key,
as :func:`tenantcost.otlp.plan` reads them. A frame, not a dict of tuples: an export may
hold 100,000 series, and Python objects per series cost about 250 bytes each."""


@dataclass(frozen=True)
class _Window:
    """Which kept points are read: seen since ``oldest`` (``seen_at`` as the column stores
    it) and dated at most ``latest`` (ns). A point outside it reads as no point; the write
    that replaces it checks it is still outside (:class:`_StateWriter`). A point seen
    before ``stale`` has its ``seen_at`` refreshed when it is written."""

    oldest: Any
    latest: int
    stale: Any

    @staticmethod
    def now(conn: Connection, expiry: timedelta) -> _Window:
        now = utcnow()
        return _Window(
            _stored_time(conn, now - _forgotten(expiry)),
            time.time_ns() + MAX_AHEAD_NS,
            _stored_time(conn, now - expiry / 48),
        )


def _forgotten(expiry: timedelta) -> timedelta:
    """How long since its ``seen_at`` a series is forgotten: ``seen_at`` is refreshed once
    older than ``expiry / 48``, so it may be that much older than the last export."""
    return expiry + expiry / 48


def read_state(engine: Engine, keys: Sequence[str], expiry: timedelta = EXPIRY) -> pd.DataFrame:
    """The kept last point of those series that have one, indexed by key."""
    with engine.connect() as conn:
        kept = _fetch(conn, np.asarray(keys, dtype=object), _Window.now(conn, expiry))
    return kept[["start", "time", "value"]]


def state_frame(rows: Sequence[tuple[Any, ...]]) -> Kept:
    """``(key, start, time, value[, fresh[, rowid]])`` rows as :data:`Kept`, with ``fresh``
    (its ``seen_at`` needs no refresh; False where not given) and ``rowid`` (-1 where
    unknown), built column by column: a frame made from 100,000 tuples infers each cell's
    type, and ``zip(*rows)`` makes an iterator per row."""
    index = pd.Index(np.array([r[0] for r in rows], dtype=object), dtype=object, name="key")
    width = len(rows[0]) if rows else 4
    return pd.DataFrame(
        {
            "start": np.array([r[1] for r in rows], dtype="int64"),
            "time": np.array([r[2] for r in rows], dtype="int64"),
            "value": np.array([r[3] for r in rows], dtype="float64"),
            "fresh": np.array([bool(r[4]) for r in rows] if width > 4 else False, dtype=bool)
            if rows
            else np.zeros(0, dtype=bool),
            "rowid": np.array([r[5] for r in rows] if width > 5 else -1, dtype="int64")
            if rows
            else np.zeros(0, dtype="int64"),
        },
        index=index,
    )  # object keys: Arrow text would be converted at each lookup


_SELECT = (
    "SELECT key, start_unix_nano, time_unix_nano, value, seen_at >= {0} AS fresh{1} "
    "FROM otlp_series WHERE "
)


def _fetch(conn: Connection, keys: np.ndarray, window: _Window) -> Kept:
    """The kept points of ``keys`` (unique), on the connection's own DBAPI cursor (in its
    transaction): one statement with an array of keys on PostgreSQL; on SQLite, a statement
    per :data:`CHUNK` series, by their row ids where this process knows them (:data:`_ROWIDS`,
    half the lookups of a key), then by key for the others (a row id whose row holds another
    key, or none, is looked up by key: ids are reused). SQLAlchemy's compiling of bound
    parameters and its per-row result processing cost more than the query. Expired series,
    and points more than an hour ahead, are not read (the module docstring, "Expiry")."""
    cursor = _cursor(conn)
    frames = [state_frame([])]
    if _postgres(conn):
        for first in range(0, len(keys), CHUNK):
            cursor.execute(
                _SELECT.format("%s", "") + "key = ANY(%s::varchar[]) AND seen_at >= %s "
                "AND time_unix_nano <= %s",
                (window.stale, keys[first : first + CHUNK].tolist(), window.oldest,
                 window.latest),
            )  # fmt: skip
            frames.append(state_frame(cursor.fetchall()))
        return pd.concat(frames)
    bounds = (window.oldest, window.latest)
    select = _SELECT.format("?", ", rowid")
    where = "seen_at >= ? AND time_unix_nano <= ?"
    listed = keys.tolist()
    ids = list(map(_ROWIDS.get, listed))
    wanted = {i: k for i, k in zip(ids, listed, strict=True) if i is not None}  # id -> key
    known = list(wanted)
    del ids
    for first in range(0, len(known), CHUNK):  # rows made into columns a chunk at a time
        chunk = known[first : first + CHUNK]
        cursor.execute(select + f"rowid IN ({', '.join(['?'] * len(chunk))}) AND {where}",
                       (window.stale, *chunk, *bounds))  # fmt: skip
        frames.append(state_frame([r for r in cursor.fetchall() if wanted[r[5]] == r[0]]))
    del wanted, known
    if sum(len(f) for f in frames) < len(listed):
        read = pd.Index(np.concatenate([f.index.to_numpy() for f in frames]), dtype=object)
        missing = keys[read.get_indexer(keys) < 0].tolist() if len(read) else listed
        for first in range(0, len(missing), CHUNK):
            chunk = missing[first : first + CHUNK]
            cursor.execute(select + f"key IN ({', '.join(['?'] * len(chunk))}) AND {where}",
                           (window.stale, *chunk, *bounds))  # fmt: skip
            looked = cursor.fetchall()
            if len(_ROWIDS) + len(looked) > MAX_ROWIDS:
                _ROWIDS.clear()
            _ROWIDS.update((r[0], r[5]) for r in looked)
            frames.append(state_frame(looked))
    return pd.concat(frames)


_ROWIDS: dict[str, int] = {}
"""SQLite row ids of the series this process read (a row keeps its id when updated)."""
MAX_ROWIDS = 250_000
"""Row ids kept at most (about 40 MB), then forgotten all at once."""


def _cursor(conn: Connection) -> Any:
    connection = conn.connection.dbapi_connection
    assert connection is not None
    return connection.cursor()


def _postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def _stored_time(conn: Connection, moment: datetime) -> Any:
    """``moment`` as the ``seen_at`` column stores it (UTC), for the DBAPI cursor."""
    bind = table(OtlpSeries).c.seen_at.type.bind_processor(conn.dialect)
    return bind(moment) if bind is not None else moment


def _advance(conn: Connection, new: Kept, expected: Kept, window: _Window, now: datetime) -> None:
    """Write the series' ``new`` last points if they still hold ``expected`` (a key absent
    from it had no point in ``window``); raise :class:`_Moved` otherwise, which rolls the
    transaction back. One pass: each update names the point it replaces, and an insert
    replaces only a row that ``window`` did not read (expired, or ahead), so the number of
    rows written tells whether any series moved since it was read."""
    if not len(new):
        return
    at = expected.index.get_indexer(new.index)
    held = at >= 0
    was = expected.iloc[at[held]]
    now_stored = _stored_time(conn, now)
    keys = new.index.to_numpy(dtype=object)
    start, times, value = (new[c].to_numpy() for c in ("start", "time", "value"))
    cursor = _cursor(conn)
    if held.any():
        updated = _update(conn, cursor, keys[held], start[held], times[held], value[held], was,
                          now_stored)  # fmt: skip
        if updated != int(held.sum()):
            _ROWIDS.clear()  # a row id may hold another series now
            raise _Moved()
    if not held.all():
        fresh = ~held
        inserted = _insert(conn, cursor, keys[fresh], start[fresh], times[fresh], value[fresh],
                           window, now_stored)  # fmt: skip
        if inserted != int(fresh.sum()):
            raise _Moved()


def _update(conn: Connection, cursor: Any, keys: np.ndarray, start: np.ndarray,
            times: np.ndarray, value: np.ndarray, was: Kept, now: Any) -> int:  # fmt: skip
    """Update the rows that still hold ``was`` (their ``seen_at`` too unless ``fresh``);
    the number updated."""
    old = [was[c].to_numpy() for c in ("start", "time", "value")]
    fresh = was["fresh"].to_numpy(dtype=bool)
    if _postgres(conn):  # seen_at unchanged: PostgreSQL updates the row without its index
        cursor.execute(
            "UPDATE otlp_series AS s SET start_unix_nano = n.start, time_unix_nano = n.time, "
            "value = n.value, seen_at = CASE WHEN n.fresh THEN s.seen_at ELSE %s END "
            "FROM unnest(%s::varchar[], %s::bigint[], %s::bigint[], %s::float8[], "
            "%s::bigint[], %s::bigint[], %s::float8[], %s::boolean[]) "
            "AS n(key, start, time, value, old_start, old_time, old_value, fresh) "
            "WHERE s.key = n.key AND s.start_unix_nano = n.old_start "
            "AND s.time_unix_nano = n.old_time AND s.value = n.old_value",
            (now, keys.tolist(), start.tolist(), times.tolist(), value.tolist(),
             old[0].tolist(), old[1].tolist(), old[2].tolist(), fresh.tolist()),
        )  # fmt: skip
        return int(cursor.rowcount)
    rowid = was["rowid"].to_numpy()
    done = 0
    for by_id, seen in ((True, False), (True, True), (False, False), (False, True)):
        # by row id where the read gave it (one lookup, not two); seen_at where not fresh
        # (SQLite rewrites the index entry of a column it sets, even to its own value)
        mine = (rowid >= 0 if by_id else rowid < 0) & (fresh != seen)
        if not mine.any():
            continue
        statement = (
            "UPDATE otlp_series SET start_unix_nano = ?, time_unix_nano = ?, value = ?"
            f"{', seen_at = ?' if seen else ''} WHERE {'rowid = ? AND ' if by_id else ''}"
            "key = ? AND start_unix_nano = ? AND time_unix_nano = ? AND value = ?"
        )
        at = np.flatnonzero(mine)
        for first in range(0, len(at), CHUNK):  # the rows' Python values a chunk at a time
            part = at[first : first + CHUNK]
            cursor.executemany(statement, zip(
                start[part].tolist(), times[part].tolist(), value[part].tolist(),
                *([[now] * len(part)] if seen else []), *([rowid[part].tolist()] if by_id else []),
                keys[part].tolist(), old[0][part].tolist(), old[1][part].tolist(),
                old[2][part].tolist(), strict=True))  # fmt: skip
            done += int(cursor.rowcount)
    return done


def _insert(conn: Connection, cursor: Any, keys: np.ndarray, start: np.ndarray,
            times: np.ndarray, value: np.ndarray, window: _Window, now: Any) -> int:  # fmt: skip
    """Insert the series read as having no point; a row already there is replaced only if
    the read's ``window`` left it out (expired, or ahead). The number written."""
    conflict = (
        "ON CONFLICT (key) DO UPDATE SET start_unix_nano = excluded.start_unix_nano, "
        "time_unix_nano = excluded.time_unix_nano, value = excluded.value, "
        "seen_at = excluded.seen_at WHERE otlp_series.seen_at < {0} "
        "OR otlp_series.time_unix_nano > {0}"
    )
    if _postgres(conn):
        cursor.execute(
            "INSERT INTO otlp_series (key, start_unix_nano, time_unix_nano, value, seen_at) "
            "SELECT n.key, n.start, n.time, n.value, %s FROM unnest(%s::varchar[], "
            "%s::bigint[], %s::bigint[], %s::float8[]) AS n(key, start, time, value) "
            + conflict.format("%s"),
            (now, keys.tolist(), start.tolist(), times.tolist(), value.tolist(),
             window.oldest, window.latest),
        )  # fmt: skip
        return int(cursor.rowcount)
    done = 0
    for first in range(0, len(keys), CHUNK):  # the rows' Python values a chunk at a time
        part = slice(first, first + CHUNK)
        size = len(keys[part])
        cursor.executemany(
            "INSERT INTO otlp_series (key, start_unix_nano, time_unix_nano, value, seen_at) "
            "VALUES (?, ?, ?, ?, ?) " + conflict.format("?"),
            zip(keys[part].tolist(), start[part].tolist(), times[part].tolist(),
                value[part].tolist(), [now] * size, [window.oldest] * size,
                [window.latest] * size, strict=True),
        )  # fmt: skip
        done += int(cursor.rowcount)
    return done


def _store(
    store: Store,
    planned: Plan,
    kept: Kept,
    window: _Window,
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
        written = written.append(new.index)
        last = number == len(planned.parts)
        seen = _unwritten(planned.seen, written) if last else None
        writer = _StateWriter(new, expected, window, seen, expiry)
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
                written = written[: len(written) - len(new)]
                new = new.iloc[:0]
                seen = _unwritten(planned.seen, written) if last else None
                writer = _StateWriter(new, expected, window, seen, expiry)
            with write_transaction(store.engine, wait) as conn:
                writer(conn)
        if len(new) and not last:  # the next month's batch finds these points
            expected = _then(expected, new)
    if not planned.parts and len(planned.seen):  # only points received already: still seen
        with write_transaction(store.engine, wait) as conn:
            _refresh(conn, planned.seen, utcnow(), expiry)
    return outcome


def _unwritten(seen: np.ndarray, written: pd.Index) -> np.ndarray:
    """The seen series no batch of the request writes (their ``seen_at`` is refreshed)."""
    if len(written) == len(seen) and len(written.unique()) == len(seen):  # written ⊆ seen
        return seen[:0]
    return seen[written.get_indexer(seen) < 0] if len(written) else seen


def _as_kept(state: pd.DataFrame) -> Kept:
    return pd.DataFrame(
        {**{c: state[c].to_numpy(dtype=t) for c, t in
            (("start", "int64"), ("time", "int64"), ("value", "float64"))},
         "fresh": np.ones(len(state), dtype=bool),  # written now
         "rowid": np.full(len(state), -1, dtype="int64")},
        index=pd.Index(state["key"].to_numpy(dtype=object), dtype=object, name="key"),
    )  # fmt: skip


def _then(expected: Kept, new: Kept) -> Kept:
    """The kept points once ``new`` is written (a row keeps its id when updated)."""
    at = expected.index.get_indexer(new.index)
    ids = np.append(expected["rowid"].to_numpy(dtype="int64"), -1)  # at -1 reads the -1
    moved = new.assign(rowid=ids[at])
    return pd.concat([expected[new.index.get_indexer(expected.index) < 0], moved])


@dataclass(frozen=True)
class _StateWriter:
    """The ``in_transaction`` hook: keep the series' ``new`` last points if they still hold
    the ``expected`` ones (:func:`_advance`; a series absent from it had no kept point in
    ``window``); for the request's last batch, also refresh its other ``seen`` series and
    delete the expired ones."""

    new: Kept
    expected: Kept
    window: _Window
    seen: np.ndarray | None
    expiry: timedelta

    def __call__(self, conn: Connection, _done: object = None) -> None:
        now = utcnow()
        _advance(conn, self.new, self.expected, self.window, now)
        if self.seen is not None:
            _refresh(conn, self.seen, now, self.expiry)


def _refresh(conn: Connection, keys: np.ndarray, now: datetime, expiry: timedelta) -> None:
    """Mark the request's series seen now (those seen more than ``expiry / 48`` ago), and
    delete those not seen for ``expiry`` (:func:`_forgotten`)."""
    s = table(OtlpSeries)
    conn.execute(delete(s).where(s.c.seen_at < now - _forgotten(expiry)))
    for first in range(0, len(keys), CHUNK):
        chunk = keys[first : first + CHUNK].tolist()
        conn.execute(update(s).where(s.c.key.in_(chunk), s.c.seen_at < now - expiry / 48)
                     .values(seen_at=now))  # fmt: skip


def _ingest_part(
    store: Store, part: MonthPart, actor: str, origin: str, wait: float, writer: _StateWriter
) -> tuple[str, tuple[str, ...]]:
    """One month's usage as one ``sum`` batch (``ingest usage``'s path and store checks),
    the series written in its transaction. The usage is handed over as the canonical table
    the usage reader returns (:func:`_canonical`), not through a file read back."""
    from tenantcost.store.ingest import ingest_usage_source
    from tenantcost.usage_source import FrameUsage

    con = _duck()  # a connection of its own (its temporary tables), cheap to open
    try:
        source = FrameUsage(_canonical(part), origin=origin)
        done = ingest_usage_source(store, source, con, period=None, mode="sum", actor=actor,
                                   wait=wait, in_transaction=writer)  # fmt: skip
    finally:
        con.close()
    return done.uid, done.warnings


def _canonical(part: MonthPart) -> pd.DataFrame:
    """A month's usage as :func:`tenantcost.readers.usage.read_usage` returns a usage table
    (hour windows in order, ``str`` keys, float metrics, an ``origin``), with the reader's
    checks that its making does not already ensure: :func:`tenantcost.otlp.points` refused
    what has no service or time and counted refused client ids without a client, and
    :func:`~tenantcost.otlp.plan` refused a negative increment or one over the limit; a
    cell's sum of increments may still pass the limit, which refuses the month."""
    from tenantcost.limits import MAX_USAGE_VALUE
    from tenantcost.readers.usage import usage_limit_problem

    usage = part.usage
    where = f"{part.month} usage"
    frame = pd.DataFrame({
        "window_start": usage["window_start"].astype("datetime64[ns, UTC]"),
        "window_end": usage["window_end"].astype("datetime64[ns, UTC]"),
        "service": usage["service"].astype("str"), "client": usage["client"].astype("str"),
    })  # fmt: skip
    for column in usage.columns[4:]:
        values = usage[column].to_numpy(dtype="float64")
        bad = ~np.isfinite(values) | (values < 0) | (values > MAX_USAGE_VALUE)
        if bad.any():
            at = int(np.flatnonzero(bad)[0])
            raise InputError(usage_limit_problem(str(values[at])), file=where,
                             where=f"row {at + 1}", column=str(column))  # fmt: skip
        frame[column] = values
    frame["origin"] = pd.Series(where, index=frame.index, dtype="str")
    return frame.reset_index(drop=True)


_WRITING = threading.Lock()
"""One request of this process writes at a time: a thread waiting for the store's write
lock would wait in SQLite's busy handler, which sleeps in steps of up to 100 ms, where this
lock hands over at once (requests of other processes still meet at the store's lock)."""
_DUCK: list[Any] = []
_DUCK_LOCK = threading.Lock()


def _duck() -> Any:
    """A new connection to the process's DuckDB database for usage batches (the database is
    opened once: about 25 ms): a cursor of it, with its own temporary tables."""
    with _DUCK_LOCK:
        if not _DUCK:
            from tenantcost.split import connect

            _DUCK.append(connect())
        return _DUCK[0].cursor()


def rejected_points(outcome: Outcome) -> np.ndarray:
    """The distinct data points refused (a point feeding two columns counts once)."""
    frames = [f["point"].to_numpy(dtype="int64") for f in outcome.refused if len(f)]
    return np.unique(np.concatenate(frames)) if frames else np.array([], dtype="int64")
