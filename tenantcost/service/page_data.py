"""What the HTML pages show, read from the store with set queries (no loop per client).

The pages never decide access here: they pass the principal's *scope* (from
:mod:`tenantcost.service.permissions`: the clients it may list, whether it sees drafts) and
these queries filter in SQL. A client's figure for a month is the latest issued statement
(``issued`` at revision 1, ``restated`` after), or, for a principal who sees drafts, the
latest run of a month that is not closed (``draft``).

Client search stays fast at 10,000 clients: the page of ids is chosen in SQL by the API's own
:func:`tenantcost.service.figures.search_clients` (``LIKE``, ``ORDER BY``, ``LIMIT``/``OFFSET``),
and only that page's figures are read here, in one query per table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pandas as pd
from sqlalchemy import Engine, Select, case, func, literal, select

from tenantcost.service.memo import remembered
from tenantcost.store.connection import result_frame
from tenantcost.store.models import (
    Batch,
    MonthEvent,
    Run,
    RunClient,
    RunClientFigure,
    RunFigure,
    RunInput,
    RunReport,
    Statement,
    table,
)
from tenantcost.store.shown import run_shown


class FigureStatus(StrEnum):
    """A client's month as a page shows it."""

    DRAFT = "draft"
    ISSUED = "issued"
    RESTATED = "restated"


@dataclass(frozen=True)
class Scope:
    """What a principal may read, as the queries need it (decided by permissions.py)."""

    clients: frozenset[str] | None
    """None: every client; else only these."""
    drafts: bool


def latest_runs() -> Select[Any]:
    """``month, run_id`` of each month's latest run (by start time)."""
    r = table(Run).c
    ranked = select(
        r.month,
        r.id.label("run_id"),
        func.row_number()
        .over(partition_by=r.month, order_by=(r.started_at.desc(), r.id.desc()))
        .label("n"),
    ).subquery()
    return select(ranked.c.month, ranked.c.run_id).where(ranked.c.n == 1)


def closed_months_query() -> Select[Any]:
    """Months whose latest close/reopen event is a close."""
    e = table(MonthEvent).c
    latest = select(func.max(e.id).label("id")).group_by(e.month).subquery()
    return select(e.month).where(e.id.in_(select(latest.c.id)), e.action == "close")


def _draft_runs() -> Select[Any]:
    """``month, run_id`` of the latest run of every month that is not closed, unless that run
    is the one issued last (a reopened month without a new run shows its issued revision):
    the rule of :func:`tenantcost.service.figures.month_source`, as one set query."""
    e = table(MonthEvent).c
    last_close = select(func.max(e.id)).where(e.action == "close").group_by(e.month)
    issued_last = select(e.run_id).where(e.id.in_(last_close), e.run_id.is_not(None))
    runs = latest_runs().subquery()
    return select(runs.c.month, runs.c.run_id).where(
        runs.c.month.not_in(closed_months_query()), runs.c.run_id.not_in(issued_last)
    )


@dataclass(frozen=True)
class FigureRow:
    """One client's figure of one month, as the pages show it: a statement's fields (a
    draft's in :data:`DRAFT_FIELDS`), then ``smallest`` and ``shown``. Plain values, not a
    frame: a page reads a handful of rows, and pandas costs milliseconds per step on so
    few."""

    client: str
    month: str
    amount: int
    currency: str
    status: str
    revision: int | None
    run_id: str
    reason: str | None
    incomplete: bool
    issued_at: Any
    issued_by: str | None
    rule_ids: str | None
    difference: int | None
    previous_amount: int | None
    client_reason: str | None
    smallest: int | None = None
    """The run's smallest non-zero client amount: what fixes the decimals its sheets show."""
    shown: int | None = None
    """The figure in display units as every page and sheet of the run shows it; ``None``: a
    client not in its run's displayed figures (shown from ``amount``)."""
    places: int | None = None
    """The decimals of ``shown``: the run's display rule's, frozen by its close."""
    fx: Any = None
    """Shown converted: how (:class:`tenantcost.service.currency_view.FigureFx`)."""
    ledger: Any = None
    """Shown converted: the row as issued, in the ledger currency."""


def figures(engine: Engine, scope: Scope, clients: list[str]) -> list[FigureRow]:
    """Every month's figure of ``clients`` the scope may see, one row per client and month,
    ordered by client and month; ``smallest`` fixes the decimals and ``shown`` is the figure
    in display units as every page and sheet of the run shows it
    (:mod:`tenantcost.store.shown`)."""
    if scope.clients is not None:
        clients = [c for c in clients if c in scope.clients]
    if not clients:
        return []
    with engine.connect() as connection:
        rows = _issued(connection, clients)
        if scope.drafts:
            drafts = _drafts(connection, clients)
            if drafts:
                months = {d["month"] for d in drafts}
                rows = [r for r in rows if r["month"] not in months] + drafts
                rows.sort(key=lambda r: (r["client"], r["month"]))
        run_ids = tuple(sorted({str(r["run_id"]) for r in rows}))
        smallest = remembered(engine, "smallest_amounts", run_ids,
                              lambda: smallest_amounts(connection, list(run_ids)))  # fmt: skip
    shown = {run_id: run_shown(engine, run_id) for run_id in run_ids}  # a handful of runs
    return [
        FigureRow(
            **r,  # the query's columns are the row's fields
            smallest=smallest.get(str(r["run_id"])),
            shown=shown[str(r["run_id"])].amount(str(r["client"])),
            places=shown[str(r["run_id"])].places,
        )
        for r in rows
    ]


def smallest_amounts(connection: Any, run_ids: list[str]) -> dict[str, int]:
    """Each run's smallest non-zero client amount: what fixes the decimals its sheets show
    (:func:`tenantcost.report.display.auto_places` over every client), so a page shows a
    client's figure exactly as its sheet does without reading the other clients' amounts."""
    if not run_ids:
        return {}
    rc = table(RunClient).c
    rows = connection.execute(
        select(rc.run_id, func.min(func.abs(rc.amount)))
        .where(rc.run_id.in_(run_ids), rc.amount != 0)
        .group_by(rc.run_id)
    ).all()
    return {str(run_id): int(amount) for run_id, amount in rows}


def _issued(connection: Any, clients: list[str]) -> list[dict[str, Any]]:
    """Each client's latest issued revision of each month, with its status, in order: chosen,
    labelled and ordered in SQL."""
    s = table(Statement).c
    later = table(Statement).alias("later")
    newest = ~(
        select(later.c.id)
        .where(later.c.client == s.client, later.c.month == s.month,
               later.c.revision > s.revision)
        .exists()
    )  # fmt: skip
    status = case((s.revision > 1, FigureStatus.RESTATED.value),
                  else_=FigureStatus.ISSUED.value).label("status")  # fmt: skip
    query = select(
        s.client,
        s.month,
        s.amount,
        s.currency,
        s.revision,
        s.run_id,
        s.reason,
        s.incomplete,
        s.issued_at,
        s.issued_by,
        s.rule_ids,
        s.difference,
        s.previous_amount,
        s.client_reason,
        status,
    ).where(s.client.in_(clients), newest)
    return [dict(r) for r in connection.execute(query.order_by(s.client, s.month)).mappings()]


DRAFT_FIELDS: dict[str, Any] = {
    "status": FigureStatus.DRAFT.value,
    "revision": None,
    "reason": None,
    "incomplete": False,
    "issued_at": None,
    "issued_by": None,
    "difference": None,
    "previous_amount": None,
    "client_reason": None,
}
"""What a draft (a run not issued) has in place of a statement's fields."""


def _drafts(connection: Any, clients: list[str]) -> list[dict[str, Any]]:
    rc, r = table(RunClient).c, table(Run).c
    runs = [str(run_id) for _, run_id in connection.execute(_draft_runs()).all()]  # a few
    if not runs:
        return []
    query = (
        select(rc.client, r.month, rc.amount, r.currency, rc.run_id, r.rule_ids)
        .join(table(Run), r.id == rc.run_id)
        .where(rc.run_id.in_(runs), rc.client.in_(clients))
    )  # by run_client's primary key (run_id, client), not a scan of every run's clients
    return [dict(row) | DRAFT_FIELDS for row in connection.execute(query).mappings()]


def rule_ids(value: str | None) -> list[str]:
    """A stored JSON list of rule ids as a list."""
    return [str(v) for v in json.loads(value)] if value else []


def month_events(engine: Engine, month: str) -> pd.DataFrame:
    """Every close and reopen of ``month``, in order."""
    e = table(MonthEvent).c
    query = select(e.at, e.action, e.revision, e.reason, e.client_reason, e.actor, e.run_id).where(
        e.month == month
    )
    with engine.connect() as connection:
        return result_frame(connection.execute(query.order_by(e.id)))


def issued_as(engine: Engine, run_id: str) -> int | None:
    """The latest revision a close issued ``run_id`` as, or ``None``: a draft. A reopened
    month still shows the run it issued until a new run: that run is issued, not a draft."""
    e = table(MonthEvent).c
    with engine.connect() as connection:
        value = connection.execute(
            select(func.max(e.revision)).where(e.run_id == run_id, e.action == "close")
        ).scalar()
    return int(value) if value is not None else None


def latest_run_id(engine: Engine, month: str) -> str | None:
    runs = latest_runs().subquery()
    with engine.connect() as connection:
        value = connection.execute(select(runs.c.run_id).where(runs.c.month == month)).scalar()
    return str(value) if value is not None else None


@dataclass(frozen=True)
class RunFacts:
    """A run as the finance month page shows it: the row, its cascade, idle, batches."""

    run: dict[str, Any]
    cascade: pd.DataFrame
    """``name, kind, detail, amount`` in the cascade's order."""
    idle_before: int | None
    cost_total: int | None
    batches: pd.DataFrame
    smallest: int | None
    """The smallest non-zero client amount (the decimals the run's sheets show)."""
    external_total: int | None = None
    """The run's external costs (the reference total's second part); None before 0007."""


def run_facts(engine: Engine, run_id: str) -> RunFacts:
    """The run's record, cascade, idle before distribution, cost total and input batches
    (kept per store generation, :mod:`tenantcost.service.memo`: do not mutate)."""
    return remembered(engine, "run_facts", (run_id,), lambda: _run_facts(engine, run_id))


def _run_facts(engine: Engine, run_id: str) -> RunFacts:
    r, f, b, i = table(Run).c, table(RunFigure).c, table(Batch).c, table(RunInput).c
    with engine.connect() as connection:
        run = dict(connection.execute(select(table(Run)).where(r.id == run_id)).mappings().one())
        figures = result_frame(
            connection.execute(
                select(
                    f.section, f.position, f.name, f.kind, f.detail, f.amount, f.before_distribution
                ).where(f.run_id == run_id)
            )
        )
        report = connection.execute(
            select(table(RunReport).c.cost_total, table(RunReport).c.external_total).where(
                table(RunReport).c.run_id == run_id
            )
        ).first()
        cost_total = report.cost_total if report is not None else None
        smallest = smallest_amounts(connection, [run_id]).get(run_id)
        batches = result_frame(
            connection.execute(
                select(b.id, b.kind, b.source, b.mode, b.rows, b.sha256, b.created_at, b.actor)
                .join(table(RunInput), i.batch_id == b.id)
                .where(i.run_id == run_id)
                .order_by(b.id)
            )
        )
    cascade = figures[figures["section"] == "cascade"].sort_values("position")
    idle = figures[(figures["section"] == "residual") & (figures["name"] == "idle")]
    idle_before = int(idle["before_distribution"].iloc[0]) if len(idle) else None
    return RunFacts(
        run,
        cascade[["name", "kind", "detail", "amount"]].reset_index(drop=True),
        idle_before,
        int(cost_total) if cost_total is not None else None,
        batches,
        smallest,
        int(report.external_total) if report is not None else None,
    )


def stored_invoice(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The invoice cascade recorded with a run (the ``invoice`` object of ``allocate
    --format json``), or ``None``: a run without billing data, or a store that does not
    record it. The one place the pages read it: the run row's ``invoice`` field, a JSON text
    or an already decoded object."""
    value = run.get("invoice")
    if value is None or (isinstance(value, float) and value != value):  # absent or NaN
        return None
    if isinstance(value, str | bytes):
        value = json.loads(value) if value.strip() else None
    return dict(value) if isinstance(value, Mapping) else None


KEY_FIGURE_PREFIX = "key:"


def run_clients_page(
    engine: Engine, run_id: str, page: int, per_page: int
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """One page of a run's clients under each key, the totals under each key, and the client
    count. The first frame has ``client`` and one column per key (``rule`` first, the rule as
    written, then the alternative keys; without stored key figures: ``rule`` from the run's
    client totals); the second, one row of totals with the same columns. Kept per store
    generation (:mod:`tenantcost.service.memo`: do not mutate)."""
    return remembered(engine, "run_clients_page", (run_id, page, per_page),
                      lambda: _run_clients_page(engine, run_id, page, per_page))  # fmt: skip


def _run_clients_page(
    engine: Engine, run_id: str, page: int, per_page: int
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    rc, k = table(RunClient).c, table(RunClientFigure).c
    ids = select(rc.client).where(rc.run_id == run_id)
    page_ids = ids.order_by(rc.client).limit(per_page).offset((page - 1) * per_page)
    keyed = k.figure.like(f"{KEY_FIGURE_PREFIX}%")
    with engine.connect() as connection:
        count = int(
            connection.execute(select(func.count()).select_from(ids.subquery())).scalar() or 0
        )
        rows = result_frame(
            connection.execute(
                select(k.client, k.figure, k.amount).where(
                    k.run_id == run_id, keyed, k.client.in_(page_ids.scalar_subquery())
                )
            )
        )
        totals = result_frame(
            connection.execute(
                select(k.figure, func.sum(k.amount).label("amount"))
                .where(k.run_id == run_id, keyed)
                .group_by(k.figure)
            )
        )
        if rows.empty:
            rows = result_frame(
                connection.execute(
                    select(rc.client, literal_rule(), rc.amount).where(
                        rc.run_id == run_id, rc.client.in_(page_ids.scalar_subquery())
                    )
                )
            )
            totals = result_frame(
                connection.execute(
                    select(literal_rule(), func.sum(rc.amount).label("amount")).where(
                        rc.run_id == run_id
                    )
                )
            )
    return _pivot(rows), _pivot(totals.assign(client="")), count


def literal_rule() -> Any:
    """The figure name of the rule's own amounts, as a column."""
    return literal(f"{KEY_FIGURE_PREFIX}rule").label("figure")


def _pivot(frame: pd.DataFrame) -> pd.DataFrame:
    """``client, figure, amount`` rows as one column per key (``rule`` first)."""
    if frame.empty:
        return pd.DataFrame(columns=["client", "rule"])
    frame = frame.assign(key=frame["figure"].str.removeprefix(KEY_FIGURE_PREFIX))
    wide = frame.pivot_table(index="client", columns="key", values="amount", aggfunc="sum")
    keys = ["rule", *sorted(c for c in wide.columns if c != "rule")]
    wide = wide.reindex(columns=[c for c in keys if c in wide.columns]).fillna(0).astype("int64")
    return wide.reset_index().sort_values("client", ignore_index=True)
