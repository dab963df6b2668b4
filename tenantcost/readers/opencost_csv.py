"""Reader for OpenCost's built-in CSV export (``EXPORT_CSV_FILE``).

The exporter writes one row per container per UTC day with columns ``Date, Namespace,
ControllerKind, ControllerName, Pod, Container, ..., CPUCost, RAMCost, NetworkCost, PVCost,
GPUCost, TotalCost, Labels`` and one ``Label_<k>`` column per exported label. It has no cluster
column and no idle row, so tenantcost can use it for workload costs but idle must come from
elsewhere (the JSON API with ``includeIdle=true``).

Row numbers follow :mod:`tenantcost.readers.canonical`: ``row n`` is the line in the file
(header = line 1).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tenantcost.errors import InputError
from tenantcost.readers.canonical import (
    check_amount_cells,
    conform_costs,
    parse_float,
    parse_utc,
    read_csv_raw,
    require_columns,
    text,
    validate_costs,
)
from tenantcost.tables import LABEL_PREFIX

EXPORT_REQUIRED_COLUMNS = [
    "Date",
    "Namespace",
    "ControllerKind",
    "ControllerName",
    "Pod",
    "Container",
    "TotalCost",
]
"""Columns without which a row cannot be named or priced."""

EXPORT_COMPONENT_COLUMNS = {
    "CPUCost": "cpu_cost",
    "RAMCost": "ram_cost",
    "NetworkCost": "network_cost",
    "PVCost": "pv_cost",
    "GPUCost": "gpu_cost",
    "LoadBalancerCost": "load_balancer_cost",
    "SharedCost": "shared_cost",
    "ExternalCost": "external_cost",
}
"""Export component columns (when present) and their cost-table names."""

EXPORT_LABEL_PREFIX = "Label_"

EXPORT_KNOWN_COLUMNS = [
    *EXPORT_REQUIRED_COLUMNS,
    *EXPORT_COMPONENT_COLUMNS,
    "CPUCoreUsageAverage",
    "CPUCoreRequestAverage",
    "RAMBytesUsageAverage",
    "RAMBytesRequestAverage",
    "NetworkReceiveBytes",
    "NetworkTransferBytes",
    "GPUs",
    "PVBytes",
    "Labels",
]


def is_opencost_export_header(header: list[str]) -> bool:
    """True when a CSV header is OpenCost's export (has ``Date`` and ``TotalCost``)."""
    return "TotalCost" in header and "Date" in header


def read_opencost_csv(path: str | Path) -> pd.DataFrame:
    """Read an OpenCost CSV export into a validated cost table.

    ``window_start`` is ``Date`` at 00:00 UTC and ``window_end`` one day later; ``name`` is
    ``namespace/pod/container`` (unique per day, as OpenCost's container-level allocation
    names are); ``cluster`` and ``node`` are ``""``; ``Label_<k>`` becomes ``label:<k>``. The
    ``Labels`` JSON column is not parsed: the exporter's ``Label_<k>`` columns already carry
    the labels the operator chose to export, and parsing JSON would need a per-row loop.
    """
    raw = read_csv_raw(path)
    cells = raw.frame
    present = list(cells.columns)
    known = [*EXPORT_KNOWN_COLUMNS, *(c for c in present if c.startswith(EXPORT_LABEL_PREFIX))]
    require_columns(present, EXPORT_REQUIRED_COLUMNS, raw.file, known=known)

    day = parse_utc(cells["Date"], raw, "Date")
    not_midnight = (day != day.dt.normalize()).to_numpy()
    if not_midnight.any():
        position = int(not_midnight.nonzero()[0][0])
        raise InputError(
            f"expected a day (YYYY-MM-DD), got {cells['Date'].iloc[position]!r}",
            file=raw.file,
            where=raw.place(position),
            column="Date",
        )

    namespace = text(cells["Namespace"])
    pod = text(cells["Pod"])
    container = text(cells["Container"])
    out: dict[str, pd.Series] = {
        "window_start": day,
        "window_end": day + pd.Timedelta(days=1),
        "name": (namespace + "/" + pod + "/" + container).astype("str"),
        "namespace": namespace,
        "controller_kind": text(cells["ControllerKind"]),
        "controller": text(cells["ControllerName"]),
        "pod": pod,
        "total_cost": parse_float(cells["TotalCost"], raw, "TotalCost"),
        "origin": raw.origins(),
    }
    for source, target in EXPORT_COMPONENT_COLUMNS.items():
        if source in cells.columns:
            out[target] = parse_float(cells[source], raw, source)
            check_amount_cells(out[target], raw, source)
    for column in present:
        if column.startswith(EXPORT_LABEL_PREFIX) and len(column) > len(EXPORT_LABEL_PREFIX):
            key = column[len(EXPORT_LABEL_PREFIX) :]
            out[LABEL_PREFIX + key] = text(cells[column])
    frame = conform_costs(pd.DataFrame(out))
    validate_costs(frame, total_column="TotalCost")
    return frame
