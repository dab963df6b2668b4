"""What a client id may be: the one rule every path that accepts one applies.

A client id travels further than any other string: from a usage file or an API body into the
store (SQLite and PostgreSQL), into URLs, file names, ``Content-Disposition`` headers, sheets
and PDFs. A record the store accepts must be usable by ``run`` and by every route, so the rule
is checked where records come in (the usage readers, ``ingest``, ``POST /api/v1/usage``) and
nowhere relaxed later. An id is refused when it:

* holds a control character (C0, DEL or C1: ``\\x00``-``\\x1f``, ``\\x7f``-``\\x9f``):
  PostgreSQL cannot store NUL in text, and the others break headers, CSV and terminals;
* is not valid Unicode text (a lone surrogate such as ``"\\ud800"`` from JSON): it cannot be
  encoded as UTF-8, so no backend can store it;
* is longer than :data:`MAX_CLIENT_ID` characters: ids are keys, not payloads, and a 200 MB id
  must not reach the store.

Every other character is allowed, ``/`` and non-Latin scripts included: the service encodes
ids in its URLs and headers. The empty id stays valid: it is usage without a client,
whose cost is reported as unattributed, never dropped. The application-side meter
(``tenantcost_meter``) applies the same rule with the standard library only; keep both equal.
The characters refused are those of every stored text (:mod:`tenantcost.stored_text`); a
client id adds the length limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenantcost.stored_text import CONTROL, REFUSED, text_problem

if TYPE_CHECKING:  # pandas is imported where used: the rule models start without it
    import pandas as pd

MAX_CLIENT_ID = 256
"""Characters (code points) a client id may have at most."""

_CONTROL = CONTROL
"""Control characters (the stored-text rule, :mod:`tenantcost.stored_text`)."""


def client_id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a client id, as the end of a one-line error; None if it can."""
    if len(value) > MAX_CLIENT_ID:
        return f"client id has {len(value)} characters, at most {MAX_CLIENT_ID} are allowed"
    return text_problem(value, "client id")


def bad_client_ids(clients: pd.Series) -> pd.Series:
    """A boolean mask of the ids in ``clients`` (strings) that :func:`client_id_problem`
    refuses, computed on the whole column at once; explain the first with that function.

    The column keeps its dtype: an Arrow string column cannot hold a lone surrogate at all, so
    callers that parse JSON check the Python strings (object dtype) before building one."""
    too_long = clients.str.len() > MAX_CLIENT_ID
    pattern = REFUSED.pattern if clients.dtype == object else _CONTROL
    bad_char = clients.str.contains(pattern, regex=True)
    return (too_long | bad_char).fillna(False).astype(bool)


def bad_client_id_sql(column: str = "client") -> str:
    """A DuckDB condition true for the values of ``column`` (VARCHAR) that
    :func:`client_id_problem` refuses. DuckDB strings are valid UTF-8, so no lone surrogate
    can reach it; length counts code points, as Python's ``len`` does."""
    return f"(length({column}) > {MAX_CLIENT_ID} OR regexp_matches({column}, '{_CONTROL}'))"
