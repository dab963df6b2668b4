"""A month's state, open or closed, and the guard every writer of the store asks first.

A month's state is the action of its latest ``month_event`` (closed after a close; open
before any event and after a reopen), so the state and its whole history are one append-only
table and nothing issued is ever updated or deleted. ``close`` and ``reopen`` write those
events (:mod:`tenantcost.store.cycle`); everything else only reads them.

Writers check a month's state inside their own write transaction (:func:`refuse_if_closed`
for an ingest of usage, costs or billing, :func:`refuse_rule_version` for a rule load,
:func:`closed_months` for a withdrawal), and close writes inside the same lock, so a close
and an ingest never race: whichever commits second sees the other's result. The state and the
guard live here, apart from the close itself, because the writers (ingest, rules, batches) and
``status`` ask them while ``close`` reads those very modules (it runs the month, checks its
hours and billing): with the close, they would import each other.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, Subquery, func, select

from tenantcost.errors import InputError
from tenantcost.store.connection import connected
from tenantcost.store.models import MonthEvent, RuleVersion, table
from tenantcost.timefmt import iso_offset, utc

FOREVER = datetime(9999, 12, 1, tzinfo=UTC)
"""The end of the last rule version's time in force."""


class MonthState(StrEnum):
    """Whether a month's inputs and rules may still change."""

    OPEN = "open"
    CLOSED = "closed"


class MonthAction(StrEnum):
    """What a ``month_event`` row records."""

    CLOSE = "close"
    REOPEN = "reopen"


class MonthClosed(InputError):
    """Refused because a month is closed (exit 2); the message names ``reopen``."""


def latest_events(first: str, last: str) -> Subquery:
    """A subquery: the id of the latest event of each month from ``first`` to ``last``
    (``YYYY-MM`` strings order like the months)."""
    e = table(MonthEvent).c
    query = select(e.month, func.max(e.id).label("id")).where(e.month >= first, e.month <= last)
    return query.group_by(e.month).subquery()


def latest_event(connection: Connection, month: str) -> dict[str, Any] | None:
    """The month's latest ``month_event`` row (``None`` before any): its action is the
    month's state, and ``close`` and ``reopen`` read its revision, reason and actor."""
    e = table(MonthEvent).c
    row = (
        connection.execute(select(table(MonthEvent)).where(e.month == month).order_by(e.id.desc()))
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def month_state(bind: Connection | Engine, month: str) -> MonthState:
    """Closed after a close, open before any close and after a reopen."""
    with connected(bind) as connection:
        event = latest_event(connection, month)
    closed = event is not None and event["action"] == MonthAction.CLOSE
    return MonthState.CLOSED if closed else MonthState.OPEN


def issued_revision(bind: Connection | Engine, month: str) -> int:
    """The month's latest issued revision; 0 when it was never closed."""
    e = table(MonthEvent).c
    with connected(bind) as connection:
        query = select(func.max(e.revision)).where(
            e.month == month, e.action == MonthAction.CLOSE.value
        )
        return int(connection.execute(query).scalar() or 0)


def closed_months(bind: Connection | Engine, start: datetime, end: datetime) -> list[str]:
    """The closed months among those ``[start, end)`` overlaps (UTC), in order."""
    first, last = utc(start), utc(end) - pd.Timedelta(microseconds=1)
    if last < first:
        return []
    e, latest = table(MonthEvent).c, latest_events(f"{first:%Y-%m}", f"{last:%Y-%m}")
    query = (
        select(e.month)
        .join(latest, latest.c.id == e.id)
        .where(e.action == MonthAction.CLOSE.value)
        .order_by(e.month)
    )
    with connected(bind) as connection:
        return [str(m) for m in connection.execute(query).scalars()]


def _reopen_hint(month: str) -> str:
    return f"run `tenantcost reopen --month {month} --reason TEXT` first"


def refuse_if_closed(connection: Connection, start: datetime, end: datetime, what: str) -> None:
    """Refuse (:class:`MonthClosed`, exit 2) a write that would change a closed month's
    inputs: ``[start, end)`` is what it covers, ``what`` names it (``"ingest usage"``).
    Call it inside the writer's write transaction, so no close can slip in between."""
    closed = closed_months(connection, start, end)
    if closed:
        month = closed[0]
        revision = issued_revision(connection, month)
        raise MonthClosed(
            f"{what} would change {', '.join(closed)}, closed (revision {revision} issued): "
            f"{_reopen_hint(month)}, then ingest the correction and close again"
        )


def refuse_rule_version(connection: Connection, rule_id: str, effective_from: datetime) -> None:
    """Refuse a new rule version that would be in force for an hour of a closed month: from
    its ``effective_from`` until the next stored version's (or for ever)."""
    v = table(RuleVersion).c
    following = connection.execute(
        select(func.min(v.effective_from)).where(v.effective_from > effective_from)
    ).scalar()
    end = following if following is not None else FOREVER
    closed = closed_months(connection, effective_from, end)
    if closed:
        month = closed[0]
        raise MonthClosed(
            f"rule version '{rule_id}' (effective_from {iso_offset(effective_from)}) "
            f"would be in force for hours of {', '.join(closed)}, closed (revision "
            f"{issued_revision(connection, month)} issued): {_reopen_hint(month)}"
        )


def stored_cycle_months(bind: Connection | Engine) -> list[str]:
    """Every month with a close or reopen, in order."""
    e = table(MonthEvent).c
    with connected(bind) as connection:
        return [str(m) for m in connection.execute(select(e.month).distinct().order_by(e.month))
                .scalars()]  # fmt: skip


__all__ = [
    "FOREVER",
    "MonthAction",
    "MonthClosed",
    "MonthState",
    "closed_months",
    "issued_revision",
    "latest_event",
    "month_state",
    "refuse_if_closed",
    "refuse_rule_version",
    "stored_cycle_months",
]
