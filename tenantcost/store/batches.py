"""``tenantcost batch list`` and ``batch withdraw``: the ingested batches, and the repair of a
month that a later ingest made unusable.

Why withdrawal. Ingest refuses what it can know is wrong when a batch arrives, but not what
only a later batch reveals: a daily usage window is valid until hourly costs of that day are
ingested, and then ``run`` must refuse it (the day's usage cannot be divided over its hours).
No new ingest can remove a cell's rows (``replace`` replaces the same (window, key) cells only),
so the month could never be run again. Withdrawing the batch is the repair: the month reads
as if it had never been ingested.

* **Nothing is deleted.** The batch's status becomes ``withdrawn`` (every reader asks for
  ``committed`` batches, so it no longer counts anywhere: figures, coverage, ``close``), and
  ``batch_withdrawal`` records who, when and why. Its row, cells and Parquet files stay, for
  provenance: a run that read it still names it, and a later run's provenance names it as
  withdrawn.
* **What it replaced counts again.** Which rows of a cell count is computed from the active
  batches only (:mod:`tenantcost.store.stored`): withdrawing a ``replace`` batch brings back
  the earlier batches' rows of its cells, exactly as they counted before it came.
* **Compactions.** A day's usage compaction (:mod:`tenantcost.store.compaction`) that folds
  the batch is made ``invalid``: the day reads its batches' own files again, without this
  one, until a later usage ingest folds it anew.
* **Open months only.** A batch whose windows reach into a closed month is refused (one line,
  naming ``reopen``), whichever of its months is closed: a batch spanning October and November
  is withdrawn from both or from neither, never half.
* **Named by ``run``.** When ``run`` (or ``close``) refuses a stored record, the error names the
  batch that holds it and the command that withdraws it (:func:`name_batches`): stored usage
  rows are named by their Parquet file (``<uid>.parquet``), stored cost rows carry
  ``(costs batch <uid>)`` in their origin and stored billing rows ``(billing batch <uid>)``
  in their file name.

A batch is named by its uid or any unique prefix of at least :data:`MIN_PREFIX` hex digits
(``ingest`` prints the first 12).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, Select, func, insert, select, update

from tenantcost.errors import InputError
from tenantcost.store.compaction import invalidate
from tenantcost.store.connection import connected
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import Batch, BatchCell, BatchWithdrawal, table, utcnow
from tenantcost.store.month_state import MonthClosed, closed_months, issued_revision
from tenantcost.timefmt import iso_z, iso_z_seconds
from tenantcost.windows import Period

SHORT = 12
"""Hex digits of a batch uid shown in lines and tables (what ``ingest`` prints)."""
MIN_PREFIX = 8
"""The fewest hex digits that name a batch."""
FIELDS = ("uid", "kind", "mode", "rows", "cells", "window_from", "window_to", "ingested_at",
          "actor", "source", "status", "withdrawn_at", "withdrawn_by", "reason")  # fmt: skip
"""``batch list --format json``'s fields, in order (``GET /api/v1/batches`` too)."""
_STORED_FILE = re.compile(r"\b([0-9a-f]{32})\.parquet\b")
_COST_TAG = re.compile(r"\((?:costs|billing) batch ([0-9a-f]{12})\)")
_UNSTORABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""What a reason may not hold once its whitespace is collapsed: control characters and lone
surrogates."""


class BatchStatus(StrEnum):
    """Whether a batch counts: ``active`` (committed) or ``withdrawn``; a billing batch every
    cell of which a later active billing batch holds is ``superseded`` (a restated export
    replaced it: none of its rows count, and withdrawing the later batch brings it back)."""

    ACTIVE = "active"
    SUPERSEDED = "superseded"
    WITHDRAWN = "withdrawn"


class UnknownBatch(InputError):
    """No batch (or more than one) answers to the id given (exit 2; the API's 404)."""


class AlreadyWithdrawn(InputError):
    """``batch withdraw`` of a batch withdrawn before (exit 2; the API's 409)."""


@dataclass(frozen=True)
class BatchInfo:
    """One batch as ``batch list`` shows it (``cells``: its (window, key) cells)."""

    uid: str
    kind: str
    mode: str
    rows: int
    cells: int
    window_from: datetime
    window_to: datetime
    ingested_at: datetime
    actor: str
    source: str
    status: BatchStatus
    withdrawn_at: datetime | None
    withdrawn_by: str | None
    reason: str | None

    @property
    def short(self) -> str:
        return self.uid[:SHORT]

    @property
    def months(self) -> list[str]:
        """The months its windows reach into, in order."""
        last = pd.Timestamp(self.window_to) - pd.Timedelta(microseconds=1)
        span = pd.period_range(pd.Timestamp(self.window_from).tz_localize(None),
                               last.tz_localize(None), freq="M")  # fmt: skip
        return [str(p) for p in span]

    def document(self) -> dict[str, Any]:
        """The JSON contract's object (times RFC 3339 UTC with ``Z``)."""

        def at(value: datetime | None) -> str | None:
            return iso_z(value) if value is not None else None

        return {
            "uid": self.uid, "kind": self.kind, "mode": self.mode, "rows": self.rows,
            "cells": self.cells, "window_from": iso_z(self.window_from),
            "window_to": iso_z(self.window_to), "ingested_at": iso_z(self.ingested_at),
            "actor": self.actor, "source": self.source, "status": str(self.status),
            "withdrawn_at": at(self.withdrawn_at), "withdrawn_by": self.withdrawn_by,
            "reason": self.reason,
        }  # fmt: skip


def _query() -> Select[Any]:
    """Every committed or withdrawn batch with its cell count and withdrawal, by id."""
    b, c, w = table(Batch).c, table(BatchCell).c, table(BatchWithdrawal).c
    cells = select(c.batch_id, func.count().label("cells")).group_by(c.batch_id).subquery()
    return (
        select(
            b.uid,
            b.kind,
            b.mode,
            b.rows,
            func.coalesce(cells.c.cells, 0).label("cells"),
            b.window_from,
            b.window_to,
            b.created_at,
            b.actor,
            b.source,
            b.status,
            w.at,
            w.actor.label("withdrawn_by"),
            w.reason,
            b.id,
        )
        .outerjoin(cells, cells.c.batch_id == b.id)
        .outerjoin(table(BatchWithdrawal), w.batch_id == b.id)
        .where(b.status.in_(("committed", "withdrawn")))
        .order_by(b.id)
    )


def _superseded(connection: Connection) -> set[int]:
    """The ids of committed billing batches every cell of which a later committed billing
    batch holds (cells of costs and usage batches are replaced one by one, and a batch of
    them stays ``active``)."""
    b, c = table(Batch).c, table(BatchCell).c
    later, cell = table(Batch).alias("later"), table(BatchCell).alias("later_cell")
    replaced = (
        select(cell.c.id)
        .join(later, later.c.id == cell.c.batch_id)
        .where(cell.c.window_start == c.window_start, cell.c.key == c.key,
               later.c.id > b.id, later.c.kind == "billing", later.c.status == "committed")
        .correlate(table(Batch), table(BatchCell))  # two levels up: say so
    )  # fmt: skip
    kept = select(c.id).where(c.batch_id == b.id, ~replaced.exists())
    query = select(b.id).where(b.kind == "billing", b.status == "committed", ~kept.exists())
    return {int(i) for i in connection.execute(query).scalars()}


def _info(row: Any, superseded: set[int] | None = None) -> BatchInfo:
    status = BatchStatus.WITHDRAWN if row.status == "withdrawn" else BatchStatus.ACTIVE
    if superseded and int(row.id) in superseded:
        status = BatchStatus.SUPERSEDED
    return BatchInfo(str(row.uid), str(row.kind), str(row.mode), int(row.rows), int(row.cells),
                     row.window_from, row.window_to, row.created_at, str(row.actor),
                     str(row.source), status, row.at, row.withdrawn_by, row.reason)  # fmt: skip


def _overlapping(query: Select[Any], month: str | None) -> Select[Any]:
    if month is None:
        return query
    period, b = Period.month(month), table(Batch).c
    return query.where(b.window_from < period.end.to_pydatetime(),
                       b.window_to > period.start.to_pydatetime())  # fmt: skip


def list_batches(bind: Connection | Engine, month: str | None = None) -> list[BatchInfo]:
    """The batches (active and withdrawn), by commit order; with ``month``, those whose
    windows reach into it."""
    with connected(bind) as connection:
        rows = connection.execute(_overlapping(_query(), month)).all()
        superseded = _superseded(connection)
    return [_info(r, superseded) for r in rows]


def withdrawals(bind: Connection | Engine, month: str | None = None) -> list[BatchInfo]:
    """The withdrawn batches (of ``month``), by time of withdrawal (``history`` shows them)."""
    w = table(BatchWithdrawal).c
    query = _overlapping(_query(), month).where(table(Batch).c.status == "withdrawn")
    with connected(bind) as connection:
        rows = connection.execute(query.order_by(None).order_by(w.at, w.id)).all()
    return [_info(r) for r in rows]


def find_batch(connection: Connection, given: str) -> tuple[int, BatchInfo]:
    """The batch ``given`` names (its uid or a unique prefix): its row id and what it is."""
    prefix = given.strip().lower()
    if not re.fullmatch(f"[0-9a-f]{{{MIN_PREFIX},32}}", prefix):
        raise UnknownBatch(f"batch '{given}': expected a batch uid (hex digits, at least "
                           f"{MIN_PREFIX}, as `tenantcost batch list` shows it)")  # fmt: skip
    rows = connection.execute(_query().where(table(Batch).c.uid.startswith(prefix))).all()
    if len(rows) != 1:
        found = "no batch" if not rows else f"{len(rows)} batches (give more digits)"
        raise UnknownBatch(f"batch '{given}': {found} in the store; `tenantcost batch list` "
                           "shows the batches")  # fmt: skip
    return int(rows[0].id), _info(rows[0], _superseded(connection))


@dataclass(frozen=True)
class Withdrawn:
    """A withdrawal: the batch as it now is, and how many of its cells count earlier batches'
    rows again (a ``replace`` batch's cells that earlier active batches hold)."""

    batch: BatchInfo
    restored: int


def withdraw_batch(
    engine: Engine, given: str, *, reason: str, actor: str, wait: float = 0.0
) -> Withdrawn:
    """Withdraw the batch ``given`` names from its months (see the module docstring): refused
    for an empty reason, an unknown or already withdrawn batch, and a closed month."""
    reason = " ".join(reason.split())
    if not reason:
        raise InputError("--reason is empty: say why the batch is withdrawn (it is recorded "
                         "and shown by `tenantcost history`)")  # fmt: skip
    bad = _UNSTORABLE.search(reason)
    if bad is not None:  # PostgreSQL cannot store NUL; a lone surrogate is not UTF-8
        raise InputError(f"--reason holds U+{ord(bad.group(0)):04X} at character "
                         f"{bad.start() + 1}, which the store cannot keep")  # fmt: skip
    with write_transaction(engine, wait) as connection:
        batch_id, batch = find_batch(connection, given)
        if batch.status is BatchStatus.WITHDRAWN:
            assert batch.withdrawn_at is not None
            raise AlreadyWithdrawn(
                f"batch {batch.short} was already withdrawn {iso_z_seconds(batch.withdrawn_at)} "
                f"by {batch.withdrawn_by}: {batch.reason}"
            )
        _refuse_closed(connection, batch)
        restored = _restored(connection, batch_id) if batch.mode == "replace" else 0
        now = utcnow()
        connection.execute(update(table(Batch)).where(table(Batch).c.id == batch_id)
                           .values(status="withdrawn"))  # fmt: skip
        connection.execute(insert(table(BatchWithdrawal)), [
            {"batch_id": batch_id, "reason": reason, "actor": actor, "at": now}])  # fmt: skip
        if batch.kind == "usage":  # its days' compactions fold it: read the files again
            invalidate(connection, batch_id)
    withdrawn = {"status": BatchStatus.WITHDRAWN, "withdrawn_at": now, "withdrawn_by": actor,
                 "reason": reason}  # fmt: skip
    return Withdrawn(BatchInfo(**{**batch.__dict__, **withdrawn}), restored)


def _restored(connection: Connection, batch_id: int) -> int:
    """How many cells of ``replace`` batch ``batch_id`` count earlier batches' rows again
    once it is withdrawn: cells an earlier active batch of its kind holds, and no later active
    ``replace`` batch (which replaces them anyway)."""
    c, mine = table(BatchCell).c, table(Batch).alias("mine")

    def held(when: Any, *, replace_only: bool = False) -> Any:
        other, batch = table(BatchCell).alias(), table(Batch).alias()
        query = (
            select(other.c.id)
            .join(batch, batch.c.id == other.c.batch_id)
            .where(other.c.window_start == c.window_start, other.c.window_end == c.window_end,
                   other.c.key == c.key, batch.c.status == "committed",
                   batch.c.kind == mine.c.kind, when(batch.c.id))
        )  # fmt: skip
        if replace_only:
            query = query.where(batch.c.mode == "replace")
        return query.exists()

    query = (
        select(func.count(c.id))
        .join(mine, mine.c.id == c.batch_id)
        .where(c.batch_id == batch_id, held(lambda i: i < batch_id),
               ~held(lambda i: i > batch_id, replace_only=True))
    )  # fmt: skip
    return int(connection.execute(query).scalar() or 0)


def _refuse_closed(connection: Connection, batch: BatchInfo) -> None:
    """A batch reaching into a closed month changes it: refused, naming ``reopen``."""
    closed = closed_months(connection, batch.window_from, batch.window_to)
    if closed:
        month = closed[0]
        raise MonthClosed(
            f"batch {batch.short} holds windows of {', '.join(closed)}, closed (revision "
            f"{issued_revision(connection, month)} issued): withdrawing it would change "
            f"{'that month' if len(closed) == 1 else 'those months'}; run `tenantcost reopen "
            f"--month {month} --reason TEXT` first, then withdraw it and close again"
        )


def withdrawn_before(
    connection: Connection, period: Period, at: datetime
) -> list[tuple[str, str, str, str, datetime, str]]:
    """The batches of ``period`` withdrawn before ``at`` (a run's provenance names them, as
    not read): ``(kind, uid, sha256, source, withdrawn at, by)``, by withdrawal."""
    b, w = table(Batch).c, table(BatchWithdrawal).c
    rows = connection.execute(
        select(b.kind, b.uid, b.sha256, b.source, w.at, w.actor)
        .join_from(table(BatchWithdrawal), table(Batch), b.id == w.batch_id)
        .where(w.at < at, b.window_from < period.end.to_pydatetime(),
               b.window_to > period.start.to_pydatetime())
        .order_by(w.at, w.id)
    ).all()  # fmt: skip
    return [(str(k), str(u), str(s), str(o), a, str(by)) for k, u, s, o, a, by in rows]


def name_batches(engine: Engine, exc: InputError) -> InputError:
    """``exc`` (a record ``run`` refuses) with the active batches holding the records it names
    and the command that withdraws them; ``exc`` itself when it names none."""
    text = exc.one_line()
    prefixes = list(dict.fromkeys(
        _STORED_FILE.findall(text) + _COST_TAG.findall(text)))  # fmt: skip
    named: list[BatchInfo] = []
    with engine.connect() as connection:
        for prefix in prefixes:  # the one or two batches an error names
            try:
                _, batch = find_batch(connection, prefix)
            except UnknownBatch:
                continue
            if batch.status is BatchStatus.ACTIVE:
                named.append(batch)
    if not named:
        return exc
    return InputError(f"{text}; {_repair_hint(named)}")


def _repair_hint(named: list[BatchInfo]) -> str:
    def which(batch: BatchInfo) -> str:
        return (f"{batch.kind} batch {batch.short} (ingested "
                f"{iso_z_seconds(batch.ingested_at)} by {batch.actor})")  # fmt: skip

    first = named[0].short
    command = f"`tenantcost batch withdraw {first} --reason TEXT`"
    if len(named) == 1:
        return (f"the record is in {which(named[0])}: withdraw it with {command}, then ingest "
                "the corrected data and run again")  # fmt: skip
    others = " or ".join(b.short for b in named[1:])
    return (f"the records are in {' and '.join(which(b) for b in named)}: withdraw the wrong "
            f"one with {command} (or {others}), then ingest the corrected data and run "
            "again")  # fmt: skip


def batches_document(batches: list[BatchInfo]) -> list[dict[str, Any]]:
    """``batch list --format json``: a list of the contract's objects."""
    return [batch.document() for batch in batches]


def _span(batch: BatchInfo) -> str:
    return f"{iso_z_seconds(batch.window_from)} to {iso_z_seconds(batch.window_to)}"


def batch_table(batches: list[BatchInfo]) -> str:
    """``batch list`` as a text table (uids to 12 digits, as ``ingest`` prints them)."""
    from tenantcost.writers.text import render_table

    if not batches:
        return "(no batches)"
    header = ["batch", "kind", "mode", "rows", "cells", "windows", "ingested at", "by",
              "status"]  # fmt: skip
    rows = [
        [b.short, b.kind, b.mode, f"{b.rows:,}", f"{b.cells:,}", _span(b),
         iso_z_seconds(b.ingested_at), b.actor,
         str(b.status) if b.withdrawn_at is None
         else f"withdrawn {iso_z_seconds(b.withdrawn_at)} by {b.withdrawn_by}: {b.reason}"]
        for b in batches
    ]  # fmt: skip
    return render_table(header, rows, {3, 4})


def withdrawals_table(batches: list[BatchInfo]) -> str:
    """The withdrawals as ``history`` shows them below the revisions."""
    from tenantcost.writers.text import render_table

    header = ["month", "batch", "kind", "rows", "windows", "withdrawn at", "by", "reason"]
    rows = [
        [", ".join(b.months), b.short, b.kind, f"{b.rows:,}", _span(b),
         iso_z_seconds(b.withdrawn_at) if b.withdrawn_at else "-", b.withdrawn_by or "-",
         b.reason or "-"]
        for b in batches
    ]  # fmt: skip
    return "batch withdrawals:\n" + render_table(header, rows, {3})


__all__ = [
    "FIELDS",
    "AlreadyWithdrawn",
    "BatchInfo",
    "BatchStatus",
    "UnknownBatch",
    "Withdrawn",
    "batch_table",
    "batches_document",
    "find_batch",
    "list_batches",
    "name_batches",
    "withdraw_batch",
    "withdrawals",
    "withdrawals_table",
    "withdrawn_before",
]
