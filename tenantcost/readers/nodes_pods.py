"""Read the node and pod files of ``tenantcost podcost`` (CSV or Parquet).

**Node file**, one row per node (or per node and window, see below):

=======================  =======  =======================================================
column                   unit     meaning
=======================  =======  =======================================================
node                     text     node name, unique (per window when windows are given)
pool                     text     node pool / group, shown in warnings
vcpu                     vCPU     capacity, > 0
memory_gib               GiB      capacity, > 0
allocatable_vcpu         vCPU     what pods may request (capacity minus system reserve)
allocatable_memory_gib   GiB      likewise, <= memory_gib
hourly_price             money/h  amortized net price per hour, >= 0
window_start/window_end  UTC      optional, both or neither: the windows the node ran in
=======================  =======  =======================================================

Without window columns a node is taken to run, at its price, in every window of the pod file.
With them, a node costs money only in the windows it is listed for, which is what an
autoscaled fleet needs; its windows must then be the same windows as the pod file's.

**Pod file**, one row per pod, node and window: ``window_start, window_end, node, namespace,
controller_kind, controller, pod, cpu_request, cpu_usage, memory_request_gib,
memory_usage_gib``. The four quantities are averages over the window (vCPU and GiB), >= 0; an
empty request means the pod has none (BestEffort), an empty usage means no usage metric.
``controller_kind``, ``controller`` and ``node`` may be empty (a pod without a node is priced
like a pod on an unknown node, with a warning).

Row numbers follow :mod:`tenantcost.readers.canonical`: for CSV the line in the file (header
= row 1), for Parquet the 1-based record number. Unknown columns are ignored with a warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from tenantcost.errors import InputError, warn
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

WINDOW = ["window_start", "window_end"]
NODE_TEXT = ["node", "pool"]
NODE_CAPACITY = ["vcpu", "memory_gib"]
NODE_NUMBERS = [*NODE_CAPACITY, "allocatable_vcpu", "allocatable_memory_gib", "hourly_price"]
NODE_COLUMNS = [*NODE_TEXT, *NODE_NUMBERS]
"""Required node columns (``window_start``/``window_end`` are optional)."""

POD_TEXT = ["node", "namespace", "controller_kind", "controller", "pod"]
POD_REQUESTS = ["cpu_request", "memory_request_gib"]
POD_USAGE = ["cpu_usage", "memory_usage_gib"]
POD_NUMBERS = ["cpu_request", "cpu_usage", "memory_request_gib", "memory_usage_gib"]
POD_COLUMNS = [*WINDOW, *POD_TEXT, *POD_NUMBERS]
"""Required pod columns."""

POD_KEY = [*WINDOW, "node", "namespace", "pod"]
"""A pod row's identity: two rows with the same key would be charged twice."""


def read_nodes(path: str | Path) -> pd.DataFrame:
    """Read and validate a node file (see the module docstring for its columns).

    Returns ``node, pool``, the five numbers as float64, ``window_start, window_end`` when the
    file has them, and ``origin`` (``<file>:row <n>``).
    """
    file = str(path)
    present = _columns(path)
    windowed = [c for c in WINDOW if c in present]
    if len(windowed) == 1:
        other = next(c for c in WINDOW if c not in windowed)
        raise InputError(
            f"'{windowed[0]}' needs '{other}' too (node windows are optional, but both or neither)",
            file=file,
            where="header",
            column=other,
        )
    required = [*NODE_COLUMNS, *windowed]
    require_columns(present, required, file, known=WINDOW)
    raw = _read_raw(path, required, NODE_TEXT)
    cells = raw.frame
    _warn_unknown(file, present, required)

    out: dict[str, pd.Series] = {}
    out["node"] = _required_text(cells, raw, "node", "every node row needs the node name")
    out["pool"] = text(cells["pool"])
    for column in NODE_NUMBERS:
        out[column] = _numbers(
            cells, raw, column, allow_empty=False, positive=column in NODE_CAPACITY
        )
    for allocatable, capacity in (
        ("allocatable_vcpu", "vcpu"),
        ("allocatable_memory_gib", "memory_gib"),
    ):
        above = (out[allocatable] > out[capacity]).to_numpy()
        if above.any():
            position = int(np.flatnonzero(above)[0])
            raise InputError(
                f"allocatable {out[allocatable].iloc[position]:g} is above the capacity "
                f"{out[capacity].iloc[position]:g} in '{capacity}'",
                file=file,
                where=raw.place(position),
                column=allocatable,
            )
    if windowed:
        out.update(_windows(cells, raw))
    out["origin"] = raw.origins()
    nodes = pd.DataFrame(out)
    key = ["node", *windowed]
    _check_duplicates(nodes, key, "node", "node row")
    return nodes


def read_pods(path: str | Path) -> pd.DataFrame:
    """Read and validate a pod file (see the module docstring for its columns).

    Returns the pod columns (requests and usage float64, NaN where the cell is empty) and
    ``origin``. Rows keep the file's order.
    """
    file = str(path)
    present = _columns(path)
    require_columns(present, POD_COLUMNS, file)
    raw = _read_raw(path, POD_COLUMNS, POD_TEXT)
    cells = raw.frame
    _warn_unknown(file, present, POD_COLUMNS)

    out: dict[str, pd.Series] = dict(_windows(cells, raw))
    out["node"] = text(cells["node"]).str.strip()
    out["namespace"] = _required_text(cells, raw, "namespace", "every pod row needs its namespace")
    out["controller_kind"] = text(cells["controller_kind"])
    out["controller"] = text(cells["controller"])
    out["pod"] = _required_text(cells, raw, "pod", "every pod row needs the pod name")
    for column in POD_NUMBERS:
        out[column] = _numbers(cells, raw, column, allow_empty=True, positive=False)
    out["origin"] = raw.origins()
    pods = pd.DataFrame(out)
    _check_duplicates(pods, POD_KEY, "pod", "pod row")
    return pods


# --------------------------------------------------------------------------- helpers


def _columns(path: str | Path) -> list[str]:
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        return parquet_columns(path)
    if suffix == ".csv":
        return read_csv_header(path)
    raise InputError(
        f"unsupported file type '{Path(path).suffix}': expected .csv or .parquet", file=str(path)
    )


def _read_raw(path: str | Path, columns: Sequence[str], text_columns: Sequence[str]) -> RawTable:
    if Path(path).suffix.lower() == ".parquet":
        return read_parquet_raw(path, columns=list(columns), text_columns=text_columns)
    return read_csv_raw(path)


def _warn_unknown(file: str, present: Sequence[str], known: Sequence[str]) -> None:
    unknown = [c for c in present if c not in known]
    if unknown:
        warn(f"{file}: ignoring unknown column(s): {', '.join(unknown)}")


def _required_text(cells: pd.DataFrame, raw: RawTable, column: str, why: str) -> pd.Series:
    values = text(cells[column]).str.strip()
    empty = (values == "").to_numpy()
    if empty.any():
        position = int(np.flatnonzero(empty)[0])
        raise InputError(
            f"{column} is empty: {why}", file=raw.file, where=raw.place(position), column=column
        )
    return values


def _numbers(
    cells: pd.DataFrame, raw: RawTable, column: str, *, allow_empty: bool, positive: bool
) -> pd.Series:
    """A numeric column: finite, >= 0 (> 0 when ``positive``); empty only if allowed (NaN)."""
    values = parse_float(cells[column], raw, column)
    array = values.to_numpy(dtype="float64")
    missing = np.isnan(array)
    bad = (missing & (not allow_empty)) | np.isinf(array)
    bad |= ~missing & ((array <= 0) if positive else (array < 0))
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        value = array[position]
        cell = cells[column].iloc[position]
        if np.isnan(value):
            problem = f"value is missing ({describe_value(cell)}): a number is required"
        elif np.isinf(value):
            problem = f"value must be finite, got {str(cell)!r}"
        else:
            problem = f"value must be {'> 0' if positive else '>= 0'}, got {str(cell)!r}"
        raise InputError(problem, file=raw.file, where=raw.place(position), column=column)
    return values


def _windows(cells: pd.DataFrame, raw: RawTable) -> dict[str, pd.Series]:
    start = parse_utc(cells["window_start"], raw, "window_start")
    end = parse_utc(cells["window_end"], raw, "window_end")
    backwards = (end <= start).to_numpy()
    if backwards.any():
        position = int(np.flatnonzero(backwards)[0])
        raise InputError(
            f"window_end {end.iloc[position].isoformat()} is not after window_start "
            f"{start.iloc[position].isoformat()}",
            file=raw.file,
            where=raw.place(position),
            column="window_end",
        )
    return {"window_start": start, "window_end": end}


def _check_duplicates(frame: pd.DataFrame, key: list[str], column: str, what: str) -> None:
    """Raise for the first row whose key repeats an earlier row, naming both rows."""
    repeated = frame.duplicated(key, keep="first").to_numpy()
    if not repeated.any():
        return
    second = int(np.flatnonzero(repeated)[0])
    same = np.ones(len(frame), dtype=bool)
    for part in key:
        same &= (frame[part] == frame[part].iloc[second]).to_numpy()
    first = int(np.flatnonzero(same)[0])
    described = ", ".join(
        f"{part} {_show(frame[part].iloc[second])}" for part in key if part != "window_end"
    )
    file, where = split_origin(str(frame["origin"].iloc[second]))
    raise InputError(
        f"duplicate {what} ({described}) already at {frame['origin'].iloc[first]}; it would "
        "be charged twice",
        file=file,
        where=where,
        column=column,
    )


def _show(value: object) -> str:
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return repr(str(value))
