"""Read every cost input (files and folders, any supported format) into one cost table.

Formats are chosen by extension and, for CSV, by header: a header with ``Date`` and
``TotalCost`` is OpenCost's CSV export, any other CSV is a canonical cost file. ``.json`` is an
OpenCost Allocation API response, ``.parquet`` a canonical cost file.

The result is sorted canonically so that nothing downstream (splits, tie-breaks, reports)
depends on the order of files or rows in the input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from tenantcost.errors import InputError
from tenantcost.readers.canonical import (
    conform_costs,
    is_component_column,
    read_canonical_costs,
    read_csv_header,
    validate_costs,
)
from tenantcost.readers.opencost_csv import is_opencost_export_header, read_opencost_csv
from tenantcost.readers.opencost_json import read_opencost_json
from tenantcost.tables import LABEL_PREFIX, empty_costs

COST_SUFFIXES = (".json", ".csv", ".parquet")

COST_SORT_COLUMNS = [
    "window_start",
    "window_end",
    "cluster",
    "namespace",
    "controller_kind",
    "controller",
    "pod",
    "name",
]
"""Primary canonical order. Ties are then broken by node, total_cost, components and labels,
and only last by origin, so equal inputs in any row order give identical tables."""


def expand_paths(
    paths: Iterable[str | Path], suffixes: Sequence[str], what: str
) -> list[tuple[Path, Path | None]]:
    """Files to read, as (file, folder it was found in or None), in a stable order.

    A folder contributes every file with one of ``suffixes`` below it (recursively, sorted by
    path; names starting with ``.`` are skipped as editor/OS debris). The same file given twice
    (directly and through its folder) is read once, so costs are never counted twice.
    """
    found: list[tuple[Path, Path | None]] = []
    seen: set[Path] = set()
    for entry in paths:
        path = Path(entry)
        if path.is_dir():
            files = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix.lower() in suffixes
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not files:
                raise InputError(
                    f"folder has no {what} files ({', '.join(suffixes)})", file=str(path)
                )
            pairs: list[tuple[Path, Path | None]] = [(p, path) for p in files]
        elif path.is_file():
            if path.suffix.lower() not in suffixes:
                raise InputError(
                    f"unsupported {what} file type '{path.suffix}': expected {', '.join(suffixes)}",
                    file=str(path),
                )
            pairs = [(path, None)]
        else:
            raise InputError("file or folder not found", file=str(path))
        for file, folder in pairs:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                found.append((file, folder))
    return found


def read_cost_file(path: str | Path) -> pd.DataFrame:
    """Read one cost file, choosing the reader by extension and (for CSV) by header."""
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        return read_opencost_json(path)
    if suffix == ".csv":
        if is_opencost_export_header(read_csv_header(path)):
            return read_opencost_csv(path)
        return read_canonical_costs(path)
    if suffix == ".parquet":
        return read_canonical_costs(path)
    raise InputError(
        f"unsupported cost file type '{Path(path).suffix}': expected {', '.join(COST_SUFFIXES)}",
        file=str(path),
    )


def read_costs(paths: Sequence[str | Path]) -> pd.DataFrame:
    """Read cost files and folders into one validated, canonically sorted cost table.

    Every row is checked (``total_cost`` finite and >= 0, ``window_end`` after
    ``window_start``); the first bad row is reported by its origin (file and row or JSON
    path). Component columns a source does not report are NaN; labels a row lacks are ``""``.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    if not paths:
        raise InputError("no cost input given")
    frames = [read_cost_file(file) for file, _ in expand_paths(paths, COST_SUFFIXES, "cost")]
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty_costs()
    frame = conform_costs(pd.concat(frames, ignore_index=True)) if len(frames) > 1 else frames[0]
    validate_costs(frame)
    return sort_costs(frame)


def sort_costs(frame: pd.DataFrame) -> pd.DataFrame:
    """Sort a cost table canonically and reset its index (see :data:`COST_SORT_COLUMNS`)."""
    components = [c for c in frame.columns if is_component_column(str(c))]
    labels = sorted(c for c in frame.columns if str(c).startswith(LABEL_PREFIX))
    order = [*COST_SORT_COLUMNS, "node", "total_cost", *components, *labels, "origin"]
    return frame.sort_values(order, kind="mergesort", na_position="last").reset_index(drop=True)
