"""Read application usage (CSV or Parquet, files or folders) into the canonical usage table.

Usage says how much of each service each client consumed in each window; it is the key that
splits workload cost between clients. Required columns are ``window_start, window_end,
service, client``; every other column is a metric (``requests``, ``cpu_seconds``, ...) and
must be a finite number >= 0 and at most ``MAX_USAGE_VALUE`` (1e15, see
``tenantcost.limits``), because a negative or missing weight would make a split meaningless
and a larger one is corrupt data more often than usage. An empty ``client`` is allowed and
means unattributed usage; any other client id must meet :mod:`tenantcost.client_id` (no
control character, valid UTF-8, at most 256 characters), so that every backend can store it.

**Windows and hours.** A usage window lies inside one UTC hour (nested usage: 10:00-10:15),
or starts and ends on whole UTC hours (hourly, daily usage). A window such as 10:30-11:30
crosses an hour boundary from inside an hour: it can equal no hourly or daily cost window and
nest in none, so no split could use it, and it is refused here rather than by a later run
(:func:`off_hour_windows`; the Parquet scan applies the same rule in SQL,
:data:`OFF_HOUR_START_SQL`).

Parquet folders may be hive-partitioned (``date=2026-11-07/part-0.parquet``): the partition
keys (``date``) are folder names, not metrics, so they are never read as metric columns.

**Row numbers** (``origin`` is ``<file>:row <n>``): for CSV, ``n`` is the line number in the
file, header = line 1, so the first data row is ``row 2`` (blank lines and quoted newlines are
counted, so it matches an editor's line number). For Parquet, which has no header line, ``n``
is the 1-based record number (first record = ``row 1``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from tenantcost.client_id import bad_client_ids, client_id_problem
from tenantcost.errors import InputError
from tenantcost.limits import MAX_USAGE_VALUE
from tenantcost.readers.canonical import (
    RawTable,
    describe_value,
    parquet_columns,
    parse_float,
    parse_utc,
    read_csv_header,
    read_csv_raw,
    read_parquet_raw,
    require_columns,
    split_origin,
    text,
)
from tenantcost.readers.costs import expand_paths
from tenantcost.tables import USAGE_KEY_COLUMNS, empty_usage
from tenantcost.timefmt import window_text

USAGE_SUFFIXES = (".csv", ".parquet")
_USAGE_LIMIT = f"{MAX_USAGE_VALUE:.0e}".replace("e+", "e")
_HOUR_NS = 3_600_000_000_000
_HOUR_US = 3_600_000_000
_OFF_HOUR_US = f"(((epoch_us({{0}}) % {_HOUR_US}) + {_HOUR_US}) % {_HOUR_US})"
_CROSSES_HOUR_SQL = (
    f"epoch_us(window_end) > epoch_us(window_start) - {_OFF_HOUR_US.format('window_start')} "
    f"+ {_HOUR_US}"
)
OFF_HOUR_START_SQL = f"({_CROSSES_HOUR_SQL}) AND {_OFF_HOUR_US.format('window_start')} <> 0"
"""DuckDB condition (over ``window_start, window_end`` TIMESTAMPTZ): the window crosses an
hour boundary and does not start on a whole hour (:func:`off_hour_windows`' first mask)."""
OFF_HOUR_END_SQL = (
    f"({_CROSSES_HOUR_SQL}) AND {_OFF_HOUR_US.format('window_start')} = 0 "
    f"AND {_OFF_HOUR_US.format('window_end')} <> 0"
)
"""The same for a window that starts on a whole hour but does not end on one."""


def read_usage(paths: Sequence[str | Path], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Read usage files and folders into one validated, canonically sorted usage table.

    ``columns`` restricts the metrics read (Parquet reads only those columns from disk); each
    must exist in every file. Without it, every non-key column is a metric, and all files must
    have the same metrics. Duplicate (window_start, window_end, service, client) rows, within or
    across files, are an error naming both rows: summing them silently could double-count.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    if not paths:
        raise InputError("no usage input given")
    wanted = list(dict.fromkeys(columns)) if columns is not None else None
    if wanted is not None:
        reserved = [c for c in wanted if c in (*USAGE_KEY_COLUMNS, "origin")]
        if reserved:
            raise InputError(f"'{reserved[0]}' is a key column, not a usage metric")

    frames: list[pd.DataFrame] = []
    metrics: list[str] | None = wanted
    first_file = ""
    for file, folder in expand_paths(paths, USAGE_SUFFIXES, "usage"):
        frame = _read_usage_file(file, folder, wanted)
        found = [c for c in frame.columns if c not in (*USAGE_KEY_COLUMNS, "origin")]
        if metrics is None:
            metrics, first_file = found, str(file)
        elif wanted is None and set(found) != set(metrics):
            missing = sorted(set(metrics) - set(found))
            extra = sorted(set(found) - set(metrics))
            column = missing[0] if missing else extra[0]
            problem = (
                f"metric column is missing here but present in {first_file}"
                if missing
                else f"metric column is not in {first_file}; all usage files must have the "
                "same metric columns"
            )
            raise InputError(problem, file=str(file), where="header", column=column)
        frames.append(frame)

    if not frames or metrics is None:
        return empty_usage(wanted)
    ordered = [*USAGE_KEY_COLUMNS, *metrics, "origin"]
    usage = pd.concat([f[ordered] for f in frames], ignore_index=True)
    if not len(usage):
        return empty_usage(metrics)
    _check_duplicates(usage)
    return usage.sort_values([*USAGE_KEY_COLUMNS], kind="mergesort").reset_index(drop=True)


def _partition_keys(file: Path, folder: Path | None) -> set[str]:
    """Hive partition keys (``key=value`` folder names) between ``folder`` and ``file``."""
    if folder is None:
        return set()
    parts = file.relative_to(folder).parts[:-1]
    return {part.split("=", 1)[0] for part in parts if "=" in part}


def _read_usage_file(file: Path, folder: Path | None, wanted: list[str] | None) -> pd.DataFrame:
    """Read and validate one usage file; returns keys, metrics and origin."""
    name = str(file)
    partitions = _partition_keys(file, folder) - set(USAGE_KEY_COLUMNS)
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        present = [c for c in parquet_columns(file) if c not in partitions]
    else:
        present = [c for c in read_csv_header(file) if c not in partitions]
    # Keys first: any other column may be the misspelt key, so all are candidates.
    require_columns(present, USAGE_KEY_COLUMNS, name)
    if wanted is not None:
        require_columns(present, wanted, name, known=USAGE_KEY_COLUMNS)
        metrics = wanted
    else:
        metrics = [c for c in present if c not in (*USAGE_KEY_COLUMNS, "origin")]
    if wanted is None and not metrics:
        raise InputError(
            "no metric columns: expected at least one column besides "
            f"{', '.join(USAGE_KEY_COLUMNS)} (for example 'requests')",
            file=name,
            where="header",
        )

    raw: RawTable
    if suffix == ".parquet":
        raw = read_parquet_raw(
            file, columns=[*USAGE_KEY_COLUMNS, *metrics], text_columns=["service", "client"]
        )
    else:
        raw = read_csv_raw(file)
    cells = raw.frame

    out: dict[str, pd.Series] = {
        "window_start": parse_utc(cells["window_start"], raw, "window_start"),
        "window_end": parse_utc(cells["window_end"], raw, "window_end"),
        "service": text(cells["service"]),
        "client": text(cells["client"]),
    }
    empty_service = (out["service"].str.strip() == "").to_numpy()
    if empty_service.any():
        position = int(np.flatnonzero(empty_service)[0])
        raise InputError(
            "service is empty: every usage row must name the service it measures",
            file=name,
            where=raw.place(position),
            column="service",
        )
    backwards = (out["window_end"] <= out["window_start"]).to_numpy()
    if backwards.any():
        position = int(np.flatnonzero(backwards)[0])
        raise InputError(
            f"window_end {out['window_end'].iloc[position].isoformat()} is not after "
            f"window_start {out['window_start'].iloc[position].isoformat()}",
            file=name,
            where=raw.place(position),
            column="window_end",
        )
    check_usage_keys(out["window_start"], out["window_end"], out["client"],
                     lambda position: (name, raw.place(position)))  # fmt: skip
    for metric in metrics:
        values = parse_float(cells[metric], raw, metric)
        array = values.to_numpy(dtype="float64")
        bad = ~np.isfinite(array) | (array < 0) | (array > MAX_USAGE_VALUE)
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            value = array[position]
            cell = cells[metric].iloc[position]
            if np.isnan(value):
                problem = (
                    f"usage value is missing ({describe_value(cell)}): every metric needs a "
                    "number >= 0 (write 0 for no usage)"
                )
            elif not np.isfinite(value):
                problem = f"usage value must be finite, got {str(cell)!r}"
            elif value > MAX_USAGE_VALUE:
                problem = usage_limit_problem(str(cell))
            else:
                problem = f"usage value must be >= 0, got {str(cell)!r}"
            raise InputError(problem, file=name, where=raw.place(position), column=metric)
        out[metric] = values
    out["origin"] = raw.origins()
    return pd.DataFrame(out)


def off_hour_windows(start: pd.Series, end: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Two masks of windows that cross a UTC hour boundary without starting and ending on
    whole hours: those that do not start on a whole hour, and those that start on one but
    do not end on one (10:30-11:30 is in the first, 10:00-11:30 in the second; 10:15-10:45,
    10:00-11:00 and a whole day are in neither)."""
    starts = pd.DatetimeIndex(start).as_unit("ns").asi8
    ends = pd.DatetimeIndex(end).as_unit("ns").asi8
    start_off, end_off = np.mod(starts, _HOUR_NS), np.mod(ends, _HOUR_NS)
    crosses = ends > starts - start_off + _HOUR_NS
    return crosses & (start_off != 0), crosses & (start_off == 0) & (end_off != 0)


def off_hour_problem(start: pd.Timestamp, end: pd.Timestamp) -> str:
    """The one-line reason a window of :func:`off_hour_windows` is refused."""
    bound = "window_start" if start != start.floor("h") else "window_end"
    return (
        f"usage window {window_text(start, end)} crosses an hour boundary but its {bound} is "
        "not on a whole hour: a usage window lies inside one UTC hour, or starts and ends on "
        "whole UTC hours (hourly, daily)"
    )


def check_usage_keys(
    start: pd.Series,
    end: pd.Series,
    client: pd.Series,
    place: Callable[[int], tuple[str | None, str | None]],
) -> None:
    """Refuse the first window that crosses an hour boundary off the hour, then the first
    client id :mod:`tenantcost.client_id` refuses (whole columns at once); ``place`` names
    the file and row of a position. Every usage reader calls it (the Parquet scan has the
    same checks in SQL), so ``allocate``, ``ingest`` and the API refuse the same rows."""
    off_start, off_end = off_hour_windows(start, end)
    bad_client = bad_client_ids(client).to_numpy()
    for mask, column in ((off_start, "window_start"), (off_end, "window_end"),
                         (bad_client, "client")):  # fmt: skip
        if not mask.any():
            continue
        position = int(np.flatnonzero(mask)[0])
        if column == "client":
            problem = client_id_problem(str(client.iloc[position])) or "client id refused"
        else:
            problem = off_hour_problem(start.iloc[position], end.iloc[position])
        file, where = place(position)
        raise InputError(problem, file=file, where=where, column=column)


def usage_limit_problem(cell: str) -> str:
    """The one-line reason a usage value above :data:`~tenantcost.limits.MAX_USAGE_VALUE` is
    refused (shared with the DuckDB-side validation of Parquet usage)."""
    shown = f" {cell!r}" if cell else ""
    return (
        f"usage value{shown} is beyond what tenantcost holds exactly: at most "
        f"{_USAGE_LIMIT} per row in the column's own unit (a corrupt export?)"
    )


def _check_duplicates(usage: pd.DataFrame) -> None:
    """Raise for the first usage row whose key repeats an earlier row, naming both rows."""
    repeated = usage.duplicated(USAGE_KEY_COLUMNS, keep="first").to_numpy()
    if not repeated.any():
        return
    second = int(np.flatnonzero(repeated)[0])
    key = usage.iloc[second][USAGE_KEY_COLUMNS]
    same = np.ones(len(usage), dtype=bool)
    for column in USAGE_KEY_COLUMNS:
        same &= (usage[column] == key[column]).to_numpy()
    first = int(np.flatnonzero(same)[0])
    file, where = split_origin(str(usage["origin"].iloc[second]))
    client = f"'{key['client']}'" if key["client"] else "'' (no client)"
    raise InputError(
        f"duplicate usage row: same window {key['window_start'].isoformat()} .. "
        f"{key['window_end'].isoformat()}, service '{key['service']}' and client {client} as "
        f"{usage['origin'].iloc[first]}",
        file=file,
        where=where,
        column="client",
    )
