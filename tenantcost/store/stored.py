"""Reading the store's raw inputs back: each cell once, from committed batches only.

:func:`stored_usage` is a :class:`~tenantcost.usage_source.UsageSource` over the committed
Parquet files of a period, scanned by DuckDB chunk by chunk like any Parquet usage (and
validated the same way); :func:`stored_costs` is the canonical cost table of a period. Both
feed :func:`tenantcost.allocate.allocate_stream` unchanged.

Which rows count (see :mod:`tenantcost.store.ingest`): the catalog gives, per cell, the latest
committed ``replace`` batch holding it; a row counts if its batch is that one or a later
(``sum``) batch, or if no ``replace`` batch holds its cell. Files of uncommitted batches are
never opened: the list of files comes from the catalog, not from listing the folder.
"""

from __future__ import annotations

import itertools

import duckdb
import pandas as pd
from sqlalchemy import Engine, func, select

from tenantcost.readers.canonical import conform_costs
from tenantcost.readers.costs import sort_costs
from tenantcost.split import quote
from tenantcost.store.data import UID_SQL, Store
from tenantcost.store.ingest import CELL_COLUMNS, workload_key
from tenantcost.store.models import Batch, BatchCell, BatchFile, table
from tenantcost.tables import empty_costs
from tenantcost.usage_source import ParquetUsage, UsageSource
from tenantcost.windows import Period

_names = itertools.count(1)


def stored_usage(
    store: Store, period: Period, con: duckdb.DuckDBPyConnection
) -> UsageSource | None:
    """The store's usage of ``period`` (windows inside it), or ``None`` when it has none."""
    files = _files(store, "usage", period)
    if files.empty:
        return None
    return StoredUsage(store, files, _live_cells(store.engine, "usage", period), con).within(period)


def stored_costs(store: Store, period: Period) -> pd.DataFrame:
    """The store's canonical cost table of ``period`` (windows inside it), as ``read_costs``
    would give it for the ingested files."""
    files = _files(store, "costs", period)
    if files.empty:
        return empty_costs()
    frames = []
    for batch_id, path in zip(files["batch_id"], files["path"], strict=True):  # per file
        frame = pd.read_parquet(store.data.reader_path(path))
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
        con: duckdb.DuckDBPyConnection,
    ) -> None:
        paths = [store.data.reader_path(p) for p in files["path"]]
        super().__init__(paths, con)  # reads the schema: metrics, types
        self.origin = f"stored usage in {store.data.url}"
        n = next(_names)
        batches, live = f"tc_stored_batches_{n}", f"tc_stored_cells_{n}"
        con.register(batches, files[["uid", "batch_id"]].drop_duplicates())
        con.register(live, cells)
        sums = ", ".join(f"sum(CAST(u.{quote(m)} AS DOUBLE)) AS {quote(m)}" for m in self.metrics)
        self.scan = f"""(
            SELECT u.window_start, u.window_end, u.service, u.client, {sums},
                   min(u.filename) AS filename, min(u.file_row_number) AS file_row_number
            FROM (SELECT *, {UID_SQL} AS uid FROM {self.scan}) u
            JOIN {batches} b ON b.uid = u.uid
            LEFT JOIN {live} c ON c.window_start = u.window_start
                AND c.window_end = u.window_end AND c.key = CAST(u.service AS VARCHAR)
            WHERE c.batch_id IS NULL OR b.batch_id >= c.batch_id
            GROUP BY u.window_start, u.window_end, u.service, u.client)"""

    def for_chunk(self, start: pd.Timestamp, end: pd.Timestamp) -> UsageSource:
        """The catalog's frames are registered on this process's DuckDB connection."""
        return self


def _files(store: Store, kind: str, period: Period) -> pd.DataFrame:
    """The files of committed batches of ``kind`` whose day can hold windows of ``period``."""
    b, f = table(Batch).c, table(BatchFile).c
    last_day = period.end - pd.Timedelta(microseconds=1)
    query = (
        select(b.uid, b.id, f.path)
        .join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
        .where(b.kind == kind, b.status == "committed")
        .where(f.day >= f"{period.start:%Y-%m-%d}", f.day <= f"{last_day:%Y-%m-%d}")
        .order_by(b.id, f.day)
    )
    with store.engine.connect() as connection:
        rows = connection.execute(query).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=["uid", "batch_id", "path"])


def _live_cells(engine: Engine, kind: str, period: Period) -> pd.DataFrame:
    """Per cell of ``period``, the id of the latest committed ``replace`` batch holding it."""
    b, c = table(Batch).c, table(BatchCell).c
    query = (
        select(c.window_start, c.window_end, c.key, func.max(b.id))
        .join_from(table(BatchCell), table(Batch), b.id == c.batch_id)
        .where(b.kind == kind, b.status == "committed", b.mode == "replace")
        .where(c.window_start >= period.start.to_pydatetime())
        .where(c.window_start < period.end.to_pydatetime())
        .group_by(c.window_start, c.window_end, c.key)
    )
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=[*CELL_COLUMNS, "batch_id"])
    for column in ("window_start", "window_end"):
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[ns, UTC]")
    return frame.astype({"key": "str", "batch_id": "int64"})


__all__ = ["StoredUsage", "stored_costs", "stored_usage"]
