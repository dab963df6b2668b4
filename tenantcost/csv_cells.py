"""CSV cells a spreadsheet would run: the one rule every CSV tenantcost writes applies.

Finance opens tenantcost's CSV files in spreadsheets, and a spreadsheet runs a cell that
starts with ``=``, ``+``, ``-`` or ``@`` as a formula (tab and carriage return are read as
such a start too). Client ids, catalog names and rule names are free text: a client id
``=cmd|' /C calc'!A0`` arrives through the meter, OTLP or the usage API like any other. So
every CSV writer puts a ``'`` before a **text** cell that starts with one of
:data:`TRIGGERS` (OWASP's rule for CSV injection); a spreadsheet shows the cell as text, without
the quote.

Whether a cell is text is decided by its column's type, never by its content: a negative
amount is a number and stays ``-1.5``, while a client id ``-1`` is text and is written
``'-1``. Exact decimal amounts are held as strings only to keep them exact, so each writer
names those columns (``decimals``) and they are written as they are.

What tenantcost reads back (a budget plan through ``budget load``, a catalog, a canonical
cost file such as ``collect``'s ``costs.csv``) removes that prefix again, so files round-trip:
only a ``'`` directly followed by one of :data:`TRIGGERS` at the start of a cell is removed
(a value that itself starts with ``'=`` therefore reads back as ``=``).

The FOCUS export is exempt: FinOps tools read it, and its values must be exactly FOCUS's.
The rule is vectorised on columns: pandas string operations for frames, one SQL expression
for what DuckDB writes itself (``lines.csv``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where used: the rule models start without it
    import pandas as pd

TRIGGERS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
"""A cell starting with one of these is a formula to a spreadsheet (OWASP, CSV injection)."""
PREFIX = "'"
"""What neutralises such a cell: a spreadsheet shows it as text and hides the quote."""
_QUOTED = "^'(?=[=+\\-@\\t\\r])"
"""A prefix this rule added: a ``'`` followed by one of :data:`TRIGGERS`."""


def is_text_column(values: pd.Series) -> bool:
    """Whether a column holds text by its type: pandas strings, or Python objects (whose
    non-string cells are left alone). Numbers, booleans, times and categories of them are
    not text."""
    import pandas as pd

    dtype = values.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return is_text_column(pd.Series(dtype.categories))
    return pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype)


def neutralised_cells(values: pd.Series) -> pd.Series:
    """A text column with :data:`PREFIX` before every cell starting with a trigger (other
    cells, and non-string cells of an object column, unchanged)."""
    import pandas as pd

    if isinstance(values.dtype, pd.CategoricalDtype):
        values = values.astype(object)
    try:
        risky = values.str.startswith(TRIGGERS, na=False).fillna(False).astype(bool)
    except AttributeError:  # an object column without a single string: nothing to do
        return values
    if not risky.any():
        return values
    out = values.copy()
    out[risky] = PREFIX + values[risky].astype(str)
    return out


def neutralised(frame: pd.DataFrame, decimals: Collection[str] = ()) -> pd.DataFrame:
    """``frame`` ready for a CSV file: every text column neutralised, but those in
    ``decimals`` (exact decimal numbers held as strings, such as ``amount``)."""
    columns = [c for c in frame.columns if c not in decimals and is_text_column(frame[c])]
    if not columns:
        return frame
    out = frame.copy()
    for column in columns:
        out[column] = neutralised_cells(frame[column])
    return out


def restored_cells(values: pd.Series) -> pd.Series:
    """Read back: a string column without the :data:`PREFIX` this rule adds (only a ``'``
    directly followed by one of :data:`TRIGGERS` at the start of a cell)."""
    quoted = values.str.startswith(PREFIX, na=False).fillna(False).astype(bool)
    if not quoted.any():
        return values
    return values.str.replace(_QUOTED, "", n=1, regex=True)


def sql_neutralised(expression: str, name: str) -> str:
    """The rule as a DuckDB select item: the VARCHAR ``expression`` neutralised, as column
    ``name``, for CSV files DuckDB writes itself (``COPY``). The first character's code point
    (``ascii``) is the cheapest test DuckDB has: on 5 M lines of five text columns it took
    2.1 s where ``left(..., 1) IN (...)`` took 4.2 s and a regular expression 3.9 s (the
    columns as they are: 1.0 s)."""
    codes = ", ".join(str(ord(t)) for t in TRIGGERS)
    return (
        f"CASE WHEN ascii({expression}) IN ({codes}) THEN '{PREFIX}{PREFIX}' || "
        f"{expression} ELSE {expression} END AS {name}"
    )


__all__ = [
    "PREFIX",
    "TRIGGERS",
    "is_text_column",
    "neutralised",
    "neutralised_cells",
    "restored_cells",
    "sql_neutralised",
]
