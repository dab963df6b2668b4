"""Rendered sheets of issued revisions, and the claim of their one background rendering.

An issued revision never changes (:mod:`tenantcost.store.stored_run`), so its sheets read
the same whenever they are rendered; a PDF takes about a second, so each is rendered once
and kept in ``sheet_render``, shared by every worker and host of the service. The key holds
the renderer's ``version`` (code and templates, :func:`tenantcost.service.sheets.render_version`):
a new renderer misses the old bodies and renders again. Drafts are never kept here.

**The claim** (``sheet_render_job``): after a close, every worker sees the revision pending
and tries to insert its job row; the primary key lets exactly one insert win, across workers,
processes and hosts, on SQLite and PostgreSQL alike. The winner renders the revision and marks
the job finished (with an error if it failed: a failed rendering is not retried in a loop,
reads render on demand). It beats ``heartbeat_at`` as it goes; a claim whose heartbeat is
older than :data:`STALE_SECONDS` belongs to a process that died, and one other process takes
it over with a compare-and-set on that heartbeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, Insert, func, select, update
from sqlalchemy.exc import IntegrityError

from tenantcost.store.connection import connected
from tenantcost.store.models import MonthEvent, SheetRender, SheetRenderJob, table, utcnow

STALE_SECONDS = 300.0
"""A claim not beaten for this long is taken over (its process is gone)."""


@dataclass(frozen=True)
class RenderKey:
    """One issued revision's sheets at one renderer version."""

    run_id: str
    revision: int
    version: str


@dataclass(frozen=True)
class Pending:
    """An issued revision whose sheets the current renderer has not rendered."""

    month: str
    key: RenderKey


def _insert_ignoring_duplicates(bind: Connection) -> Insert:
    """``INSERT`` that skips rows already there (another worker rendered them first)."""
    if bind.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table(SheetRender)).on_conflict_do_nothing()
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table(SheetRender)).on_conflict_do_nothing()


def cached(bind: Connection | Engine, key: RenderKey, client: str, fmt: str) -> bytes | None:
    """The kept body of ``client``'s sheet in ``fmt`` (None: not rendered yet)."""
    r = table(SheetRender).c
    query = select(r.body).where(
        r.run_id == key.run_id, r.revision == key.revision, r.version == key.version,
        r.client == client, r.format == fmt,
    )  # fmt: skip
    with connected(bind) as connection:
        body = connection.execute(query).scalar()
    return None if body is None else bytes(body)


def cached_clients(bind: Connection | Engine, key: RenderKey, fmt: str) -> set[str]:
    """The clients whose ``fmt`` sheet of the revision is kept (what a rendering skips)."""
    r = table(SheetRender).c
    query = select(r.client).where(
        r.run_id == key.run_id, r.revision == key.revision, r.version == key.version,
        r.format == fmt,
    )  # fmt: skip
    with connected(bind) as connection:
        return {str(c) for c in connection.execute(query).scalars()}


def remember(engine: Engine, key: RenderKey, bodies: list[tuple[str, str, bytes]]) -> None:
    """Keep ``(client, format, body)`` sheets of the revision, in one insert; a sheet kept
    already (rendered on demand meanwhile) stays as it is."""
    if not bodies:
        return
    now = utcnow()
    rows = [
        {
            "run_id": key.run_id,
            "revision": key.revision,
            "version": key.version,
            "client": client,
            "format": fmt,
            "body": body,
            "rendered_at": now,
        }
        for client, fmt, body in bodies
    ]  # fmt: skip  (the parameters of one bulk insert)
    with engine.begin() as connection:
        connection.execute(_insert_ignoring_duplicates(connection), rows)


def pending(engine: Engine, version: str) -> list[Pending]:
    """Each month's latest issued revision with no finished or live job at ``version``,
    newest month first (older revisions are rendered when read)."""
    e, j = table(MonthEvent).c, table(SheetRenderJob).c
    latest = (
        select(func.max(e.id)).where(e.action == "close", e.run_id.is_not(None)).group_by(e.month)
    )
    fresh = utcnow() - timedelta(seconds=STALE_SECONDS)
    done = select(j.run_id, j.revision).where(
        j.version == version, (j.finished_at.is_not(None)) | (j.heartbeat_at >= fresh)
    )
    query = select(e.month, e.run_id, e.revision).where(e.id.in_(latest)).order_by(e.month.desc())
    with engine.connect() as connection:
        taken = {(str(r), int(n)) for r, n in connection.execute(done)}
        rows = connection.execute(query).all()
    return [
        Pending(str(month), RenderKey(str(run_id), int(revision), version))
        for month, run_id, revision in rows
        if (str(run_id), int(revision)) not in taken
    ]  # one per month


def claim(engine: Engine, month: str, key: RenderKey, worker: str) -> bool:
    """Take the revision's rendering for ``worker``: True for exactly one caller (a stale
    claim is taken over by one caller too); False when another has it or it is done."""
    now = utcnow()
    j = table(SheetRenderJob).c
    try:
        with engine.begin() as connection:
            connection.execute(
                table(SheetRenderJob).insert().values(
                    run_id=key.run_id, revision=key.revision, version=key.version, month=month,
                    claimed_by=worker, claimed_at=now, heartbeat_at=now, sheets=0,
                )
            )  # fmt: skip
        return True
    except IntegrityError:
        pass
    stale = now - timedelta(seconds=STALE_SECONDS)
    with engine.begin() as connection:
        taken = connection.execute(
            update(table(SheetRenderJob))
            .where(*_job(key), j.finished_at.is_(None), j.heartbeat_at < stale)
            .values(claimed_by=worker, claimed_at=now, heartbeat_at=now)
        )
    return bool(taken.rowcount == 1)


def _job(key: RenderKey) -> tuple[Any, ...]:
    j = table(SheetRenderJob).c
    return (j.run_id == key.run_id, j.revision == key.revision, j.version == key.version)


def beat(engine: Engine, key: RenderKey, worker: str, sheets: int) -> None:
    """The claim is alive: ``sheets`` rendered so far."""
    j = table(SheetRenderJob).c
    with engine.begin() as connection:
        connection.execute(
            update(table(SheetRenderJob))
            .where(*_job(key), j.claimed_by == worker)
            .values(heartbeat_at=utcnow(), sheets=sheets)
        )


def finish(engine: Engine, key: RenderKey, worker: str, sheets: int, error: str | None) -> None:
    """The rendering is over (``error``: why it stopped); the revision is no longer pending."""
    j = table(SheetRenderJob).c
    now = utcnow()
    with engine.begin() as connection:
        connection.execute(
            update(table(SheetRenderJob))
            .where(*_job(key), j.claimed_by == worker)
            .values(heartbeat_at=now, finished_at=now, sheets=sheets, error=error)
        )


def release(engine: Engine, key: RenderKey, worker: str) -> None:
    """Give an unfinished claim up (its process was stopped): the next process to look takes
    it over at once instead of after :data:`STALE_SECONDS`."""
    j = table(SheetRenderJob).c
    long_ago = utcnow() - timedelta(seconds=2 * STALE_SECONDS)
    with engine.begin() as connection:
        connection.execute(
            update(table(SheetRenderJob))
            .where(*_job(key), j.claimed_by == worker, j.finished_at.is_(None))
            .values(heartbeat_at=long_ago)
        )


@dataclass(frozen=True)
class Job:
    """A rendering job as recorded (what the benchmark and the tests read)."""

    claimed_by: str
    claimed_at: datetime
    finished_at: datetime | None
    sheets: int
    error: str | None


def jobs(bind: Connection | Engine, run_id: str, revision: int) -> list[Job]:
    """Every job of the revision (one per renderer version that rendered it)."""
    j = table(SheetRenderJob).c
    query = select(j.claimed_by, j.claimed_at, j.finished_at, j.sheets, j.error).where(
        j.run_id == run_id, j.revision == revision
    )
    with connected(bind) as connection:
        return [Job(*row) for row in connection.execute(query)]


__all__ = [
    "STALE_SECONDS",
    "Job",
    "Pending",
    "RenderKey",
    "beat",
    "cached",
    "cached_clients",
    "claim",
    "finish",
    "jobs",
    "pending",
    "release",
    "remember",
]
