"""Where the allocation reads usage from, one time chunk at a time.

Two sources share one interface, so the same allocation code runs on a 6-row CSV and on a
100-million-row month:

* :class:`FrameUsage` wraps a canonical usage table already in memory (read and validated by
  :func:`tenantcost.readers.usage.read_usage`, or produced by the Prometheus reader);
* :class:`ParquetUsage` scans Parquet files, folders or hive-partitioned datasets with DuckDB,
  reading only the needed columns and the row groups (and ``date=`` partitions) of the chunk,
  and validates each chunk as it goes (errors name the file and the record number).

Each source materialises one chunk into the DuckDB temp table ``chunk_usage`` with the
canonical columns (``window_start, window_end, service, client``, the metrics). Where a row
came from (file and row) is looked up only when an error has to name it.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import duckdb
import numpy as np
import pandas as pd

from tenantcost.client_id import bad_client_id_sql, client_id_problem
from tenantcost.duck import quote, timestamp_literal  # timestamp_literal re-exported
from tenantcost.errors import InputError, InternalError
from tenantcost.limits import MAX_USAGE_VALUE
from tenantcost.readers.costs import expand_paths
from tenantcost.readers.usage import (
    OFF_HOUR_END_SQL,
    OFF_HOUR_START_SQL,
    off_hour_problem,
    usage_limit_problem,
)
from tenantcost.suggest import did_you_mean
from tenantcost.tables import USAGE_KEY_COLUMNS, metric_columns
from tenantcost.windows import Period, select_period


def client_sums(
    usage: UsageSource | None, period: Period, con: duckdb.DuckDBPyConnection, metric: str
) -> pd.DataFrame | None:
    """Each client's sum of ``metric`` over every service in ``period`` (``client, metric``;
    one aggregate query over the source); None when the usage has no such column."""
    if usage is None or metric not in usage.metrics:
        return None
    relation = usage.within(period).relation(con)
    return con.execute(
        f'SELECT CAST(client AS VARCHAR) AS client, SUM("{metric}")::DOUBLE AS "{metric}" '
        f"FROM ({relation}) WHERE client IS NOT NULL AND CAST(client AS VARCHAR) <> '' "
        f"AND window_start >= {timestamp_literal(period.start)} "
        f"AND window_start < {timestamp_literal(period.end)} GROUP BY 1 ORDER BY 1"
    ).df()


Message = str | Callable[[pd.Series], str]
"""A check's one-line reason: fixed, or made from the first bad row's key columns."""


class UsageSource(ABC):
    """Usage, readable per time chunk."""

    origin: str
    metrics: list[str]

    @abstractmethod
    def services(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        """Every service named in the usage (to check the rules against it)."""

    @abstractmethod
    def materialise(
        self, con: duckdb.DuckDBPyConnection, start: pd.Timestamp, end: pd.Timestamp
    ) -> int:
        """Create ``chunk_usage`` with the rows whose window starts in ``[start, end)``.

        Returns the number of rows.
        """

    @abstractmethod
    def estimated_rows(self, con: duckdb.DuckDBPyConnection) -> int:
        """About how many usage rows there are (for choosing the chunk size)."""

    @abstractmethod
    def count_outside(
        self, con: duckdb.DuckDBPyConnection, start: pd.Timestamp, end: pd.Timestamp
    ) -> int:
        """How many usage rows have a window starting outside ``[start, end)``."""

    def for_chunk(self, start: pd.Timestamp, end: pd.Timestamp) -> UsageSource:
        """The source a chunk task needs (a worker gets this, not the whole source)."""
        return self

    @abstractmethod
    def relation(self, con: duckdb.DuckDBPyConnection) -> str:
        """A SQL query of every usage row's canonical columns (``window_start, window_end,
        service, client``, the metrics), for aggregates over the whole source (the report's
        confidence figures, client ids) without holding the rows in pandas."""

    @abstractmethod
    def within(self, period: Period) -> UsageSource:
        """Only the rows whose window lies inside ``period`` (a re-run of another period sees
        and checks only that period's usage)."""

    def windows(self, con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
        """The distinct windows of the current chunk (``window_start, window_end``)."""
        frame = con.execute(
            "SELECT DISTINCT window_start, window_end FROM chunk_usage "
            "ORDER BY window_start, window_end"
        ).df()
        for column in ("window_start", "window_end"):
            frame[column] = frame[column].astype("datetime64[ns, UTC]")
        return frame

    @abstractmethod
    def first_row(self, con: duckdb.DuckDBPyConnection, condition: str) -> str:
        """``file:row n`` of the first row of the current chunk meeting a SQL ``condition``
        (only called to word an error, so it may re-read the input)."""

    def with_origins(self, con: duckdb.DuckDBPyConnection, windows: pd.DataFrame) -> pd.DataFrame:
        """``windows`` with the origin of one usage row of each (for error messages)."""
        origins = [
            self.first_row(
                con,
                f"window_start = {timestamp_literal(w.window_start)} "
                f"AND window_end = {timestamp_literal(w.window_end)}",
            )
            for w in windows.itertuples(index=False)  # only the few windows an error names
        ]
        return windows.assign(origin=origins)


class FrameUsage(UsageSource):
    """A canonical usage table in memory (already validated by its reader)."""

    def __init__(self, frame: pd.DataFrame, origin: str = "usage") -> None:
        self.frame = frame
        self.origin = origin
        self.metrics = metric_columns(frame)

    def services(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        return sorted(self.frame["service"].unique().tolist())

    def for_chunk(self, start: pd.Timestamp, end: pd.Timestamp) -> UsageSource:
        ws = self.frame["window_start"]
        return FrameUsage(self.frame[(ws >= start) & (ws < end)], origin=self.origin)

    def estimated_rows(self, con: duckdb.DuckDBPyConnection) -> int:
        return len(self.frame)

    def count_outside(
        self, con: duckdb.DuckDBPyConnection, start: pd.Timestamp, end: pd.Timestamp
    ) -> int:
        ws = self.frame["window_start"]
        return int(((ws < start) | (ws >= end)).sum())

    def materialise(
        self, con: duckdb.DuckDBPyConnection, start: pd.Timestamp, end: pd.Timestamp
    ) -> int:
        con.register("usage_frame", self.frame)
        columns = ", ".join(quote(c) for c in [*USAGE_KEY_COLUMNS, *self.metrics, "origin"])
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE chunk_usage AS SELECT {columns} FROM usage_frame "
            f"WHERE window_start >= {timestamp_literal(start)} "
            f"AND window_start < {timestamp_literal(end)}"
        )
        con.unregister("usage_frame")
        row = _first(con.execute("SELECT count(*) FROM chunk_usage"))
        return int(row[0]) if row else 0

    def first_row(self, con: duckdb.DuckDBPyConnection, condition: str) -> str:
        row = _first(con.execute(f"SELECT origin FROM chunk_usage WHERE {condition} LIMIT 1"))
        return str(row[0]) if row else self.origin

    def relation(self, con: duckdb.DuckDBPyConnection) -> str:
        name = f"usage_frame_{id(self)}"  # registered for the connection's lifetime
        con.register(name, self.frame)
        columns = ", ".join(quote(c) for c in [*USAGE_KEY_COLUMNS, *self.metrics])
        return f"SELECT {columns} FROM {name}"

    def within(self, period: Period) -> UsageSource:
        return FrameUsage(select_period(self.frame, period, "usage"), origin=self.origin)


_NUMERIC_PREFIXES = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL",
    "REAL",
)


class ParquetUsage(UsageSource):
    """Parquet usage (files, folders, hive-partitioned datasets), scanned by DuckDB per chunk."""

    def __init__(
        self,
        paths: Sequence[str | Path],
        con: duckdb.DuckDBPyConnection,
        *,
        missing_as_zero: bool = False,
    ) -> None:
        """``missing_as_zero``: a metric column some files lack reads 0 in their rows (the
        store's files: a metric added by a later batch was not measured before it); for a
        user's files it stays an error (a row without a value)."""
        urls = [str(p) for p in paths if is_url(p)]
        found = expand_paths([p for p in paths if not is_url(p)], (".parquet",), "usage")
        # URLs (s3://bucket/usage/, file:///data/usage.parquet) go to DuckDB as they are; a
        # trailing slash means every Parquet file below. Their protocols are served through
        # fsspec when DuckDB does not know them (install s3fs, gcsfs, ... as needed).
        self.files = [str(f) for f, _ in found] + [
            u + "**/*.parquet" if u.endswith("/") else u for u in urls
        ]
        self.protocols = sorted({u.split("://", 1)[0] for u in urls} - {"file"})
        register_filesystems(con, self.protocols)
        self.origin = ", ".join(str(p) for p in paths)  # before the partition scan below
        self.partitions = sorted(
            (
                {
                    part.split("=", 1)[0]
                    for f, folder in found
                    if folder is not None
                    for part in f.relative_to(folder).parts[:-1]
                    if "=" in part
                }
                | {
                    part.split("=", 1)[0]
                    for u in urls
                    if u.endswith("/")
                    for found_url in _glob(con, u + "**/*.parquet")
                    for part in _relative(found_url, u).split("/")[:-1]
                    if "=" in part
                }
            )
            - set(USAGE_KEY_COLUMNS)
        )
        file_list = "[" + ", ".join(_literal(f) for f in self.files) + "]"
        hive = "true" if self.partitions or any(u.endswith("/") for u in urls) else "false"
        self.scan = (
            f"read_parquet({file_list}, hive_partitioning = {hive}, union_by_name = true, "
            "filename = true, file_row_number = true)"
        )
        try:
            schema = con.execute(f"DESCRIBE SELECT * FROM {self.scan}").fetchall()
        except duckdb.Error as exc:
            raise InputError(f"cannot read Parquet: {_first_line(exc)}", file=self.origin) from None
        types = {str(name): str(kind) for name, kind, *_ in schema}
        present = [c for c in types if c not in ("filename", "file_row_number", *self.partitions)]
        for column in USAGE_KEY_COLUMNS:
            if column not in present:
                hint = did_you_mean(column, present)
                raise InputError(
                    f"required column is missing{hint}; the files have: {', '.join(present)}",
                    file=self.files[0],
                    column=column,
                )
        self.metrics = [c for c in present if c not in USAGE_KEY_COLUMNS and c != "origin"]
        if not self.metrics:
            raise InputError("no metric columns besides the key columns", file=self.files[0])
        for metric in self.metrics:
            if not types[metric].upper().startswith(_NUMERIC_PREFIXES):
                raise InputError(
                    f"metric column must be numeric, found Parquet type {types[metric]}",
                    file=self.files[0],
                    column=metric,
                )
        self.date_partition = "date" in self.partitions
        if missing_as_zero:
            filled = ", ".join(f"coalesce({quote(m)}, 0) AS {quote(m)}" for m in self.metrics)
            self.scan = f"(SELECT * REPLACE ({filled}) FROM {self.scan})"

    def services(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        rows = con.execute(
            f"SELECT DISTINCT CAST(service AS VARCHAR) FROM {self.scan} WHERE service IS NOT NULL"
        ).fetchall()
        return sorted(str(r[0]) for r in rows)

    def estimated_rows(self, con: duckdb.DuckDBPyConnection) -> int:
        """From the Parquet footers: no data page is read."""
        files = "[" + ", ".join(_literal(f) for f in self.files) + "]"
        row = _first(con.execute(f"SELECT sum(num_rows) FROM parquet_file_metadata({files})"))
        return int(row[0]) if row and row[0] is not None else 0

    def count_outside(
        self, con: duckdb.DuckDBPyConnection, start: pd.Timestamp, end: pd.Timestamp
    ) -> int:
        row = _first(
            con.execute(
                f"SELECT count(*) FROM {self.scan} WHERE CAST(window_start AS TIMESTAMPTZ) < "
                f"{timestamp_literal(start)} OR CAST(window_start AS TIMESTAMPTZ) >= "
                f"{timestamp_literal(end)}"
            )
        )
        return int(row[0]) if row else 0

    def materialise(
        self, con: duckdb.DuckDBPyConnection, start: pd.Timestamp, end: pd.Timestamp
    ) -> int:
        register_filesystems(con, self.protocols)  # a worker's own connection needs them too
        where = (
            f"CAST(window_start AS TIMESTAMPTZ) >= {timestamp_literal(start)} "
            f"AND CAST(window_start AS TIMESTAMPTZ) < {timestamp_literal(end)}"
        )
        if self.date_partition:
            # Prune date=YYYY-MM-DD partitions before reading any row group.
            first = start.tz_convert("UTC").date() - pd.Timedelta(days=1)
            last = end.tz_convert("UTC").date()
            where += f" AND CAST(date AS DATE) BETWEEN DATE '{first}' AND DATE '{last}'"
        self._chunk_where = where
        try:  # text that is not UTF-8 (a client id), values DuckDB cannot cast: one line
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE chunk_usage AS {self._select(where, origin=False)}"
            )
        except (duckdb.InvalidInputException, duckdb.ConversionException) as exc:
            raise InputError(f"cannot read usage: {_first_line(exc)}", file=self.origin) from None
        self._validate(con)
        row = _first(con.execute("SELECT count(*) FROM chunk_usage"))
        return int(row[0]) if row else 0

    def _select(self, where: str, *, origin: bool) -> str:
        """The canonical columns of the rows meeting ``where`` (with file and row if asked)."""
        metrics = ", ".join(f"CAST({quote(m)} AS DOUBLE) AS {quote(m)}" for m in self.metrics)
        extra = ", filename AS origin_file, file_row_number + 1 AS origin_row" if origin else ""
        return f"""
            SELECT CAST(window_start AS TIMESTAMPTZ) AS window_start,
                   CAST(window_end AS TIMESTAMPTZ) AS window_end,
                   CAST(service AS VARCHAR) AS service,
                   coalesce(CAST(client AS VARCHAR), '') AS client,
                   {metrics}{extra}
            FROM {self.scan} WHERE {where}"""

    def relation(self, con: duckdb.DuckDBPyConnection) -> str:
        register_filesystems(con, self.protocols)
        return self._select("true", origin=False)

    def within(self, period: Period) -> UsageSource:
        """The same files, scanned through a filter on whole windows inside ``period``."""
        narrowed = copy.copy(self)
        narrowed.scan = (
            f"(SELECT * FROM {self.scan} WHERE CAST(window_start AS TIMESTAMPTZ) >= "
            f"{timestamp_literal(period.start)} AND CAST(window_end AS TIMESTAMPTZ) <= "
            f"{timestamp_literal(period.end)})"
        )
        return narrowed

    def first_row(self, con: duckdb.DuckDBPyConnection, condition: str) -> str:
        """Re-read the chunk with file names and row numbers (errors only) and name the row."""
        row = _first(
            con.execute(
                f"SELECT origin_file, origin_row FROM "
                f"({self._select(self._chunk_where, origin=True)}) "
                f"WHERE {condition} ORDER BY origin_file, origin_row LIMIT 1"
            )
        )
        return f"{row[0]}:row {row[1]}" if row else self.origin

    def _validate(self, con: duckdb.DuckDBPyConnection) -> None:
        """The checks the CSV reader makes, as SQL over the chunk: one pass that finds whether
        any row has a problem (and hashes every row's key for the duplicate check), and one
        over the distinct windows and client ids (:func:`_bad_keys`); only then the first bad
        row of the first kind found, by file and row."""
        checks: list[tuple[str, str, Message]] = [
            (
                "service IS NULL OR trim(service) = ''",
                "service",
                "service is empty: every usage row must name the service it measures",
            ),
            ("window_end <= window_start", "window_end", "window_end is not after window_start"),
            (OFF_HOUR_START_SQL, "window_start", _off_hour),
            (OFF_HOUR_END_SQL, "window_end", _off_hour),
            (
                bad_client_id_sql("client"),
                "client",
                lambda row: client_id_problem(str(row["client"])) or "client id refused",
            ),
        ]
        for m in self.metrics:
            q = quote(m)
            checks.append(
                (
                    f"{q} IS NULL OR isnan({q})",
                    m,
                    "usage value is missing: every metric needs a number >= 0",
                )
            )
            checks.append((f"{q} < 0 OR isinf({q})", m, "usage value must be finite and >= 0"))
            checks.append((f"{q} > {MAX_USAGE_VALUE!r}", m, usage_limit_problem("")))
        key_checks = {OFF_HOUR_START_SQL, OFF_HOUR_END_SQL, bad_client_id_sql("client")}
        any_problem = " OR ".join(f"({c})" for c, _, _ in checks if c not in key_checks)
        hashes, problems = _scan_chunk(con, any_problem)
        if problems or _bad_keys(con):
            self._raise_first_problem(con, checks)
        key = None
        if _shared(hashes):
            key = _first(
                con.execute(
                    "SELECT window_start, window_end, service, client FROM chunk_usage GROUP BY "
                    "window_start, window_end, service, client HAVING count(*) > 1 LIMIT 1"
                )
            )
        if key:
            same = (
                f"window_start = {timestamp_literal(pd.Timestamp(key[0]))} "
                f"AND window_end = {timestamp_literal(pd.Timestamp(key[1]))} "
                f"AND service = {_literal(str(key[2]))} AND client = {_literal(str(key[3]))}"
            )
            first = self.first_row(con, same)
            second = self.first_row(
                con, f"{same} AND NOT (origin_file || ':row ' || origin_row = {_literal(first)})"
            )
            file, _, where = second.rpartition(":")
            raise InputError(
                f"duplicate usage row: same window, service '{key[2]}' and client '{key[3]}' "
                f"as {first}",
                file=file,
                where=where,
                column="client",
            )

    def _raise_first_problem(
        self, con: duckdb.DuckDBPyConnection, checks: list[tuple[str, str, Message]]
    ) -> NoReturn:
        """Some row fails a check: count each kind, then name the first bad row of the first
        kind found, by file and row (a message made from the row gets its key values)."""
        counts = _first(
            con.execute(
                "SELECT " + ", ".join(f"count_if({c})" for c, _, _ in checks) + " FROM chunk_usage"
            )
        )
        for (condition, column, message), count in zip(checks, counts or (), strict=True):
            if count:
                file, _, where = self.first_row(con, condition).rpartition(":")
                text = (
                    message
                    if isinstance(message, str)
                    else message(self._first_keys(con, condition))
                )
                raise InputError(text, file=file, where=where, column=column)
        raise InternalError("a usage row failed the checks, but no single check finds it")

    def _first_keys(self, con: duckdb.DuckDBPyConnection, condition: str) -> pd.Series:
        """The key columns of the row :meth:`first_row` names (errors only)."""
        frame = con.execute(
            f"SELECT {', '.join(USAGE_KEY_COLUMNS)} FROM "
            f"({self._select(self._chunk_where, origin=True)}) "
            f"WHERE {condition} ORDER BY origin_file, origin_row LIMIT 1"
        ).df()
        for column in ("window_start", "window_end"):
            frame[column] = pd.to_datetime(frame[column], utc=True)
        return frame.iloc[0]


def _bad_keys(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a window of ``chunk_usage`` crosses an hour off the hour or a client id is
    refused: checked on the distinct windows and ids (a chunk of millions of rows has a few
    hundred windows and some thousand clients), which measured half the time of the same
    checks on every row."""
    found = _first(
        con.execute(
            f"""SELECT
            (SELECT coalesce(bool_or(({OFF_HOUR_START_SQL}) OR ({OFF_HOUR_END_SQL})), false)
             FROM (SELECT DISTINCT window_start, window_end FROM chunk_usage))
            OR (SELECT coalesce(bool_or({bad_client_id_sql("client")}), false)
                FROM (SELECT DISTINCT client FROM chunk_usage))"""
        )
    )
    return bool(found and found[0])


def _off_hour(row: pd.Series) -> str:
    return off_hour_problem(row["window_start"], row["window_end"])


def _scan_chunk(con: duckdb.DuckDBPyConnection, any_problem: str) -> tuple[np.ndarray, bool]:
    """One pass over ``chunk_usage``: the 64-bit hash of each row's key columns (for the
    duplicate check) and whether any row meets ``any_problem`` (the row checks, OR-ed).

    One scan serves both checks; which check failed, and where, is only worked out when one
    did (:meth:`ParquetUsage._raise_first_problem`).
    """
    columns = con.sql(
        f"SELECT hash(window_start, window_end, service, client) AS h, "
        f"coalesce({any_problem}, false) AS bad FROM chunk_usage"
    ).fetchnumpy()
    return np.asarray(columns["h"]), bool(np.any(columns["bad"]))


def _shared(hashes: np.ndarray) -> bool:
    """Whether two of ``hashes`` are equal: the cheap first pass of the duplicate check (only
    if it says yes does the exact, slower group-by on the key columns decide). Sorted in numpy
    and neighbours compared, which measured twice as fast as a DuckDB group-by on the hash: a
    chunk of millions of rows needs no hash table of millions of entries."""
    hashes.sort()
    return bool(np.any(hashes[1:] == hashes[:-1]))


def is_url(path: str | Path) -> bool:
    """True for ``scheme://...`` inputs (object storage, fsspec), which are not local paths."""
    return isinstance(path, str) and "://" in path


def register_filesystems(con: duckdb.DuckDBPyConnection, protocols: Sequence[str]) -> None:
    """Serve URL protocols DuckDB lacks through fsspec (s3fs, gcsfs, ... when installed)."""
    for protocol in protocols:
        if con.filesystem_is_registered(protocol):
            continue
        try:
            import fsspec

            con.register_filesystem(fsspec.filesystem(protocol))
        except (ImportError, ValueError) as exc:
            raise InputError(
                f"cannot read '{protocol}://' URLs: {exc}; install the fsspec package for it "
                "(for example s3fs for s3://)"
            ) from None


def _glob(con: duckdb.DuckDBPyConnection, pattern: str) -> list[str]:
    """The files a URL pattern matches (paths without their scheme)."""
    try:
        rows = con.execute(f"SELECT file FROM glob({_literal(pattern)})").fetchall()
    except duckdb.Error as exc:
        raise InputError(f"cannot list files: {_first_line(exc)}", file=pattern) from None
    if not rows:
        raise InputError("no Parquet files found", file=pattern)
    return [str(r[0]).split("://", 1)[-1] for r in rows]


def _relative(found: str, base_url: str) -> str:
    """``found`` (a path from ``glob``) relative to the folder URL ``base_url``."""
    base = base_url.split("://", 1)[1].lstrip("/")
    path = found.lstrip("/")
    return path[len(base) :] if path.startswith(base) else path


def _first(result: duckdb.DuckDBPyConnection) -> tuple[Any, ...] | None:
    """The first row of a result, reading it to the end (DuckDB 2 wants results finished)."""
    rows = result.fetchall()
    return tuple(rows[0]) if rows else None


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def open_usage(paths: Sequence[str | Path], con: duckdb.DuckDBPyConnection) -> UsageSource:
    """Parquet-only inputs are scanned per chunk; anything with CSV is read into memory."""
    from tenantcost.readers.usage import read_usage

    if any(is_url(p) for p in paths):
        return ParquetUsage(paths, con)
    files = expand_paths(paths, (".csv", ".parquet"), "usage")
    if files and all(f.suffix.lower() == ".parquet" for f, _ in files):
        return ParquetUsage(paths, con)
    return FrameUsage(read_usage(paths), origin=", ".join(str(p) for p in paths))
