"""What text the store keeps: one rule for every text column that comes in, on both backends.

Text read from an input (a billing line's account, service and tags, a catalog's names, plans
and segments) is stored in SQLite or PostgreSQL and in Parquet, then written into CSV, e-mail
headers, URLs, sheets and terminals. SQLite stores a NUL in ``TEXT``; PostgreSQL refuses it
(psycopg ``DataError``), so without one rule the same file is accepted on one backend and
crashes the other. A CR/LF in a catalog name breaks the e-mail headers ``watch --notify``
builds, long after ``catalog load`` accepted it. So a text cell is refused where it comes in,
in one line naming file, row and column, when it:

* holds a control character (C0, DEL or C1: ``\\x00``-``\\x1f``, ``\\x7f``-``\\x9f``);
* is not valid Unicode text (a lone surrogate such as ``"\\ud800"`` from JSON): it cannot be
  encoded as UTF-8, so no backend can store it. A file that is not UTF-8 is refused by its
  reader before any cell is typed.

It is the client-id rule (:mod:`tenantcost.client_id`) without its length limit: a client id is
a key; other text (a charge description, a tag set) may be long. One exception: a JSON text
(billing ``Tags``) may hold tab, LF and CR, which JSON allows between its tokens (a
pretty-printed object); inside a JSON string they are escaped, never raw.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported by the callers that pass a column
    import pandas as pd

CONTROL = r"[\x00-\x1f\x7f-\x9f]"
"""Control characters, as a pattern both Python's ``re`` and RE2 (DuckDB, Arrow) read."""
JSON_CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
""":data:`CONTROL` less the JSON whitespace (tab, LF, CR), for a JSON text."""
REFUSED = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Control characters and lone surrogates (only Python strings can hold the latter)."""


def text_problem(value: str, what: str = "text") -> str | None:
    """Why ``value`` cannot be stored, as the end of a one-line error; None if it can."""
    found = REFUSED.search(value)
    if found is None:
        return None
    char = found.group(0)
    kind = (
        "a lone surrogate (not valid UTF-8)"
        if "\ud800" <= char <= "\udfff"
        else ("a control character")
    )
    return f"{what} holds {kind} U+{ord(char):04X} at character {found.start() + 1}"


def bad_texts(values: pd.Series) -> pd.Series:
    """A boolean mask of the strings in ``values`` that :func:`text_problem` refuses, computed
    on the whole column at once; explain the first with that function."""
    pattern = REFUSED.pattern if values.dtype == object else CONTROL
    return values.str.contains(pattern, regex=True).fillna(False).astype(bool)


def bad_text_sql(expression: str, *, json: bool = False) -> str:
    """A DuckDB condition true when ``expression`` (VARCHAR) holds what :func:`text_problem`
    refuses. DuckDB strings are valid UTF-8, so only the control characters are left.

    RE2 reads a few hundred MB a second, too slow for every text cell of 10 M billing lines,
    so a cheap test runs first and the expression only for the rows it lets through (DuckDB
    evaluates an ``AND`` on the rows its left side selected): ``to_json`` escapes exactly the
    C0 characters, ``"`` and ``\\`` (so the length changes), DEL is one ``contains``, and
    a C1 character makes byte and character counts differ, as any non-ASCII text does.

    ``json=True``: a JSON text that its reader has checked valid (billing ``Tags``), where a
    raw C0 character other than tab, LF and CR makes it invalid, so DEL and C1 are left."""
    e = expression
    wide = f"(contains({e}, chr(127)) OR strlen({e}) <> length({e}))"
    if json:
        return f"({wide} AND regexp_matches({e}, '{JSON_CONTROL}'))"
    escaped = f"strlen(CAST(to_json({e}) AS VARCHAR)) <> strlen({e}) + 2"
    return f"(({escaped} OR {wide}) AND regexp_matches({e}, '{CONTROL}'))"


__all__ = ["CONTROL", "JSON_CONTROL", "REFUSED", "bad_text_sql", "bad_texts", "text_problem"]
