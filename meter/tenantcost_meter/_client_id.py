"""The client-id rule of tenantcost's store, copied with the standard library only.

The meter runs inside the application's process, which must not import tenantcost (pandas,
DuckDB...). A tenant id the store would refuse must not reach it: the whole batch would be
refused, and one hostile header would cost every other tenant of that hour their usage. So the
meter applies the store's rule (``tenantcost/client_id.py``: no control character, valid UTF-8,
at most 256 characters) before a request is counted, and counts a refused id with the empty
client. ``tests/test_meter_client_id.py`` checks with hypothesis that both copies agree.
"""

from __future__ import annotations

import re

MAX_CLIENT_ID = 256
"""Characters (code points) a client id may have at most."""

_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Control characters (C0, DEL, C1) and lone surrogates (not encodable as UTF-8)."""


def client_id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a client id, as the end of a one-line message; None if it can.

    The message names the character by its code point and position, never the value itself:
    it goes to the application's log, which must not echo control characters raw."""
    if len(value) > MAX_CLIENT_ID:
        return f"client id has {len(value)} characters, at most {MAX_CLIENT_ID} are allowed"
    found = _BAD.search(value)
    if found is None:
        return None
    char = found.group(0)
    what = "a lone surrogate (not valid UTF-8)" if "\ud800" <= char <= "\udfff" else (
        "a control character"
    )
    return f"client id holds {what} U+{ord(char):04X} at character {found.start() + 1}"
