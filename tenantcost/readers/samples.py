"""Read gauge samples (CSV or Parquet with a ``time`` column) into the canonical sample table.

A gauge is a level at an instant, not a count over a window, so its file has ``time`` where
usage has ``window_start, window_end``: ``time, service, client, <gauge>...`` (an S3
inventory's date and bytes per prefix, a database's bytes per tenant schema sampled hourly).
Each gauge column's cell is that client's level at ``time``; an empty cell is no sample of
that gauge then (a wide file may sample its gauges at different times), never a level of 0.

Levels are exact decimals kept as the text written (a float from Parquet through its
shortest repr), at most :data:`~tenantcost.gauges.LEVEL_PLACES` decimal places and
:data:`~tenantcost.gauges.MAX_LEVEL`; times are UTC instants at microsecond resolution. The
same metric, service, client and time twice in one read is refused (which level holds?); a
later batch in the store re-sending an instant replaces its level (``tenantcost.gauges``).
All checks are on whole columns; errors name the file, row and column.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from tenantcost.client_id import bad_client_ids, client_id_problem
from tenantcost.errors import InputError
from tenantcost.gauges import LEVEL_PLACES, MAX_LEVEL
from tenantcost.readers.canonical import (
    RawTable,
    describe_value,
    parquet_columns,
    parse_utc,
    read_csv_header,
    read_csv_raw,
    read_parquet_raw,
    require_columns,
    text,
)
from tenantcost.readers.costs import expand_paths

SAMPLE_KEY_COLUMNS = ["time", "service", "client"]
SAMPLES_COLUMNS = ["metric", "service", "client", "t_us", "value", "origin"]
"""The canonical sample table: one row per gauge sample (long form)."""
_NUMBER = r"^(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$"


def columns_of(path: str | Path) -> list[str]:
    """The column names of a usage or sample file (its header or Parquet schema)."""
    if str(path).lower().endswith(".parquet"):
        return parquet_columns(path)
    return read_csv_header(path)


def is_samples_file(path: str | Path) -> bool:
    """A file of samples (``time``) rather than windows (``window_start``)."""
    columns = columns_of(path)
    return "time" in columns and "window_start" not in columns


def empty_samples() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "metric": pd.Series(dtype="str"),
            "service": pd.Series(dtype="str"),
            "client": pd.Series(dtype="str"),
            "t_us": pd.Series(dtype="int64"),
            "value": pd.Series(dtype="str"),
            "origin": pd.Series(dtype="str"),
        }
    )


def read_samples(paths: Sequence[str | Path], gauges: Collection[str]) -> pd.DataFrame:
    """Every sample of the files (folders expanded), checked; ``gauges`` are the declared
    gauge columns: a file's other metric columns are refused (a counter given as samples)."""
    found = expand_paths(paths, (".csv", ".parquet"), "samples")
    frames = [_read_file(file, gauges) for file, _ in found]
    samples = pd.concat(frames, ignore_index=True) if frames else empty_samples()
    _check_duplicates(samples)
    return samples


def _read_file(file: Path, gauges: Collection[str]) -> pd.DataFrame:
    name = str(file)
    present = columns_of(file)
    require_columns(present, SAMPLE_KEY_COLUMNS, name)
    metrics = [c for c in present if c not in (*SAMPLE_KEY_COLUMNS, "origin")]
    if not metrics:
        raise InputError(
            "no gauge columns: expected at least one column besides time, service, client "
            "(for example 'storage_bytes')",
            file=name,
            where="header",
        )
    for metric in metrics:
        if metric not in gauges:
            declared = ", ".join(sorted(gauges)) or "none"
            raise InputError(
                f"'{metric}' is given as samples (a time column) but is not declared a gauge "
                f"(metrics: {{{metric}: {{kind: gauge, ...}}}}); declared gauges: {declared}. "
                "A counter's file has window_start and window_end",
                file=name,
                where="header",
                column=metric,
            )
    raw: RawTable
    if file.suffix.lower() == ".parquet":
        raw = read_parquet_raw(file, columns=[*SAMPLE_KEY_COLUMNS, *metrics],
                               text_columns=["service", "client", *metrics])  # fmt: skip
    else:
        raw = read_csv_raw(file)
    cells = raw.frame
    times = parse_utc(cells["time"], raw, "time")
    ns = pd.DatetimeIndex(times).as_unit("ns").asi8
    finer = ns % 1000 != 0
    if finer.any():
        position = int(np.flatnonzero(finer)[0])
        raise InputError(
            f"time {cells['time'].iloc[position]!r} is finer than a microsecond",
            file=name,
            where=raw.place(position),
            column="time",
        )
    service, client = text(cells["service"]), text(cells["client"])
    _check_keys(service, client, raw)
    origins = raw.origins()
    parts = []
    for metric in metrics:  # a few columns: each checked whole
        values = text(cells[metric]).str.strip()
        given = (values != "").to_numpy()
        _check_levels(values, given, raw, metric)
        parts.append(
            pd.DataFrame(
                {
                    "metric": metric,
                    "service": service[given].to_numpy(),
                    "client": client[given].to_numpy(),
                    "t_us": ns[given] // 1000,
                    "value": values[given].to_numpy(),
                    "origin": origins[given].to_numpy(),
                }
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else empty_samples()


def _check_keys(service: pd.Series, client: pd.Series, raw: RawTable) -> None:
    empty = (service.str.strip() == "").to_numpy()
    if empty.any():
        raise InputError(
            "service is empty: every sample must name the service it measures",
            file=raw.file,
            where=raw.place(int(np.flatnonzero(empty)[0])),
            column="service",
        )
    bad = bad_client_ids(client).to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InputError(
            client_id_problem(str(client.iloc[position])) or "client id refused",
            file=raw.file,
            where=raw.place(position),
            column="client",
        )


def _check_levels(values: pd.Series, given: np.ndarray, raw: RawTable, metric: str) -> None:
    """Each given level is a plain decimal >= 0 with at most LEVEL_PLACES places and at most
    MAX_LEVEL (vectorised over the column's text)."""
    parts = values.str.extract(_NUMBER)
    readable = parts[0].notna().to_numpy()
    exponent = pd.to_numeric(parts[2], errors="coerce").fillna(0).to_numpy(dtype="int64")
    places = parts[1].fillna("").str.len().to_numpy(dtype="int64") - exponent
    magnitude = np.where(readable, pd.to_numeric(values.where(readable, "0"), errors="coerce"), 0)
    problems = (
        (~readable, lambda v: f"not a level: {describe_value(v)}; a gauge's level is a "
                              "number >= 0 such as 1073741824 or 12.5"),
        (readable & (places > LEVEL_PLACES),
         lambda v: f"level {v!r} has more than {LEVEL_PLACES} decimal places"),
        (readable & (magnitude > MAX_LEVEL),
         lambda v: f"level {v!r} is beyond the largest level held exactly (1e15)"),
    )  # fmt: skip
    for mask, message in problems:
        hit = mask & given
        if hit.any():
            position = int(np.flatnonzero(hit)[0])
            raise InputError(
                message(values.iloc[position]),
                file=raw.file,
                where=raw.place(position),
                column=metric,
            )


def _check_duplicates(samples: pd.DataFrame) -> None:
    keys = ["metric", "service", "client", "t_us"]
    repeated = samples.duplicated(keys, keep=False).to_numpy()
    if not repeated.any():
        return
    rows = samples.loc[repeated].sort_values([*keys, "origin"], kind="stable")
    first, second = rows.iloc[0], rows.iloc[1]
    file, _, where = str(second["origin"]).rpartition(":")
    raise InputError(
        f"the same {first['metric']} sample twice: service '{first['service']}', client "
        f"'{first['client']}' at the same time as {first['origin']} (which level holds?)",
        file=file,
        where=where,
        column="time",
    )
