"""A calendar month as users write it (``YYYY-MM``, UTC), parsed in one place.

Every command (``--month``, ``--vs``), every route (``/months/{M}``, ``?month=``) and every
input file that names a month reads it here, so a month accepted by one surface is accepted
by all and a month refused by one is refused by all with the same line. The accepted range is
:data:`~tenantcost.limits.FIRST_MONTH` .. :data:`~tenantcost.limits.LAST_MONTH` (2000-01 ..
2099-12): ``0000-01`` and ``9999-12`` are well formed but are typing errors, and the month
after ``9999-12`` does not exist in ``datetime``, which turned them into 500s and tracebacks
far from where they were typed.

The routes use :data:`MONTH_PATTERN` (FastAPI answers 422 for a path or query that does not
match it); the CLI and readers call :func:`parse_month`, which raises the project's
:class:`~tenantcost.errors.InputError` (one line, exit 2).
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum

from tenantcost.errors import InputError
from tenantcost.limits import FIRST_MONTH, LAST_MONTH

MONTH_PATTERN = r"^20[0-9]{2}-(0[1-9]|1[0-2])$"
"""A month ``YYYY-MM`` from 2000-01 to 2099-12, as a regular expression for FastAPI's
``pattern=`` (its only range is :data:`FIRST_MONTH` .. :data:`LAST_MONTH`; a test keeps the
two in step)."""

_MONTH = re.compile(r"[0-9]{4}-[0-9]{2}")


def is_month(text: str) -> bool:
    """Whether ``text`` is a month :func:`parse_month` accepts."""
    return re.fullmatch(MONTH_PATTERN, text) is not None


def parse_month(text: str, what: str = "--month") -> str:
    """``text`` as a month ``YYYY-MM`` in 2000-01 .. 2099-12, else one :class:`InputError` line
    naming ``what`` (the option, field or column it came from)."""
    if not isinstance(text, str) or not _MONTH.fullmatch(text) or not 1 <= int(text[5:]) <= 12:
        raise InputError(f"{what}: expected YYYY-MM, got '{text}'")
    if not FIRST_MONTH <= text <= LAST_MONTH:
        raise InputError(
            f"{what}: month '{text}' is outside the accepted range {FIRST_MONTH} .. {LAST_MONTH}"
        )
    return text


class RelativeMonth(StrEnum):
    """The words a scheduled job writes instead of a month (``watch --month current``,
    ``close --month previous``): a CronJob's command line is fixed, its month is not."""

    CURRENT = "current"
    PREVIOUS = "previous"


def resolve_month(text: str, now: datetime, what: str = "--month") -> str:
    """``text`` as :func:`parse_month` reads it, or ``current`` / ``previous``: the UTC month
    of ``now`` (an aware time) or the one before it."""
    if text in tuple(RelativeMonth):
        year, month = now.year, now.month
        if text == RelativeMonth.PREVIOUS:
            year, month = (year - 1, 12) if month == 1 else (year, month - 1)
        return parse_month(f"{year:04d}-{month:02d}", what)
    return parse_month(text, what)
