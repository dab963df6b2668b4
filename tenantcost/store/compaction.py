"""Usage compaction: a day's committed usage batches folded into one Parquet file.

Why. A meter posts one small ``sum`` batch per process and minute: about 43,000 batches a
month per process, 350,000 for 8. Each is a catalog row, a few cells and one Parquet file per
day. Reading a month would open every one of those files and, since every cell is then held
by many batches, apply the which-rows-count rule (:mod:`tenantcost.store.stored`) to every row.

What. Once a day has more than :data:`COMPACT_AFTER` *loose* usage files (files of committed
batches not folded yet), the ingest that commits the next batch folds the day, inside its
write transaction: the day's active compaction (if any) and its loose files are read, the
rule applied (rows of a cell before its latest ``replace`` batch dropped, the rest summed per
window, service and client) and the result written as one Parquet file,
``usage/date=<day>/<compaction uid>.parquet``, recorded in ``usage_compaction`` with the
largest batch id it folds (``upto_batch_id``). Readers then open, per day, that file as one
*virtual batch* whose id is ``upto_batch_id``, plus the files of batches committed after it:
a later ``replace`` batch (a larger id) still replaces the compacted rows of its cells, and a
later ``sum`` batch adds to them, by the existing rule. The folded set needs no per-file
link: it is every committed usage batch with a file on the day and an id up to
``upto_batch_id`` (ids are given at commit under the write lock, so none can join it later).

Provenance is kept: the batches' own rows, cells and files stay, ``batch list`` lists every
batch and a run's inputs (``run_input``) still name every batch it read. Withdrawing a folded
batch makes the day's compaction ``invalid`` (:func:`invalidate`): the day reads its batches'
own files again until the next compaction of the day (the next usage ingest folds any day of
its months over the threshold, :func:`compact_due`). ``reopen`` changes no batch, so it
leaves compactions alone: a compaction is the exact sum of what its batches hold.

A superseded or invalid compaction's file is removed (and its row deleted) only
:data:`GRACE` after it ended, so a ``run`` that listed it before (readers take no lock) can
still read it. Costs and billing batches are never compacted (a handful a day).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
from sqlalchemy import ColumnElement, Connection, and_, delete, insert, or_, select, update

from tenantcost.errors import InputError
from tenantcost.split import connect, quote
from tenantcost.store.data import UID_SQL, DataDir, partition
from tenantcost.store.models import Batch, BatchFile, UsageCompaction, table, utcnow
from tenantcost.tables import USAGE_KEY_COLUMNS
from tenantcost.usage_source import ParquetUsage

COMPACT_AFTER = 32
"""A day is folded once it has more than this many loose usage files. With 8 meter
processes (8 batches a minute) that is a compaction every 4 to 5 minutes, each reading about
33 small files and the day's previous compacted file (a few thousand rows): tens of
milliseconds inside the ingest. A reader then opens at most one compacted file and 32 loose
files per day (about 1,000 files for a month instead of 350,000)."""
GRACE = timedelta(hours=1)
"""How long the file of a superseded or invalid compaction stays for readers that listed it."""
OTHER_DAYS = 1
"""Besides its own days, an ingest folds at most this many other days of its months that
are over the threshold (a day whose compaction a withdrawal invalidated): the cost of healing
a day (reading all its files once) is spread over ingests, never all at once."""
_log = logging.getLogger("tenantcost.store")
_names = itertools.count(1)


@dataclass(frozen=True)
class Compacted:
    """One day folded: its compaction uid, rows written and how many batches it folds."""

    day: str
    uid: str
    rows: int
    batches: int
    upto_batch_id: int


def active(conn: Connection, first_day: str, last_day: str) -> pd.DataFrame:
    """The active compactions of the days ``first_day`` to ``last_day`` (``YYYY-MM-DD``):
    ``day, uid, upto_batch_id, path, batches``."""
    u = table(UsageCompaction).c
    rows = conn.execute(
        select(u.day, u.uid, u.upto_batch_id, u.path, u.batches)
        .where(u.status == "active", u.day >= first_day, u.day <= last_day)
        .order_by(u.day)
    ).all()
    return pd.DataFrame([tuple(r) for r in rows],
                        columns=["day", "uid", "upto_batch_id", "path", "batches"])  # fmt: skip


def active_none() -> pd.DataFrame:
    """No compaction (costs and billing batches are never compacted)."""
    return pd.DataFrame(columns=["day", "uid", "upto_batch_id", "path", "batches"])


def loose(kind: str, first_day: str, last_day: str, compacted: pd.DataFrame) -> ColumnElement[bool]:
    """The ``batch_file`` rows of days ``first_day`` to ``last_day`` that no active compaction
    (``compacted``, from :func:`active`) folds: per compacted day, the files of batches after
    its ``upto_batch_id`` (an index range on ``batch_file (day, batch_id)``), every file of
    the other days."""
    f = table(BatchFile).c
    if kind != "usage" or compacted.empty:
        return and_(f.day >= first_day, f.day <= last_day)
    done = dict(zip(compacted["day"], compacted["upto_batch_id"], strict=True))
    days = [f"{d:%Y-%m-%d}" for d in pd.date_range(first_day, last_day, freq="D")]
    terms: list[ColumnElement[bool]] = [
        and_(f.day == day, f.batch_id > int(upto)) for day, upto in done.items()
    ]
    rest = [d for d in days if d not in done]
    if rest:
        terms.append(f.day.in_(rest))
    return or_(*terms)


def loose_files(conn: Connection, kind: str, first_day: str, last_day: str) -> pd.DataFrame:
    """The loose files of committed ``kind`` batches on days ``first_day`` to ``last_day``:
    ``uid, batch_id, replace, day, path``, by batch id and day. Two queries on purpose: the
    ``batch_file`` rows first, by their ``(day, batch_id)`` index (a join would let the
    planner walk every batch of the kind: 350,000 under meter traffic), then their batches by
    primary key."""
    f = table(BatchFile).c
    if kind != "usage":  # a handful of batches a day: found from the batches, by kind
        b = table(Batch).c
        rows = conn.execute(
            select(b.uid, b.id, b.mode == "replace", f.day, f.path)
            .join_from(table(Batch), table(BatchFile), b.id == f.batch_id)
            .where(b.kind == kind, b.status == "committed")
            .where(f.day >= first_day, f.day <= last_day)
            .order_by(b.id, f.day)
        ).all()
        return pd.DataFrame([tuple(r) for r in rows],
                            columns=["uid", "batch_id", "replace", "day", "path"])  # fmt: skip
    compacted = active(conn, first_day, last_day)
    found = conn.execute(
        select(f.batch_id, f.day, f.path).where(loose(kind, first_day, last_day, compacted))
    ).all()
    files = pd.DataFrame([tuple(r) for r in found], columns=["batch_id", "day", "path"])
    b = table(Batch).c
    ids = sorted({int(i) for i in files["batch_id"]})
    batches = []
    for start in range(0, len(ids), _IN_CHUNK):  # bounded IN lists (SQLite's variable limit)
        batches += [tuple(r) for r in conn.execute(
            select(b.id, b.uid, b.mode == "replace")
            .where(b.id.in_(ids[start:start + _IN_CHUNK]), b.kind == kind,
                   b.status == "committed")).all()]  # fmt: skip
    known = pd.DataFrame(batches, columns=["batch_id", "uid", "replace"])
    merged = files.astype({"batch_id": "int64"}).merge(known.astype({"batch_id": "int64"}),
                                                        on="batch_id")  # fmt: skip
    merged = merged.sort_values(["batch_id", "day"]).reset_index(drop=True)
    return merged[["uid", "batch_id", "replace", "day", "path"]]


_IN_CHUNK = 900


def compact_due(conn: Connection, data: DataDir, days: Iterable[str]) -> list[Compacted]:
    """Inside a usage ingest's write transaction: fold every day of ``days`` (the batch's) and
    up to :data:`OTHER_DAYS` other days of their months with more than :data:`COMPACT_AFTER`
    loose files. A compaction that fails (a full disk) is skipped and logged: the batch it
    follows is committed all the same, and the day is folded by a later ingest."""
    own = sorted(set(days))
    if not own:
        return []
    first = f"{pd.Timestamp(own[0]).to_period('M').start_time:%Y-%m-%d}"
    last = f"{pd.Timestamp(own[-1]).to_period('M').end_time:%Y-%m-%d}"
    counts = _loose_counts(conn, first, last)
    due = [d for d in own if counts.get(d, 0) > COMPACT_AFTER]
    others = [d for d, n in sorted(counts.items()) if n > COMPACT_AFTER and d not in own]
    done = []
    for day in due + others[:OTHER_DAYS]:  # a few days per ingest
        try:
            done.append(compact_day(conn, data, day))
        except (InputError, OSError, duckdb.Error) as exc:
            _log.warning("usage compaction of %s skipped: %s", day, exc)
    return done


def _loose_counts(conn: Connection, first_day: str, last_day: str) -> dict[str, int]:
    """Loose usage files per day of ``first_day`` to ``last_day``."""
    counts = loose_files(conn, "usage", first_day, last_day)["day"].value_counts()
    return {str(day): int(n) for day, n in counts.items()}


def compact_day(conn: Connection, data: DataDir, day: str) -> Compacted:
    """Fold ``day``'s active compaction and loose usage files into a new compaction (inside the
    caller's write transaction); the previous one becomes ``superseded``."""
    units, previous = _day_units(conn, day)
    uid = uuid.uuid4().hex
    con = connect()
    try:
        with data.staging() as folder:
            built = folder / f"{day}.parquet"
            rows = _fold(con, data, units, built)
            relative = partition("usage", day, uid)
            sha = data.publish(built, relative)
    finally:
        con.close()
    folded = units[~units["compacted"]]
    upto = int(units["batch_id"].max())
    batches = (int(previous["batches"]) if previous is not None else 0) + int(
        folded["batch_id"].nunique()
    )
    now = utcnow()
    u = table(UsageCompaction).c
    conn.execute(update(table(UsageCompaction)).where(u.day == day, u.status == "active")
                 .values(status="superseded", ended_at=now))  # fmt: skip
    conn.execute(insert(table(UsageCompaction)), [{
        "uid": uid, "day": day, "path": relative, "rows": rows, "sha256": sha,
        "upto_batch_id": upto, "batches": batches, "status": "active",
        "created_at": now}])  # fmt: skip
    _remove_ended(conn, data, day, now)
    return Compacted(day, uid, rows, batches, upto)


def _day_units(conn: Connection, day: str) -> tuple[pd.DataFrame, Any]:
    """What ``day`` reads now: its active compaction (``compacted``, as the virtual batch
    ``upto_batch_id``) and its loose files: ``uid, batch_id, replace, compacted, path``."""
    compacted = active(conn, day, day)
    units = loose_files(conn, "usage", day, day).assign(compacted=False)
    previous = None
    if not compacted.empty:
        previous = compacted.iloc[0]
        virtual = pd.DataFrame(
            [
                (
                    str(previous["uid"]),
                    int(previous["upto_batch_id"]),
                    False,
                    True,
                    str(previous["path"]),
                )
            ],
            columns=["uid", "batch_id", "replace", "compacted", "path"],
        )
        units = pd.concat([virtual, units], ignore_index=True)  # fmt: skip
    return units[["uid", "batch_id", "replace", "compacted", "path"]], previous


def _fold(con: duckdb.DuckDBPyConnection, data: DataDir, units: pd.DataFrame, built: Path) -> int:
    """Write the live rows of ``units`` to ``built``: per cell, the rows of its latest
    ``replace`` unit and of the units after it (the compacted unit counts as ``sum``: its rows
    are live already), summed per window, service and client, in canonical order."""
    source = ParquetUsage([data.reader_path(p) for p in units["path"]], con, missing_as_zero=True)
    name = f"tc_compaction_units_{next(_names)}"
    con.register(name, units[["uid", "batch_id", "replace"]])
    keys = ", ".join(USAGE_KEY_COLUMNS)
    sums = ", ".join(f"sum(CAST(u.{quote(m)} AS DOUBLE)) AS {quote(m)}" for m in source.metrics)
    target = str(built).replace("'", "''")
    row = con.execute(f"""
        COPY (
            WITH u AS (
                SELECT s.*, b.batch_id, b.replace
                FROM (SELECT *, {UID_SQL} AS uid FROM {source.scan}) s
                JOIN {name} b ON b.uid = s.uid),
            r AS (
                SELECT window_start, window_end, service, max(batch_id) AS latest
                FROM u WHERE replace GROUP BY window_start, window_end, service)
            SELECT u.window_start, u.window_end, u.service, u.client, {sums}
            FROM u LEFT JOIN r ON r.window_start = u.window_start
                AND r.window_end = u.window_end AND r.service = u.service
            WHERE r.latest IS NULL OR u.batch_id >= r.latest
            GROUP BY u.window_start, u.window_end, u.service, u.client
            ORDER BY {keys}
        ) TO '{target}' (FORMAT parquet)""").fetchone()  # fmt: skip
    con.unregister(name)
    return int(row[0]) if row else 0


def _remove_ended(conn: Connection, data: DataDir, day: str, now: datetime) -> None:
    """Remove the files and rows of ``day``'s compactions that ended over :data:`GRACE` ago
    (best effort for the files: ``DataDir.clean`` removes any left, their uid being gone)."""
    u = table(UsageCompaction).c
    old = (u.day == day) & (u.status != "active") & (u.ended_at < now - GRACE)
    for path in conn.execute(select(u.path).where(old)).scalars():
        with contextlib.suppress(OSError):
            data.fs.rm(data.path(str(path)))
    conn.execute(delete(table(UsageCompaction)).where(old))


def invalidate(conn: Connection, batch_id: int) -> list[str]:
    """A usage batch is withdrawn: its days' active compactions that fold it are ``invalid``
    from now on (readers go back to the day's own files); returns those days."""
    u, f = table(UsageCompaction).c, table(BatchFile).c
    days = select(f.day).where(f.batch_id == batch_id)
    hit = (u.status == "active") & (u.upto_batch_id >= batch_id) & u.day.in_(days)
    found = [str(d) for d in conn.execute(select(u.day).where(hit)).scalars()]
    if found:
        conn.execute(update(table(UsageCompaction)).where(hit)
                     .values(status="invalid", ended_at=utcnow()))  # fmt: skip
    return found


def compaction_uids(conn: Connection) -> set[str]:
    """The uids of every recorded compaction (their files are not leftovers)."""
    return {str(x) for x in conn.execute(select(table(UsageCompaction).c.uid)).scalars()}


__all__ = [
    "COMPACT_AFTER",
    "Compacted",
    "active",
    "active_none",
    "compact_day",
    "compact_due",
    "compaction_uids",
    "invalidate",
    "loose",
    "loose_files",
]
