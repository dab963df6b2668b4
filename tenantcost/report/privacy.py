"""Keep other clients off a client's sheet.

A sheet goes to one client. The figures on it are that client's own or aggregates of the
cluster, but free text comes from the rule file and the cost data (rule descriptions, workload
and source names, match patterns, input paths) and may name another client. Every such string
passes through :class:`Redactor` before it reaches a sheet template.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[another client]"
_BEFORE = r"(?<![A-Za-z0-9_\-])(?<![A-Za-z0-9_\-]\.)"
_AFTER = r"(?![A-Za-z0-9_\-])(?!\.[A-Za-z0-9_\-])"
"""Token boundaries: an id is not part of a longer id; a dot ends a sentence, not an id."""


def token_pattern(ids: Iterable[str]) -> re.Pattern[str] | None:
    """A regex matching any of ``ids`` as a whole token (longest first), or None if no ids."""
    ordered = sorted({i for i in ids if i}, key=lambda s: (-len(s), s))
    if not ordered:
        return None
    return re.compile(f"{_BEFORE}(?:{'|'.join(re.escape(i) for i in ordered)}){_AFTER}")


class Redactor:
    """Replaces whole-token occurrences of the given client ids with :data:`REDACTED`."""

    def __init__(self, others: Iterable[str]) -> None:
        self._pattern = token_pattern(others)

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)
