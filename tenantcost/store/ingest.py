"""``tenantcost ingest``: raw usage and costs into the store, one atomic batch at a time.

Inputs are read by the same readers as ``allocate`` (:func:`tenantcost.usage_source.open_usage`
for usage, :func:`tenantcost.readers.costs.read_costs` for costs), so a row ``allocate``
refuses is refused here with the same one line, before anything is written. What a record
must agree with in the store (stored cost windows, rule versions, months) is checked under
the lock (:mod:`tenantcost.store.ingest_checks`). A batch then:

1. takes the store's write lock (:func:`tenantcost.store.lock.write_transaction`);
2. removes files no committed batch names (leftovers of an interrupted batch) from the days
   it writes to (:meth:`tenantcost.store.data.DataDir.clean`);
3. writes one Parquet file per day under a temporary name, renamed when complete
   (:mod:`tenantcost.store.data`); usage is validated day by day as it is written;
4. inserts the ``batch`` row, its cells and its files, folds the days that now hold more
   than :data:`~tenantcost.store.compaction.COMPACT_AFTER` loose usage files
   (:mod:`tenantcost.store.compaction`), and commits: the commit point.

An error or a kill anywhere before 4 leaves the catalog as it was; the files written are
removed at once or by the next ingest, and no reader opens them meanwhile.

**Cells and modes.** A usage cell is (window, service), a cost cell is (window, workload)
(:func:`workload_key`). ``replace`` (the default) makes the batch's rows the only ones of its
cells: earlier batches' rows of those cells no longer count (they stay on disk, and in the
catalog, for provenance). ``sum`` adds the batch's rows to what the cells hold (partial counts
sent during the hour); usage rows of the same window, service and client are then summed.
A ``sum`` batch may lack some of the stored usage's metric columns (a meter or an OTLP export
posting one metric): its rows are written with 0 there; a batch may add a metric column, which
earlier batches' rows read as 0 (:func:`_check_metrics`).
Ingesting the same file twice with ``replace`` therefore leaves the stored usage as it was;
into a closed month, it is answered "nothing would change" and nothing is written
(:func:`_same_as_stored`), where any other batch is refused.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
from sqlalchemy import Connection, insert, select
from sqlmodel import Session

from tenantcost.duck import timestamp_literal
from tenantcost.errors import InputError
from tenantcost.readers.costs import read_costs
from tenantcost.split import connect, quote
from tenantcost.store.compaction import compact_due, compaction_uids
from tenantcost.store.data import DataDir, Store, file_sha256, partition
from tenantcost.store.ingest_checks import (
    StoreView,
    check_key_columns,
    read_view,
    refuse_costs_across_months,
)
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import Batch, BatchCell, BatchFile, table, utcnow
from tenantcost.store.month_state import MonthClosed, refuse_if_closed
from tenantcost.store.rules import sha256_hex
from tenantcost.store.usage_metrics import stored_gauges
from tenantcost.tables import USAGE_KEY_COLUMNS
from tenantcost.usage_source import UsageSource, is_url, open_usage, register_filesystems
from tenantcost.windows import Period, select_period

MODES = ("replace", "sum")
PAUSE_BEFORE_COMMIT_ENV = "TENANTCOST_TEST_PAUSE_BEFORE_COMMIT"
"""Tests only: a file path; an ingest that has written its files creates it, then sleeps
until killed (the interrupted-batch test kills it there)."""
CELL_COLUMNS = ["window_start", "window_end", "key"]
DAY = pd.Timedelta(days=1)


@dataclass(frozen=True)
class Ingested:
    """What one ``ingest`` did (or, with ``dry_run``, would do)."""

    kind: str
    uid: str
    mode: str
    rows: int
    cells: int
    replaced: int
    """Cells that earlier batches held (their rows now superseded, with ``replace``)."""
    skipped: int
    """Input rows outside ``--from/--to``/``--month``, not ingested."""
    window_from: pd.Timestamp
    window_to: pd.Timestamp
    sha256: str
    files: int
    cleaned: int
    """Leftover files of interrupted batches removed first."""
    dry_run: bool
    unchanged: bool = False
    """Nothing written: a ``replace`` batch into a closed month whose rows are exactly those
    its cells already count (``uid`` is then the stored batch that holds them)."""
    warnings: tuple[str, ...] = ()
    """One line each: what ingest could not check yet (no rule version in force)."""


@dataclass(frozen=True)
class _Part:
    """One day's Parquet file of a batch, built locally."""

    day: str
    built: Path
    rows: int
    kind: str | None = None
    """The data directory folder when not the batch's kind (a billing batch's split rows)."""


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise InputError(f"--mode: expected replace or sum, got '{mode}'")
    return mode


InTransaction = Callable[[Connection, "Ingested"], None]
"""Called inside the batch's write transaction, after its catalog rows and before the commit
(the service inserts its idempotency row there, atomically with the batch; raising rolls the
batch back)."""


def ingest_usage(
    store: Store,
    paths: Sequence[str | Path],
    *,
    period: Period | None,
    mode: str,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
    in_transaction: InTransaction | None = None,
) -> Ingested:
    """Ingest usage files (CSV or Parquet, files, folders, URLs) as one batch."""
    check_mode(mode)
    con = _connect()
    given = [p if is_url(p) else Path(p) for p in paths]
    full = open_usage(given, con)  # CSV is validated whole here; Parquet per day below
    return ingest_usage_source(store, full, con, period=period, mode=mode, actor=actor,
                               dry_run=dry_run, wait=wait,
                               in_transaction=in_transaction)  # fmt: skip


def ingest_usage_source(
    store: Store,
    full: UsageSource,
    con: duckdb.DuckDBPyConnection,
    *,
    period: Period | None,
    mode: str,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
    in_transaction: InTransaction | None = None,
) -> Ingested:
    """Ingest any usage source (files, or Prometheus' table in memory) as one batch; the
    batch's ``source`` is the source's origin."""
    check_mode(mode)
    source = full.within(period) if period is not None else full
    first, last_start, last_end, count = _usage_span(con, source)
    if count == 0:
        whole = _usage_span(con, full) if period is not None else None
        covered = (whole[0], whole[2]) if whole is not None and whole[3] else None
        raise InputError(_nothing("usage", period, covered), file=full.origin)
    days = pd.date_range(first.floor("D"), last_start.floor("D"), freq="D")
    shape = _Shape("usage", full.origin, mode, count, full.estimated_rows(con) - count,
                   period.start if period is not None else first,
                   period.end if period is not None else last_end)  # fmt: skip
    if dry_run:
        with store.engine.connect() as conn:
            span = _Span(source, first, last_end)
            filled = _check_metrics(conn, store.data, con, source.metrics, full.origin, mode, span)
            view = _usage_view(conn, source, full.origin, first, last_end, filled)
        _, cells = _usage_days(con, source, days, None, view)  # validates every day
        return shape.dry_run(len(cells), view.warnings())
    notes: list[str] = []

    def build(conn: Connection, folder: Path) -> tuple[list[_Part], pd.DataFrame]:
        span = _Span(source, first, last_end)
        filled = _check_metrics(conn, store.data, con, source.metrics, full.origin, mode, span)
        view = _usage_view(conn, source, full.origin, first, last_end, filled)
        built = _usage_days(con, source, days, folder, view, filled)
        notes.extend(view.warnings())
        return built

    return _store_batch(store, shape, actor, wait, build, in_transaction, warnings=notes)


def _usage_view(
    conn: Connection,
    source: UsageSource,
    origin: str,
    start: pd.Timestamp,
    end: pd.Timestamp,
    filled: Sequence[str] = (),
) -> StoreView:
    """What the store holds that the usage must agree with; refuses a batch without a
    column the stored rules split by (a column ``filled`` with 0 is one it has)."""
    view = read_view(conn, start, end)
    gauges = list(stored_gauges(conn))  # a gauge key comes from samples, not this batch
    for metric in source.metrics:
        if metric in gauges:
            raise InputError(
                f"'{metric}' is declared a gauge (metrics:) but given as window usage "
                "(window_start, window_end); a gauge's file has a time column",
                file=origin,
                column=metric,
            )
    check_key_columns(view, [*source.metrics, *filled, *gauges], origin)
    return view


def ingest_costs(
    store: Store,
    paths: Sequence[str | Path],
    *,
    period: Period | None,
    mode: str,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
    in_transaction: InTransaction | None = None,
) -> Ingested:
    """Ingest cost files (OpenCost JSON or CSV export, canonical CSV/Parquet) as one batch."""
    check_mode(mode)
    origin = ", ".join(str(p) for p in paths)
    return ingest_cost_table(store, read_costs([Path(p) for p in paths]), origin,
                             period=period, mode=mode, actor=actor, dry_run=dry_run,
                             wait=wait, in_transaction=in_transaction)  # fmt: skip


def ingest_cost_table(
    store: Store,
    every: pd.DataFrame,
    origin: str,
    *,
    period: Period | None,
    mode: str,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
    in_transaction: InTransaction | None = None,
) -> Ingested:
    """Ingest a canonical cost table (read from files or the OpenCost API) as one batch."""
    check_mode(mode)
    costs = select_period(every, period, "costs")
    if costs.empty:
        covered = None if every.empty else (every["window_start"].min(), every["window_end"].max())
        raise InputError(_nothing("cost", period, covered), file=origin)
    refuse_costs_across_months(costs)
    shape = _Shape("costs", origin, mode, len(costs), len(every) - len(costs),
                   period.start if period is not None else costs["window_start"].min(),
                   period.end if period is not None else costs["window_end"].max())  # fmt: skip
    cells = _cells(costs["window_start"], costs["window_end"], workload_key(costs))
    if dry_run:
        return shape.dry_run(len(cells))

    def build(_conn: Connection, folder: Path) -> tuple[list[_Part], pd.DataFrame]:
        return _cost_days(costs, folder), cells

    return _store_batch(store, shape, actor, wait, build, in_transaction)


@dataclass(frozen=True)
class _Shape:
    """What a validated input holds, before it is stored."""

    kind: str
    source: str
    mode: str
    rows: int
    skipped: int
    window_from: pd.Timestamp
    window_to: pd.Timestamp

    def dry_run(self, cells: int, warnings: Sequence[str] = ()) -> Ingested:
        return Ingested(self.kind, "", self.mode, self.rows, cells, 0, self.skipped,
                        self.window_from, self.window_to, "", 0, 0, dry_run=True,
                        warnings=tuple(warnings))  # fmt: skip

    def unchanged(self, uid: str, cells: int, sha256: str) -> Ingested:
        return Ingested(self.kind, uid, self.mode, self.rows, cells, cells, self.skipped,
                        self.window_from, self.window_to, sha256, 0, 0, dry_run=False,
                        unchanged=True)  # fmt: skip


def _store_batch(
    store: Store,
    shape: _Shape,
    actor: str,
    wait: float,
    build: Callable[[Connection, Path], tuple[list[_Part], pd.DataFrame]],
    in_transaction: InTransaction | None = None,
    warnings: Sequence[str] = (),
) -> Ingested:
    """Steps 1-4 of the module docstring: lock, clean, write the files ``build`` makes,
    commit the catalog rows. Any failure removes the batch's files and rolls back.
    ``warnings`` is read once ``build`` has run (it may add to it)."""
    uid = uuid.uuid4().hex
    with _removed_on_failure(store.data, uid), write_transaction(store.engine, wait) as conn:
        try:
            refuse_if_closed(conn, shape.window_from, shape.window_to, f"ingest {shape.kind}")
        except MonthClosed:
            same = _same_as_stored(conn, store.data, shape, build)
            if same is None:
                raise
            return same
        days = _days(shape.window_from, shape.window_to)
        cleaned = store.data.clean(_batch_uids(conn, days), days)
        with store.data.staging() as folder:
            parts, cells = build(conn, folder)
            files = _publish(store.data, shape.kind, uid, parts)
        batch = Batch(uid=uid, kind=shape.kind, source=shape.source, mode=shape.mode,
                      rows=shape.rows, sha256=_batch_sha(files),
                      window_from=shape.window_from.to_pydatetime(),
                      window_to=shape.window_to.to_pydatetime(), actor=actor,
                      status="committed")  # fmt: skip
        replaced = _commit(conn, batch, cells, files)
        if shape.kind == "usage":  # meter traffic: fold days with many loose files
            compact_due(conn, store.data, [f.day for f in files])
        done = Ingested(shape.kind, uid, shape.mode, shape.rows, len(cells), replaced,
                        shape.skipped, shape.window_from, shape.window_to, batch.sha256,
                        len(files), cleaned, dry_run=False,
                        warnings=tuple(warnings))  # fmt: skip
        if in_transaction is not None:
            in_transaction(conn, done)
    return done


def _same_as_stored(
    conn: Connection,
    data: DataDir,
    shape: _Shape,
    build: Callable[[Connection, Path], tuple[list[_Part], pd.DataFrame]],
) -> Ingested | None:
    """A ``replace`` batch into a closed month changes nothing when an active ``replace``
    batch holds exactly its rows (same files' sha256, hence the same cells) and no later
    active batch holds any of those cells: re-ingesting the same file is then answered
    "nothing would change" and nothing is written. Else ``None`` (the month's refusal
    stands). ``sum`` always changes the cells it adds to."""
    if shape.mode != "replace":
        return None
    with data.staging() as folder:  # validated and built as for a batch, never published
        parts, cells = build(conn, folder)
        sha = sha256_hex("\n".join(f"{p.day} {file_sha256(p.built)}" for p in parts))
    b, c = table(Batch).c, table(BatchCell).c
    later, other = table(Batch).alias("later"), table(BatchCell).alias("other")
    superseded = (
        select(other.c.id)
        .join(later, later.c.id == other.c.batch_id)
        .where(other.c.window_start == c.window_start, other.c.window_end == c.window_end,
               other.c.key == c.key, later.c.id > b.id, later.c.kind == b.kind,
               later.c.status == "committed")
        .correlate(table(Batch), table(BatchCell))  # two levels up: say so
    )  # fmt: skip
    still = ~select(c.id).where(c.batch_id == b.id, superseded.exists()).exists()
    uid = conn.execute(
        select(b.uid)
        .where(b.kind == shape.kind, b.mode == "replace", b.status == "committed",
               b.sha256 == sha, still)
        .order_by(b.id.desc())
        .limit(1)
    ).scalar()  # fmt: skip
    return shape.unchanged(str(uid), len(cells), sha) if uid is not None else None


def workload_key(costs: pd.DataFrame) -> pd.Series:
    """The workload of each cost row: cluster, namespace, controller kind and controller
    (pods and nodes of one workload are one workload); a row without a controller (idle,
    unallocated, a bare pod) is its own workload by name. Fields joined by U+001F."""
    sep = "\x1f"
    has_controller = costs["controller"].astype("str") != ""
    name = costs["name"].astype("str").where(~has_controller, "")
    parts = [costs[c].astype("str") for c in ("cluster", "namespace", "controller_kind")]
    key = parts[0] + sep + parts[1] + sep + parts[2] + sep + costs["controller"].astype("str")
    return (key + sep + name).astype("str")


def _connect() -> duckdb.DuckDBPyConnection:
    con = connect()
    con.execute("SET preserve_insertion_order = true")
    return con


def _nothing(
    what: str, period: Period | None, covered: tuple[pd.Timestamp, pd.Timestamp] | None = None
) -> str:
    """The refusal of an input with nothing in the period, naming the span it does cover."""
    where = (
        f" in the period {period.start.isoformat()} to {period.end.isoformat()}" if period else ""
    )
    span = (
        f"; its {what} rows cover {covered[0].isoformat()} to {covered[1].isoformat()}"
        if covered is not None
        else ""
    )
    return f"no {what} rows to ingest{where}{span}"


def _usage_span(
    con: duckdb.DuckDBPyConnection, source: UsageSource
) -> tuple[pd.Timestamp, pd.Timestamp, pd.Timestamp, int]:
    """First window start, last window start and end, and the row count."""
    row = con.execute(
        "SELECT min(window_start), max(window_start), max(window_end), count(*) "
        f"FROM ({source.relation(con)})"
    ).fetchall()[0]
    count = int(row[3])
    if count == 0:
        zero = pd.Timestamp(0, tz="UTC")
        return zero, zero, zero, 0
    first, last_start, last_end = (pd.Timestamp(v).tz_convert("UTC") for v in row[:3])
    return first, last_start, last_end, count


def _usage_days(
    con: duckdb.DuckDBPyConnection,
    source: UsageSource,
    days: pd.DatetimeIndex,
    folder: Path | None,
    view: StoreView,
    filled: Sequence[str] = (),
) -> tuple[list[_Part], pd.DataFrame]:
    """Validate usage one day at a time (as ``allocate`` does per chunk, and against what
    the store holds: ``view``) and, with a ``folder``, write each day's rows in canonical
    order, with 0 in the ``filled`` metric columns; returns the parts and the cells."""
    zeros = [f"CAST(0 AS DOUBLE) AS {quote(m)}" for m in filled]
    columns = ", ".join([*(quote(c) for c in [*USAGE_KEY_COLUMNS, *source.metrics]), *zeros])
    order = ", ".join(USAGE_KEY_COLUMNS)
    parts: list[_Part] = []
    cells: list[pd.DataFrame] = []
    for day in days:  # one iteration per day, not per row
        rows = source.materialise(con, day, day + DAY)
        if not rows:
            continue
        day_cells = con.execute(
            "SELECT DISTINCT window_start, window_end, service AS key FROM chunk_usage"
        ).df()
        view.check_chunk(con, source, day_cells)
        cells.append(day_cells)
        if folder is not None:
            built = folder / f"{day:%Y-%m-%d}.parquet"
            target = str(built).replace("'", "''")
            with _writing(built):
                con.execute(
                    f"COPY (SELECT {columns} FROM chunk_usage ORDER BY {order}) "
                    f"TO '{target}' (FORMAT parquet)"
                )
            parts.append(_Part(f"{day:%Y-%m-%d}", built, rows))
    frame = pd.concat(cells, ignore_index=True) if cells else pd.DataFrame(columns=CELL_COLUMNS)
    return parts, _cells(frame["window_start"], frame["window_end"], frame["key"])


def _cost_days(costs: pd.DataFrame, folder: Path) -> list[_Part]:
    """One Parquet file per day of ``window_start`` (UTC), rows in the canonical order."""
    day = costs["window_start"].dt.strftime("%Y-%m-%d")
    parts = []
    for name, rows in costs.groupby(day, sort=True):  # one iteration per day
        built = folder / f"{name}.parquet"
        with _writing(built):
            rows.to_parquet(built, index=False)
        parts.append(_Part(str(name), built, len(rows)))
    return parts


def _cells(start: pd.Series, end: pd.Series, key: pd.Series) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "window_start": pd.to_datetime(start, utc=True).astype("datetime64[ns, UTC]"),
            "window_end": pd.to_datetime(end, utc=True).astype("datetime64[ns, UTC]"),
            "key": key.astype("str"),
        }
    )
    return frame.drop_duplicates().sort_values(CELL_COLUMNS).reset_index(drop=True)


def _publish(data: DataDir, kind: str, uid: str, parts: list[_Part]) -> list[BatchFile]:
    """Move the built files into place; the catalog rows that will name them."""
    files = []
    for part in parts:
        relative = partition(part.kind or kind, part.day, uid)
        sha = data.publish(part.built, relative)
        files.append(BatchFile(batch_id=0, day=part.day, path=relative, rows=part.rows,
                               sha256=sha))  # fmt: skip
    _pause_for_tests()
    return files


def _batch_sha(files: list[BatchFile]) -> str:
    """A batch's sha256: over its files' sha256, in day order."""
    return sha256_hex("\n".join(f"{f.day} {f.sha256}" for f in files))


def _pause_for_tests() -> None:
    marker = os.environ.get(PAUSE_BEFORE_COMMIT_ENV)
    if marker:
        Path(marker).write_text(str(os.getpid()))
        while True:  # until the test kills this process
            time.sleep(1)


def _days(start: pd.Timestamp, end: pd.Timestamp) -> list[str]:
    """The days (``YYYY-MM-DD``, UTC) a batch of windows ``start`` to ``end`` writes to."""
    last = pd.Timestamp(end) - pd.Timedelta(microseconds=1)
    span = pd.date_range(pd.Timestamp(start).floor("D"), last.floor("D"), freq="D")
    return [f"{d:%Y-%m-%d}" for d in span]


def _batch_uids(conn: Connection, days: list[str]) -> set[str]:
    """The uids whose files on ``days`` are not leftovers: the batches with a file on one of
    them, and every compaction (through ``batch_file (day, batch_id)``: never every batch)."""
    b, f = table(Batch).c, table(BatchFile).c
    found = conn.execute(
        select(b.uid).join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
        .where(f.day.in_(days))
    ).scalars()  # fmt: skip
    return {str(uid) for uid in found} | compaction_uids(conn)


def stored_metrics(
    conn: Connection, data: DataDir, con: duckdb.DuckDBPyConnection
) -> tuple[str, list[str]] | None:
    """The latest committed usage batch's uid and metric columns (in its files' order), or
    None before any usage: what every later usage batch is compared with (all stored usage
    has the same columns). ``POST /v1/metrics`` reads it too, to fill its batches."""
    b, f = table(Batch).c, table(BatchFile).c
    query = (
        select(b.uid, f.path)
        .join_from(table(Batch), table(BatchFile), b.id == f.batch_id)
        .where(b.kind == "usage", b.status == "committed")
        .order_by(b.id.desc())
        .limit(1)
    )
    latest = conn.execute(query).first()
    if latest is None:
        return None
    if not data.local:
        register_filesystems(con, [data.protocol])
    path = data.reader_path(str(latest.path)).replace("'", "''")
    described = con.execute(
        f"DESCRIBE SELECT * FROM read_parquet('{path}', hive_partitioning = false)"
    ).fetchall()
    return str(latest.uid), [str(r[0]) for r in described if str(r[0]) not in USAGE_KEY_COLUMNS]


@dataclass(frozen=True)
class _Span:
    """The services and windows a usage batch writes to."""

    source: UsageSource
    start: pd.Timestamp
    end: pd.Timestamp


def _check_metrics(
    conn: Connection,
    data: DataDir,
    con: duckdb.DuckDBPyConnection,
    metrics: list[str],
    origin: str,
    mode: str,
    span: _Span,
) -> list[str]:
    """The stored usage's metric columns are those of its latest batch (each batch's files
    carry every column before it, so the latest has them all). A batch may add a metric
    (``db_seconds`` from a meter, a new gauge): earlier files lack the column and read 0 for
    it (:class:`~tenantcost.usage_source.ParquetUsage` ``missing_as_zero``), which is what
    was measured of it before anyone measured it. A batch may lack some of the stored
    columns: its files get them as 0 (the returned columns, in the stored order). A ``sum``
    batch then adds nothing to them (a meter or an OTLP export posting one metric). A
    ``replace`` batch would set them to 0 in the cells it replaces: accepted where the store
    holds no other value there (its services and windows), refused where it would erase
    one (the sender decides such a correction by sending the values)."""
    latest = stored_metrics(conn, data, con)
    if latest is None:
        return []
    uid, stored = latest
    missing = [m for m in stored if m not in metrics]
    if mode == "sum" or not missing:
        return missing
    held = _held_columns(conn, data, con, missing, span)
    if not held:
        return missing
    raise InputError(
        f"usage metric columns ({', '.join(metrics)}) lack the stored usage's "
        f"{', '.join(held)} (batch {uid[:12]}), which holds values in the windows and "
        "services this replace batch would overwrite; a replace batch must carry all of them "
        "(a sum batch lacking some adds 0 there)",
        file=origin,
    )


def _held_columns(
    conn: Connection,
    data: DataDir,
    con: duckdb.DuckDBPyConnection,
    columns: list[str],
    span: _Span,
) -> list[str]:
    """Which of ``columns`` any committed usage file holds a non-zero value of, in the
    span's windows and services (every committed file, superseded rows included: a value a
    later batch replaced still makes the answer yes, which errs on the side of refusing)."""
    b, f = table(Batch).c, table(BatchFile).c
    last = span.end - pd.Timedelta(microseconds=1)
    paths = (
        conn.execute(
            select(f.path)
            .join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
            .where(b.kind == "usage", b.status == "committed")
            .where(f.day >= f"{span.start:%Y-%m-%d}", f.day <= f"{last:%Y-%m-%d}")
        )
        .scalars()
        .all()
    )
    if not paths:
        return []
    if not data.local:
        register_filesystems(con, [data.protocol])
    files = ", ".join("'" + data.reader_path(str(p)).replace("'", "''") + "'" for p in paths)
    services = con.execute(f"SELECT DISTINCT service FROM ({span.source.relation(con)})").fetchall()
    names = ", ".join("'" + str(r[0]).replace("'", "''") + "'" for r in services) or "NULL"
    scan = f"read_parquet([{files}], union_by_name = true, hive_partitioning = false)"
    present = {str(r[0]) for r in con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
    found = [c for c in columns if c in present]  # a column no file of the days has: none
    if not found:
        return []
    checks = ", ".join(f"bool_or(coalesce({quote(c)}, 0) <> 0)" for c in found)
    row = con.execute(
        f"SELECT {checks} FROM {scan} WHERE CAST(service AS VARCHAR) IN ({names}) "
        f"AND CAST(window_start AS TIMESTAMPTZ) >= {timestamp_literal(span.start)} "
        f"AND CAST(window_start AS TIMESTAMPTZ) < {timestamp_literal(span.end)}"
    ).fetchall()
    return [c for c, held in zip(found, row[0], strict=True) if held] if row else []


def _commit(conn: Connection, batch: Batch, cells: pd.DataFrame, files: list[BatchFile]) -> int:
    """Insert the batch, its cells and its files (the commit point follows); returns how
    many of its cells earlier batches held."""
    c, b = table(BatchCell).c, table(Batch).c
    earlier = conn.execute(
        select(c.window_start, c.window_end, c.key)
        .join_from(table(BatchCell), table(Batch), b.id == c.batch_id)
        .where(b.kind == batch.kind, b.status == "committed")
        .where(c.window_start >= batch.window_from, c.window_start < batch.window_to)
        .distinct()
    ).all()
    held = _cells(
        pd.Series([r[0] for r in earlier], dtype="object"),
        pd.Series([r[1] for r in earlier], dtype="object"),
        pd.Series([r[2] for r in earlier], dtype="object"),
    )
    replaced = len(cells.merge(held, on=CELL_COLUMNS)) if len(held) else 0
    batch.created_at = utcnow()
    with Session(bind=conn) as session:  # joins the write transaction
        session.add(batch)
        session.flush()
        batch_id = batch.id
        session.expunge(batch)
    assert batch_id is not None
    records = [
        {"batch_id": batch_id, "window_start": s, "window_end": e, "key": k}
        for s, e, k in zip(
            cells["window_start"].dt.to_pydatetime(),
            cells["window_end"].dt.to_pydatetime(),
            cells["key"].tolist(),
            strict=True,
        )
    ]
    if records:
        conn.execute(insert(table(BatchCell)), records)
    keep = ("day", "path", "rows", "sha256")
    conn.execute(
        insert(table(BatchFile)),
        [{"batch_id": batch_id, **{k: getattr(f, k) for k in keep}} for f in files],
    )
    return replaced


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A file that cannot be written (disk full, file-size limit) is one line, exit 2."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None
    except duckdb.IOException as exc:
        errno = re.search(r'"errno":"(\d+)"', str(exc))  # DuckDB's error carries the errno
        reason = os.strerror(int(errno.group(1))) if errno else str(exc).splitlines()[0]
        raise InputError(f"cannot write: {reason}", file=str(path)) from None


@contextmanager
def _removed_on_failure(data: DataDir, uid: str) -> Iterator[None]:
    """Any failure (bad row, full disk, lost database): remove the batch's files now (the
    next ingest would anyway; readers never see them)."""
    try:
        yield
    except BaseException:
        data.remove_batch(uid)
        raise
