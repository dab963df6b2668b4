"""Exact duplicate billing lines: found in one vectorised pass, refused unless asked to keep.

A billing line that repeats another in every column is, far more often than not, the same
line read twice: an export concatenated to itself, a file copied into the folder twice, a
restated part appended to the first. Counted twice it inflates the invoice (``ingest billing``
accepted such a file and ``effective_in_scope`` grew by half). So within one ``ingest
billing`` call (all its files) a duplicate is refused, naming both places.

What counts as a duplicate: every column of the *file* equal (NULL equal to NULL), not only
the columns tenantcost keeps: two CUR lines differing only in ``identity_line_item_id`` or a
usage amount are two lines. Files are compared with the files of the same column set (a CSV
file with the CSV files of the same header, Parquet files of one schema together); files of
different layouts cannot hold the same line.

How: DuckDB hashes each line's cells once (``hash`` of every column) and groups by the hash,
one streaming aggregate over the scan. Only the few lines whose hash repeats are read again
and compared column by column, so a hash collision never refuses two different lines.

Some exports do carry identical lines that are distinct charges: a provider that leaves out
the line item id can bill two equal usage records of one resource and hour, and AWS CUR
split cost allocation data (EKS pods) can show identical lines for pods that share every
attribute. ``--keep-duplicates`` keeps them (docs/store.md says when).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol

import duckdb

from tenantcost.duck import quote
from tenantcost.errors import InputError

_NAMES = itertools.count(1)
_POSITION = ("x_src_file", "x_src_row", "file_row_number")
"""Columns a scan adds (where a line is), never part of the line."""


class Scan(Protocol):
    """One scan of billing files (``tenantcost.readers.billing.Source``)."""

    @property
    def files(self) -> tuple[str, ...]: ...
    @property
    def fmt(self) -> str: ...
    @property
    def types(self) -> dict[str, str]: ...
    def relation(self) -> str: ...


def find_duplicate(con: duckdb.DuckDBPyConnection, scans: Sequence[Scan]) -> InputError | None:
    """The first line that repeats an earlier one exactly, as one :class:`InputError` naming
    both (file and row); None when every line is distinct."""
    groups: dict[tuple[object, ...], list[Scan]] = {}
    for scan in scans:
        layout = (scan.fmt, tuple((n.lower(), t) for n, t in scan.types.items()))
        groups.setdefault(layout, []).append(scan)
    found: list[tuple[str, int, str, int, int]] = []
    for group in groups.values():
        pair = _duplicate_in(con, group)
        if pair is not None:
            found.append(pair)
    if not found:
        return None
    second_file, second_row, first_file, first_row, more = min(found)
    others = f" ({more} more duplicate lines)" if more else ""
    return InputError(
        f"the line repeats {first_file}, row {first_row} exactly (every column equal){others}:"
        " a duplicate is refused, since a file read twice would count it twice; pass"
        " --keep-duplicates if the provider really bills such lines (docs/store.md)",
        file=second_file,
        where=f"row {second_row}",
    )


def _duplicate_in(
    con: duckdb.DuckDBPyConnection, group: Sequence[Scan]
) -> tuple[str, int, str, int, int] | None:
    """(second file, row, first file, row, further duplicates) of the earliest repeated line
    among scans of one layout, or None."""
    columns = [quote(c) for c in group[0].types if c.lower() not in _POSITION]
    union = " UNION ALL BY NAME ".join(f"(SELECT * FROM {s.relation()})" for s in group)
    lines = (
        "SELECT CAST(x_src_file AS VARCHAR) AS x_file, CAST(x_src_row AS BIGINT) AS x_row, "
        f"{', '.join(columns)}, hash({', '.join(columns)}) AS x_hash FROM ({union})"
    )
    name = f"tc_billing_repeated_{next(_NAMES)}"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT x_hash FROM ({lines})"
                " GROUP BY x_hash HAVING count(*) > 1")  # fmt: skip
    try:
        if not con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0]:
            return None
        # the few candidate lines, compared cell by cell (equal hashes may differ)
        rows = con.execute(f"""
            WITH c AS (SELECT * FROM ({lines}) SEMI JOIN {name} USING (x_hash)),
            g AS (SELECT list(x_file ORDER BY x_file, x_row) AS files,
                         list(x_row ORDER BY x_file, x_row) AS rows_
                  FROM c GROUP BY {", ".join(columns)}, x_hash HAVING count(*) > 1)
            SELECT files[2], rows_[2], files[1], rows_[1],
                   sum(len(files) - 1) OVER () - 1
            FROM g ORDER BY files[2], rows_[2] LIMIT 1""").fetchall()
    finally:
        con.execute(f"DROP TABLE IF EXISTS {name}")
    if not rows:
        return None
    second_file, second_row, first_file, first_row, more = rows[0]
    return str(second_file), int(second_row), str(first_file), int(first_row), int(more)


__all__ = ["find_duplicate"]
