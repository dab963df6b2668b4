"""Read application usage (CSV or Parquet, files or folders) into the canonical usage table.

Usage says how much of each service each client consumed in each window; it is the key that
splits workload cost between clients. Required columns are ``window_start, window_end,
service, client``; every other column is a metric (``requests``, ``cpu_seconds``, ...) and
must be a finite number >= 0 and at most ``MAX_USAGE_VALUE`` (1e15, see
``tenantcost.limits``), because a negative or missing weight would make a split meaningless
and a larger one is corrupt data more often than usage. An empty ``client`` is allowed and
means unattributed usage.

Parquet folders may be hive-partitioned (``date=2026-11-07/part-0.parquet``): the partition
keys (``date``) are folder names, not metrics, so they are never read as metric columns.

**Row numbers** (``origin`` is ``<file>:row <n>``): for CSV, ``n`` is the line number in the
file, header = line 1, so the first data row is ``row 2`` (blank lines and quoted newlines are
counted, so it matches an editor's line number). For Parquet, which has no header line, ``n``
is the 1-based record number (first record = ``row 1``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

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

USAGE_SUFFIXES = (".csv", ".parquet")
_USAGE_LIMIT = f"{MAX_USAGE_VALUE:.0e}".replace("e+", "e")


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
