"""What has happened to the store, counted from the store: ingests, runs, closes, alerts and
each month's state, for the service's ``/metrics`` (:mod:`tenantcost.service.metrics`).

Why from the store and not from a process's memory: in a cluster, the hourly pull, the
watch and the monthly close run as CronJobs, short processes that are gone before any
Prometheus could scrape them, and the serving processes restart. The store is the one
place every ingest, run, close and alert delivery is recorded, so a count read from it is
the same whichever worker answers the scrape and survives every restart. A failing hourly
pull shows as an old "last success" (the latest committed batch of its source).

Sources become labels of bounded cardinality (:func:`source_label`): a live source keeps its
URL (one per cluster or Prometheus), the pushed ones are named by how they arrived, and
files are ``file``: a batch's ``source`` names its files, one new label value per ingest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Engine, func, select

from tenantcost.limits import FIRST_MONTH, LAST_MONTH
from tenantcost.store.models import AlertDelivery, Batch, MonthEvent, Run, table
from tenantcost.store.month_state import MonthAction, MonthState, latest_events
from tenantcost.timefmt import utc

LIVE_PREFIXES = ("OpenCost API ", "prometheus")
"""A ``batch.source`` of a live pull (:func:`tenantcost.store.live.cost_origin`,
:func:`~tenantcost.store.live.usage_origin`): kept as written, one per cluster."""


class Origin(StrEnum):
    """How a batch arrived: the issue's "kinds" of ingest beside costs, usage and billing."""

    OPENCOST = "opencost"
    PROMETHEUS = "prometheus"
    OTLP = "otlp"
    API = "api"  # POST /api/v1/usage(.parquet): the meter and other pushers
    FILE = "file"


def origin_of(source: str) -> Origin:
    """The :class:`Origin` of a ``batch.source``."""
    if source.startswith("OpenCost API "):
        return Origin.OPENCOST
    if source.startswith("prometheus"):
        return Origin.PROMETHEUS
    if source.startswith("POST /v1/metrics"):
        return Origin.OTLP
    if source.startswith("POST /api/"):
        return Origin.API
    return Origin.FILE


def source_label(source: str) -> str:
    """A bounded label for a ``batch.source``: a live source's own text (its URL), else its
    :class:`Origin` (a file's name, or a token's, would add a label value per batch)."""
    return source if source.startswith(LIVE_PREFIXES) else str(origin_of(source))


@dataclass(frozen=True)
class IngestCount:
    """Committed batches and their rows of one kind and origin."""

    kind: str
    origin: Origin
    batches: int
    rows: int


@dataclass(frozen=True)
class LastIngest:
    """When a source's latest committed batch of a kind was ingested."""

    kind: str
    source: str
    at: datetime


@dataclass(frozen=True)
class MonthFigure:
    """A month's state (``open``/``closed``) and its latest issued revision (0: none)."""

    month: str
    state: str
    revision: int


@dataclass(frozen=True)
class Activity:
    """Everything ``/metrics`` reads from the store, in one pass."""

    ingests: list[IngestCount]
    last_ingests: list[LastIngest]
    runs: dict[str, int]
    """Runs per status."""
    month_events: dict[str, int]
    """Closes and reopens (``month_event.action``)."""
    alerts: dict[tuple[str, str], int]
    """Alert deliveries per (channel, status): ``sent`` is final, ``failed`` is retried."""
    months: list[MonthFigure]


def read_activity(engine: Engine) -> Activity:
    """The store's activity: a handful of grouped queries (indexed or small tables), so a
    scrape every 30 s costs milliseconds even on a store of years."""
    b = table(Batch).c
    with engine.connect() as conn:
        batches = conn.execute(
            select(b.kind, b.source, func.count(), func.sum(b.rows), func.max(b.created_at))
            .where(b.status == "committed")
            .group_by(b.kind, b.source)
        ).all()
        r = table(Run).c
        runs: dict[Any, Any] = dict(
            conn.execute(select(r.status, func.count()).group_by(r.status)).all()
        )
        e = table(MonthEvent).c
        events: dict[Any, Any] = dict(
            conn.execute(select(e.action, func.count()).group_by(e.action)).all()
        )
        a = table(AlertDelivery).c
        alerts = conn.execute(
            select(a.channel, a.status, func.count()).group_by(a.channel, a.status)
        ).all()
        months = _months(conn)
    return Activity(
        ingests=_ingest_counts(batches),
        last_ingests=_last_ingests(batches),
        runs={str(k): int(v) for k, v in runs.items()},
        month_events={str(k): int(v) for k, v in events.items()},
        alerts={(str(c), str(s)): int(n) for c, s, n in alerts},
        months=months,
    )


def _ingest_counts(batches: Sequence[Any]) -> list[IngestCount]:
    counts: dict[tuple[str, Origin], tuple[int, int]] = {}
    for kind, source, n, rows, _at in batches:
        key = (str(kind), origin_of(str(source)))
        seen = counts.get(key, (0, 0))
        counts[key] = (seen[0] + int(n), seen[1] + int(rows or 0))
    return [IngestCount(k, o, n, rows) for (k, o), (n, rows) in sorted(counts.items())]


def _last_ingests(batches: Sequence[Any]) -> list[LastIngest]:
    latest: dict[tuple[str, str], datetime] = {}
    for kind, source, _n, _rows, at in batches:
        key = (str(kind), source_label(str(source)))
        when = utc(at)
        if key not in latest or when > latest[key]:
            latest[key] = when
    return [LastIngest(k, s, at) for (k, s), at in sorted(latest.items())]


def _months(conn: Connection) -> list[MonthFigure]:
    """Every month with a run or an event: its latest event's state, its latest revision."""
    e, r = table(MonthEvent).c, table(Run).c
    latest = latest_events(FIRST_MONTH, LAST_MONTH)
    states = dict(conn.execute(select(e.month, e.action).join(latest, latest.c.id == e.id)).all())
    revisions = dict(
        conn.execute(
            select(e.month, func.max(e.revision))
            .where(e.action == MonthAction.CLOSE.value)
            .group_by(e.month)
        ).all()
    )
    months = set(states) | set(conn.execute(select(r.month).distinct()).scalars())
    return [
        MonthFigure(
            str(m),
            str(MonthState.CLOSED if states.get(m) == MonthAction.CLOSE else MonthState.OPEN),
            int(revisions.get(m, 0)),
        )
        for m in sorted(months)
    ]
