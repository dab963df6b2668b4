"""Reading the store's raw inputs back: each cell once, from committed batches only.

:func:`stored_usage` is a :class:`~tenantcost.usage_source.UsageSource` over the committed
Parquet files of a period, scanned by DuckDB chunk by chunk like any Parquet usage (and
validated the same way); :func:`stored_costs` is the canonical cost table of a period. Both
feed :func:`tenantcost.allocate.allocate_stream` unchanged.

Which rows count (see :mod:`tenantcost.store.ingest`): the catalog gives, per cell, the latest
committed ``replace`` batch holding it; a row counts if its batch is that one or a later
(``sum``) batch, or if no ``replace`` batch holds its cell. Files of uncommitted batches are
never opened: the list of files comes from the catalog, not from listing the folder. A
withdrawn batch (:mod:`tenantcost.store.batches`) is not committed: it takes part in none of
this, so the cells a withdrawn ``replace`` batch had replaced count as they did before it.

**Speed.** Only a *contested* cell, one that two or more committed batches hold, needs that
rule: the rows of every other cell are the rows of its only batch (a batch never holds the
same window, service and client twice). So the scan is the plain Parquet scan of the files
(the columns DuckDB reads, nothing per row) for uncontested cells, plus, only when some cell
is contested, the batch join and the per-client sum over the rows of those cells. A month
ingested once, or corrected by whole cells, is read as fast as the files themselves.
"""

from __future__ import annotations

import itertools
from typing import Any

import duckdb
import pandas as pd
from sqlalchemy import Connection, Engine, select

from tenantcost.gauge_usage import GaugedUsage
from tenantcost.readers.canonical import conform_costs
from tenantcost.readers.costs import sort_costs
from tenantcost.split import quote
from tenantcost.store.compaction import active, active_none, loose_files
from tenantcost.store.data import UID_SQL, Store
from tenantcost.store.ingest import CELL_COLUMNS, workload_key
from tenantcost.store.models import BatchCell, table
from tenantcost.store.samples import stored_samples
from tenantcost.store.usage_metrics import stored_gauges
from tenantcost.tables import empty_costs
from tenantcost.usage_source import ParquetUsage, UsageSource
from tenantcost.windows import Period

_names = itertools.count(1)


def stored_usage(
    store: Store, period: Period, con: duckdb.DuckDBPyConnection
) -> UsageSource | None:
    """The store's usage of ``period`` (windows inside it), or ``None`` when it has none.
    With gauges declared, their samples are integrated into it per hour
    (:class:`~tenantcost.gauge_usage.GaugedUsage`)."""
    files = _files(store, "usage", period)
    counters: UsageSource | None = None
    if not files.empty:
        cells = _live_cells(store.engine, "usage", period)
        contested = _contested_cells(store.engine, "usage", period)
        counters = StoredUsage(store, files, cells, contested, con).within(period)
    with store.engine.connect() as conn:
        gauges = stored_gauges(conn)
        if not gauges:
            return counters
        samples = stored_samples(conn, gauges, period.start, period.end)
    if counters is None and samples.empty:
        return None
    origin = f"stored usage in {store.data.url}"
    return GaugedUsage(counters, samples, gauges, origin, period)


def stored_costs(store: Store, period: Period, *, tag_batches: bool = False) -> pd.DataFrame:
    """The store's canonical cost table of ``period`` (windows inside it), as ``read_costs``
    would give it for the ingested files. With ``tag_batches`` (``run``) each row's origin
    ends with ``(costs batch <uid>)``, so an error about a row names the batch to withdraw."""
    files = _files(store, "costs", period)
    if files.empty:
        return empty_costs()
    frames = []
    for uid, batch_id, path in files.itertuples(index=False):  # per file
        frame = pd.read_parquet(store.data.reader_path(path))
        if tag_batches:
            frame["origin"] = frame["origin"].astype("str") + f" (costs batch {uid[:12]})"
        frames.append(frame.assign(_batch=batch_id))
    costs = pd.concat(frames, ignore_index=True)
    costs["_key"] = workload_key(costs)
    cells = _live_cells(store.engine, "costs", period)
    ws = pd.to_datetime(costs["window_start"], utc=True)
    we = pd.to_datetime(costs["window_end"], utc=True)
    costs["window_start"] = ws.astype("datetime64[ns, UTC]")
    costs["window_end"] = we.astype("datetime64[ns, UTC]")
    costs = costs.merge(
        cells.rename(columns={"key": "_key", "batch_id": "_replaced_by"}),
        on=["window_start", "window_end", "_key"],
        how="left",
    )
    live = costs["_replaced_by"].isna() | (costs["_batch"] >= costs["_replaced_by"])
    inside = (costs["window_start"] >= period.start) & (costs["window_end"] <= period.end)
    kept = costs[live & inside].drop(columns=["_batch", "_key", "_replaced_by"])
    if kept.empty:
        return empty_costs()
    return sort_costs(conform_costs(kept.reset_index(drop=True)))


class StoredUsage(ParquetUsage):
    """The committed usage files of a period, each cell's live rows only, summed per window,
    service and client (``sum`` batches add up); errors name the stored file and row."""

    def __init__(
        self,
        store: Store,
        files: pd.DataFrame,
        cells: pd.DataFrame,
        contested: pd.DataFrame,
        con: duckdb.DuckDBPyConnection,
    ) -> None:
        paths = [store.data.reader_path(p) for p in files["path"]]
        super().__init__(paths, con, missing_as_zero=True)  # reads the schema: metrics, types
        self.origin = f"stored usage in {store.data.url}"
        if contested.empty:
            return  # every cell has one batch: the files' rows as they are
        n = next(_names)
        batches, live, disputed = (
            f"tc_stored_{what}_{n}" for what in ("batches", "cells", "contested")
        )
        con.register(batches, files[["uid", "batch_id"]].drop_duplicates())
        con.register(live, cells)
        con.register(disputed, contested)
        metrics = [quote(m) for m in self.metrics]
        columns = ", ".join(["window_start", "window_end", "service", "client", *metrics])
        sums = ", ".join(f"sum(CAST(u.{m} AS DOUBLE)) AS {m}" for m in metrics)
        same_cell = (
            "d.window_start = u.window_start AND d.window_end = u.window_end "
            "AND d.key = CAST(u.service AS VARCHAR)"
        )
        self.scan = f"""(
            SELECT {columns}, filename, file_row_number FROM {self.scan} u
            WHERE NOT EXISTS (SELECT 1 FROM {disputed} d WHERE {same_cell})
            UNION ALL BY NAME
            SELECT u.window_start, u.window_end, u.service, u.client, {sums},
                   min(u.filename) AS filename, min(u.file_row_number) AS file_row_number
            FROM (SELECT *, {UID_SQL} AS uid FROM {self.scan}) u
            SEMI JOIN {disputed} d ON {same_cell}
            JOIN {batches} b ON b.uid = u.uid
            LEFT JOIN {live} c ON c.window_start = u.window_start
                AND c.window_end = u.window_end AND c.key = CAST(u.service AS VARCHAR)
            WHERE c.batch_id IS NULL OR b.batch_id >= c.batch_id
            GROUP BY u.window_start, u.window_end, u.service, u.client)"""

    def for_chunk(self, start: pd.Timestamp, end: pd.Timestamp) -> UsageSource:
        """The catalog's frames are registered on this process's DuckDB connection."""
        return self


def days_of(period: Period) -> tuple[str, str]:
    """The first and last day (``YYYY-MM-DD``) whose files can hold windows of ``period``."""
    last_day = period.end - pd.Timedelta(microseconds=1)
    return f"{period.start:%Y-%m-%d}", f"{last_day:%Y-%m-%d}"


def _files(store: Store, kind: str, period: Period) -> pd.DataFrame:
    """The files to read for ``kind`` on the days that can hold windows of ``period``: each
    day's active usage compaction (a virtual batch whose id is the largest it folds, its uid
    the file's name) and the files of committed batches it does not fold
    (:mod:`tenantcost.store.compaction`), by batch id."""
    first, last = days_of(period)
    with store.engine.connect() as connection:
        done = active(connection, first, last) if kind == "usage" else active_none()
        files = loose_files(connection, kind, first, last)
    virtual = done.rename(columns={"upto_batch_id": "batch_id"})[["uid", "batch_id", "path"]]
    frame = pd.concat([virtual, files[["uid", "batch_id", "path"]]], ignore_index=True)
    frame = frame.astype({"batch_id": "int64"})
    return frame.sort_values("batch_id", kind="stable").reset_index(drop=True)


def _cells_of(connection: Connection, ids: list[int], period: Period, query: Any) -> list[Any]:
    """``query`` (over ``batch_cell``) for the batches ``ids``, in bounded IN lists."""
    c = table(BatchCell).c
    inside = (c.window_start >= period.start.to_pydatetime()) & (
        c.window_start < period.end.to_pydatetime())  # fmt: skip
    rows: list[Any] = []
    for start in range(0, len(ids), 900):
        rows += [tuple(r) for r in connection.execute(
            query.where(c.batch_id.in_(ids[start:start + 900]), inside)).all()]  # fmt: skip
    return rows


def _contested_cells(engine: Engine, kind: str, period: Period) -> pd.DataFrame:
    """The cells of ``period`` that two or more of what is read may hold (``window_start,
    window_end, key``): only their rows need the which-batch-counts rule. What is read are
    each day's compaction and the batches it does not fold: a cell two of those batches hold
    (within one IN list of them: a cell's batches are a day's, and a day's loose batches are
    at most a few dozen under compaction), and (a superset, which the rule reads the same)
    every cell of a batch after a day's compaction. The folded batches' cells are never
    walked."""
    c = table(BatchCell).c
    first, last = days_of(period)
    with engine.connect() as connection:
        done = active(connection, first, last) if kind == "usage" else active_none()
        files = loose_files(connection, kind, first, last)
        ids = sorted({int(i) for i in files["batch_id"]})
        cell = (c.window_start, c.window_end, c.key)
        several = pd.DataFrame(columns=CELL_COLUMNS)
        if len(ids) > 1:
            held = _cells_of(connection, ids, period,
                             select(*cell, c.batch_id).distinct())  # fmt: skip
            pairs = pd.DataFrame(held, columns=[*CELL_COLUMNS, "batch_id"])
            counts = pairs.groupby(CELL_COLUMNS, as_index=False).size()
            several = counts[counts["size"] > 1][CELL_COLUMNS]
        after = sorted({int(i) for i in files[files["day"].isin(set(done["day"]))]["batch_id"]})
        compacted = _cells_of(connection, after, period, select(*cell).distinct())
    found = pd.concat([several, pd.DataFrame(compacted, columns=CELL_COLUMNS)])
    return _cell_frame(found.drop_duplicates().reset_index(drop=True))


def _live_cells(engine: Engine, kind: str, period: Period) -> pd.DataFrame:
    """Per cell of ``period``, the id of the latest committed ``replace`` batch holding it,
    among the batches no compaction folds (a folded ``replace`` batch's rows are in its day's
    compaction, whose id is at least its own, so it need not be named)."""
    c = table(BatchCell).c
    first, last = days_of(period)
    with engine.connect() as connection:
        files = loose_files(connection, kind, first, last)
        ids = sorted({int(i) for i in files[files["replace"].astype(bool)]["batch_id"]})
        rows = _cells_of(connection, ids, period,
                         select(c.window_start, c.window_end, c.key, c.batch_id))  # fmt: skip
    frame = pd.DataFrame(rows, columns=[*CELL_COLUMNS, "batch_id"])
    if len(frame):
        frame = frame.groupby(CELL_COLUMNS, as_index=False)["batch_id"].max()
    return _cell_frame(frame).astype({"batch_id": "int64"})


def _cell_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Cells as DuckDB joins them: UTC timestamps and string keys."""
    for column in ("window_start", "window_end"):
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[ns, UTC]")
    return frame.astype({"key": "str"})


__all__ = ["StoredUsage", "stored_costs", "stored_usage"]
