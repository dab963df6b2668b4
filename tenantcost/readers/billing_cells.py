"""Billing cells to exact values, in SQL: decimals, UTC timestamps, text and tag JSON.

Billing files arrive as CSV text (read ``all_varchar``) or as typed Parquet (CUR 2.0 writes
costs as DOUBLE, FOCUS exports DECIMAL or DOUBLE, timestamps with or without zone). Every
reader of billing data turns a cell into the canonical type through one of these SQL
expressions, so the rules hold for every format and every column alike, and the whole column
is checked by DuckDB at once (no Python loop per row):

* **decimals** are ``DECIMAL(38,18)``. Text must be a plain or E-notation number with at most 18
  decimal places once trailing zeros are dropped: DuckDB's own cast would round a 19th place
  silently, and accepts ``1_000``; both are refused here. DOUBLE cells go through their
  shortest round-trip text (``0.1`` stays ``0.1``, never ``0.1000000000000000055``), so a
  Parquet double means the decimal it was written from.
* **timestamps** are ``TIMESTAMP WITH TIME ZONE``. Text with a zone (``Z``, ``+02:00``) keeps
  it; text without one, dates, and zone-less Parquet timestamps are UTC, as FOCUS requires
  (never the session's zone).
* **text** is ``''`` when absent or NULL, so ``match:`` globs never meet NULL.
* **tags** are a JSON object text, ``'{}'`` when absent; CUR 2.0's MAP column becomes one.

Each builder returns the value expression, the raw text (for the error message) and the SQL
conditions that make a cell *missing* (NULL or empty) or *bad* (present but not readable).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DECIMAL = "DECIMAL(38,18)"
NUMBER_RE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
ZONE_RE = r"[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?\s*([Zz]|[+-][0-9]{2}(:?[0-9]{2})?)$"
MAX_SCALE = 18
_DECIMAL_TYPE = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Cell:
    """One source cell as SQL: its value, its raw text, and when it is missing or bad."""

    value: str
    raw: str
    missing: str
    bad: str


def _text_of(ref: str) -> str:
    return f"NULLIF(trim(CAST({ref} AS VARCHAR)), '')"


def decimal_cell(ref: str, dtype: str) -> Cell:
    """``ref`` (a column of DuckDB type ``dtype``) as an exact ``DECIMAL(38,18)``."""
    match = _DECIMAL_TYPE.fullmatch(dtype.upper())
    exact = dtype.upper() in _INTEGERS or (
        match is not None
        and int(match.group(2)) <= MAX_SCALE
        and int(match.group(1)) - int(match.group(2)) <= 38 - MAX_SCALE
    )
    if exact:
        return Cell(f"CAST({ref} AS {DECIMAL})", f"CAST({ref} AS VARCHAR)", f"{ref} IS NULL",
                    "FALSE")  # fmt: skip
    if match is not None and int(match.group(2)) <= MAX_SCALE:
        # A typed decimal with few places (Parquet's DECIMAL(38,10)): exact as it is; only a
        # value beyond 10^20 would not fit, and TRY_CAST says so (whole columns, no regex).
        value = f"TRY_CAST({ref} AS {DECIMAL})"
        return Cell(value, f"CAST({ref} AS VARCHAR)", f"{ref} IS NULL",
                    f"{ref} IS NOT NULL AND {value} IS NULL")  # fmt: skip
    text = _text_of(ref)
    places = (
        f"length(rtrim(regexp_extract({text}, '\\.([0-9]*)', 1), '0'))"
        f" - COALESCE(TRY_CAST(regexp_extract({text}, '[eE]([+-]?[0-9]+)$', 1) AS INTEGER), 0)"
    )
    value = (
        f"CASE WHEN regexp_full_match({text}, '{NUMBER_RE}') AND {places} <= {MAX_SCALE}"
        f" THEN TRY_CAST({text} AS {DECIMAL}) END"
    )
    return Cell(value, text, f"{text} IS NULL", f"{text} IS NOT NULL AND ({value}) IS NULL")


def timestamp_cell(ref: str, dtype: str) -> Cell:
    """``ref`` as a UTC ``TIMESTAMP WITH TIME ZONE`` (zone-less values are UTC)."""
    kind = dtype.upper()
    if kind == "TIMESTAMP WITH TIME ZONE":
        return Cell(ref, f"CAST({ref} AS VARCHAR)", f"{ref} IS NULL", "FALSE")
    if kind.startswith("TIMESTAMP") or kind == "DATE":
        value = f"timezone('UTC', CAST({ref} AS TIMESTAMP))"
        return Cell(value, f"CAST({ref} AS VARCHAR)", f"{ref} IS NULL", "FALSE")
    text = _text_of(ref)
    value = (
        f"CASE WHEN regexp_matches({text}, '{ZONE_RE}') THEN TRY_CAST({text} AS TIMESTAMPTZ)"
        f" ELSE timezone('UTC', TRY_CAST({text} AS TIMESTAMP)) END"
    )
    return Cell(value, text, f"{text} IS NULL", f"{text} IS NOT NULL AND ({value}) IS NULL")


def text_value(ref: str | None) -> str:
    """``ref`` as text, ``''`` when the column is absent (None) or the cell NULL."""
    return "''" if ref is None else f"COALESCE(CAST({ref} AS VARCHAR), '')"


def tags_cell(ref: str | None, dtype: str) -> Cell:
    """``ref`` as a JSON object text (``'{}'`` when absent or NULL)."""
    if ref is None:
        return Cell("'{}'", "NULL", "FALSE", "FALSE")
    kind = dtype.upper()
    if kind.startswith("MAP") or kind.startswith("STRUCT") or kind == "JSON":
        value = f"COALESCE(CAST(to_json({ref}) AS VARCHAR), '{{}}')"
        return Cell(value, "NULL", "FALSE", "FALSE")
    text = _text_of(ref)
    # An object is valid JSON that starts with "{": one parse, no second json_type pass.
    bad = f"{text} IS NOT NULL AND NOT (starts_with({text}, '{{') AND json_valid({text}))"
    return Cell(f"COALESCE({text}, '{{}}')", text, "FALSE", bad)
