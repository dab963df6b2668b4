"""Billing CSV files as DuckDB scans with fixed options, and their errors as one line.

DuckDB's CSV reader normally *sniffs* a file (dialect, header, comment character, column
count) from a sample. For billing data that is wrong twice over: a line starting with ``#``
is taken for a comment and silently dropped, and a file whose rows do not all have the
header's field count fails with "Error when sniffing file", naming no row. So the header is
read here (Python's ``csv``, one record), and every scan gives DuckDB the columns and the
dialect (``auto_detect=false``, RFC 4180: comma, ``"`` quoting, no comment character): a
short or long row, an unterminated quote, a line over :data:`MAX_LINE_BYTES` and a non-UTF-8
cell are then errors of the scan itself.

DuckDB words those errors without the file's column ("CSV Error on Line: 3"), or without the
row ("Line: 1" for a 10 MB cell). Only when a scan has failed, :func:`diagnose` scans the
file once more with ``store_rejects`` (DuckDB records each bad line with its number, column
and kind, vectorised like any scan) and turns the first rejected line into the one line
every reader gives: file, ``row N`` (the line number; the header is line 1) and column. The
happy path pays nothing for it.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import itertools
import os
import re

import duckdb

from tenantcost.duck import quote
from tenantcost.errors import InputError
from tenantcost.readers.billing_cells import literal

MAX_LINE_BYTES = 2_000_000
"""The longest line (one record) of a billing CSV file, in bytes: DuckDB's own limit. A real
export line is a few kilobytes (its tags JSON included); a longer one is corrupt data."""

_NAMES = itertools.count(1)
_FOUND = re.compile(r"Found: (\d+)")
_SIZE = re.compile(r"Actual Size:\s*(\d+)")


def csv_header(file: str) -> list[str]:
    """The column names of a billing CSV file: its first record (a BOM is dropped)."""
    try:
        opener = gzip.open if file.lower().endswith(".gz") else open
        # surrogateescape: a bad byte in a later line is the scan's to name, with its row
        with opener(file, "rt", encoding="utf-8-sig", errors="surrogateescape",
                    newline="") as handle:  # fmt: skip
            header = next(csv.reader(handle), None)
    except csv.Error as exc:
        raise InputError(f"not a valid CSV header: {exc}", file=file, where="row 1") from None
    except (OSError, EOFError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InputError(f"cannot read billing file: {reason}", file=file) from None
    if not header or all(not h.strip() for h in header):
        raise InputError("file is empty: expected a header line", file=file, where="row 1")
    seen: set[str] = set()
    for name in header:
        if any("\udc80" <= char <= "\udcff" for char in name):
            raise InputError("not UTF-8 text: billing files are UTF-8", file=file,
                             where="row 1")  # fmt: skip
        if name.lower() in seen:
            raise InputError("column appears more than once in the header", file=file,
                             where="row 1", column=name)  # fmt: skip
        seen.add(name.lower())
    return header


def csv_scan(file: str, header: list[str], extra: str = "") -> str:
    """``read_csv`` of ``file`` with every column text and the dialect given, never sniffed."""
    columns = "{" + ", ".join(f"{literal(h)}: 'VARCHAR'" for h in header) + "}"
    return (
        f"read_csv({literal(file)}, auto_detect=false, columns={columns}, header=true,"
        f" delim=',', quote='\"', escape='\"', comment='', max_line_size={MAX_LINE_BYTES},"
        f" filename='x_src_file', hive_partitioning=false{extra})"
    )


def diagnose(con: duckdb.DuckDBPyConnection, file: str, header: list[str]) -> InputError | None:
    """The first bad line of ``file`` as one :class:`InputError` (file, row, column), or None
    when the file reads cleanly (the failure was elsewhere)."""
    table = f"tc_billing_rejects_{next(_NAMES)}"
    every = ", ".join(f"hash({quote(h)})" for h in header)  # read (and check) every cell
    try:
        con.execute(
            f"SELECT count(*), min(hash({every})) FROM "
            + csv_scan(file, header, f", store_rejects=true, rejects_table='{table}',"
                       f" rejects_scan='{table}_scans'")
        ).fetchall()  # fmt: skip
        found = con.execute(
            f"SELECT line, column_name, error_type, error_message FROM {table}"
            " ORDER BY line, column_idx LIMIT 1"
        ).fetchall()
    except duckdb.Error:
        return None
    finally:
        for name in (table, f"{table}_scans"):
            with contextlib.suppress(duckdb.Error):
                con.execute(f"DROP TABLE IF EXISTS {name}")
    if not found:
        return None
    line, column, kind, message = found[0]
    where = f"row {int(line)}"
    expected = len(header)
    count = _FOUND.search(str(message))
    if kind == "MISSING COLUMNS":
        got = count.group(1) if count else "fewer"
        return InputError(f"the row has {got} fields, the header has {expected}: a field is"
                          " missing", file=file, where=where, column=column)  # fmt: skip
    if kind == "TOO MANY COLUMNS":
        got = count.group(1) if count else "more"
        return InputError(f"the row has {got} fields, the header has {expected}: field"
                          f" {expected + 1} is beyond the header's last column '{header[-1]}'",
                          file=file, where=where)  # fmt: skip
    if kind == "INVALID ENCODING":
        return InputError("not UTF-8 text: billing files are UTF-8", file=file, where=where,
                          column=column)  # fmt: skip
    if kind == "UNQUOTED VALUE":
        return InputError("a quoted value is not closed, or text follows its closing quote",
                          file=file, where=where, column=column)  # fmt: skip
    if kind == "LINE SIZE OVER MAXIMUM":
        size = _SIZE.search(str(message))
        longest = _longest_cell(con, file, header, int(line))
        return InputError(
            f"the line has {int(size.group(1)) if size else 'more than'} bytes, at most"
            f" {MAX_LINE_BYTES:,} are allowed in a billing line", file=file, where=where,
            column=longest,
        )  # fmt: skip
    return InputError(f"not a valid CSV line: {' '.join(str(message).split())}", file=file,
                      where=where, column=column)  # fmt: skip


def _longest_cell(
    con: duckdb.DuckDBPyConnection, file: str, header: list[str], line: int
) -> str | None:
    """The column of the longest cell of record ``line`` (read with no line size limit)."""
    lengths = ", ".join(f"octet_length(encode(coalesce({quote(h)}, '')))" for h in header)
    whole = f"max_line_size={os.path.getsize(file) + 1}"  # this line, however long
    scan = csv_scan(file, header).replace(f"max_line_size={MAX_LINE_BYTES}", whole)
    try:
        found = con.execute(
            f"SELECT [{lengths}] FROM (SELECT *, row_number() OVER () + 1 AS x_line"
            f" FROM {scan}) WHERE x_line = ?", [line]
        ).fetchall()  # fmt: skip
    except duckdb.Error:
        return None
    if not found:
        return None
    sizes = list(found[0][0])
    return header[sizes.index(max(sizes))]


__all__ = ["MAX_LINE_BYTES", "csv_header", "csv_scan", "diagnose"]
