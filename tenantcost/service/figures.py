"""What the service shows, as plain data: the JSON API and the HTML pages both read here.

Every function takes the principal and returns only what it may see, so a page and its API
twin cannot disagree about access: account managers get issued revisions only (never a draft
run) and their own clients only (filtered in SQL); finance and admin also get the latest
run of an open month, marked ``draft``. Amounts are integers in micro-units, like
``allocate --format json``.

Which figure a client's month shows (:func:`month_source`):

* the month's latest run when the viewer sees drafts, the month is open (never closed, or
  reopened) and that run is not the one issued last: status ``draft``;
* else the latest issued revision: ``issued`` at revision 1, ``restated`` after a reopen.

Free text reaches a client-scoped principal through the one redaction of
:mod:`tenantcost.report.privacy` (:func:`reader_text`): rule ids, line sources and keys, the
actor, and of a restatement's reason only what clients read
(:func:`~tenantcost.service.permissions.sees_internal_reasons`; :func:`shown_fields`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import pandas as pd
from sqlalchemy import Engine, Select, exists, func, select, union
from sqlalchemy.engine import Connection

from tenantcost.report.privacy import client_note
from tenantcost.service.permissions import (
    Principal,
    client_scope,
    month_fields,
    sees_drafts,
    sees_internal_reasons,
    sees_usage_clients,
)
from tenantcost.store.data import Store
from tenantcost.store.models import (
    MonthEvent,
    Run,
    RunClient,
    RunFigure,
    RunLine,
    Statement,
    table,
)
from tenantcost.timefmt import iso_z

MAX_PER_PAGE = 500
DEFAULT_PER_PAGE = 50


class FigureStatus(StrEnum):
    """A client's month as shown: a draft run, or an issued (restated) revision."""

    DRAFT = "draft"
    ISSUED = "issued"
    RESTATED = "restated"


@dataclass(frozen=True)
class MonthSource:
    """The run whose figures a viewer sees for a month, and what it is."""

    month: str
    run_id: str
    status: FigureStatus
    revision: int | None
    """The issued revision shown (None for a draft)."""
    state: str
    """The month's state: ``open`` or ``closed``."""
    issued_at: datetime | None = None
    issued_by: str | None = None
    reason: str | None = None
    client_reason: str | None = None


def iso(value: datetime | None) -> str | None:
    return None if value is None else iso_z(value)


def latest_run(bind: Connection | Engine, month: str) -> Any:
    """The month's latest run row (or None)."""
    from tenantcost.store.cycle import connected

    r = table(Run).c
    query = select(table(Run)).where(r.month == month).order_by(r.started_at.desc()).limit(1)
    with connected(bind) as conn:
        return conn.execute(query).first()


def month_source(bind: Connection | Engine, principal: Principal, month: str) -> MonthSource | None:
    """The figures ``principal`` sees for ``month`` (None: nothing it may see)."""
    from tenantcost.store.cycle import connected, latest_issued, month_state

    with connected(bind) as conn:
        issued = latest_issued(conn, month)
        if sees_drafts(principal):
            state = str(issued.state) if issued is not None else str(month_state(conn, month))
            run = latest_run(conn, month)
            if run is not None and state == "open" and (issued is None or run.id != issued.run_id):
                return MonthSource(month, str(run.id), FigureStatus.DRAFT, None, state)
    if issued is None:
        return None
    status = FigureStatus.ISSUED if issued.revision == 1 else FigureStatus.RESTATED
    return MonthSource(
        month,
        issued.run_id,
        status,
        issued.revision,
        str(issued.state),
        issued.issued_at,
        issued.issued_by,
        issued.reason,
        issued.client_reason,
    )


def months_document(engine: Engine, principal: Principal) -> list[dict[str, Any]]:
    """``GET /api/v1/months``: ``tenantcost status`` per month. A client-scoped principal
    gets only the months in which its clients have statements, and only
    :func:`~tenantcost.service.permissions.month_fields` of each."""
    from tenantcost.service.memo import month_status
    from tenantcost.store.cycle import issued_revision, month_state

    scope, fields = client_scope(principal), month_fields(principal)
    if scope is None:
        months = month_status(engine)
        return months if sees_drafts(principal) else [m for m in months if m["revisions"] > 0]
    s = table(Statement).c
    query = select(s.month).where(s.client.in_(sorted(scope))).distinct().order_by(s.month)
    with engine.connect() as conn:
        rows = [
            {
                "month": str(m),
                "state": str(month_state(conn, m)),
                "revisions": issued_revision(conn, m),
            }
            for m in conn.execute(query).scalars().all()
        ]  # fmt: skip  (the months of its clients: a handful)
    return [{f: row[f] for f in fields or row} for row in rows]


def reader_text(engine: Engine, principal: Principal, client: str) -> Callable[[str], str]:
    """How free text about ``client`` (rule ids, source names, actors, reasons) reaches
    ``principal``: as written when it sees every client; else through the store's redaction
    for ``client`` (:func:`tenantcost.service.redaction.store_redaction`), the rule every
    client-facing surface uses."""
    if client_scope(principal) is None:
        return _as_written
    from tenantcost.service.redaction import store_redaction

    return store_redaction(engine).reader(client)


def _as_written(text: str) -> str:
    return text


def shown_fields(
    redact: Callable[[str], str],
    principal: Principal,
    reason: str | None,
    client_reason: Any,
    issued_by: str | None,
    rule_ids: list[str],
) -> dict[str, Any]:
    """A statement's free text as ``principal`` may read it (``redact``: :func:`reader_text`).
    ``reason``: finance and admin get the reopen's reason and ``client_reason`` (what clients
    read); anyone else only what clients read (:func:`client_note`: the reason for clients,
    redacted, or "restated by finance"), never the internal one. ``None`` where nothing was
    restated (no reopen: ``reason`` is ``None``)."""
    told = client_reason if isinstance(client_reason, str) else None
    fields: dict[str, Any] = {
        "reason": reason if reason is None else client_note(told, redact),
        "rule_ids": [redact(r) for r in rule_ids],
        "issued_by": issued_by if issued_by is None else redact(issued_by),
    }
    if sees_internal_reasons(principal):
        fields |= {"reason": reason, "client_reason": told}
    return fields


def client_history(engine: Engine, principal: Principal, client: str) -> list[dict[str, Any]]:
    """``GET /api/v1/clients/{id}/history``: ``history --format json`` of the client, its
    free text as the principal may read it (:func:`shown_fields`)."""
    from tenantcost.store.history import history

    redact = reader_text(engine, principal, client)
    return [
        e.document()
        | shown_fields(redact, principal, e.reason, e.client_reason, e.issued_by, e.rule_ids)
        for e in history(engine, client=client)
    ]  # one client's revisions: a handful


def _client_names(principal: Principal) -> Select[Any]:
    """The clients a principal may list: issued statements' (everyone), and the clients of
    runs no close issued (drafts; an issued run's clients all have statements, so they are
    left out of the union, which keeps it small)."""
    s, rc, e = table(Statement).c, table(RunClient).c, table(MonthEvent).c
    issued = select(s.client.label("client"))
    if sees_drafts(principal):
        issued_runs = select(e.run_id).where(e.run_id.is_not(None))
        drafts = select(rc.client.label("client")).where(rc.run_id.not_in(issued_runs))
        names = union(issued, drafts).subquery()
    else:
        names = issued.distinct().subquery()
    query = select(names.c.client).distinct()
    scope = client_scope(principal)
    if scope is not None:
        query = query.where(names.c.client.in_(sorted(scope)))
    return query


def search_clients(
    engine: Engine,
    principal: Principal,
    q: str,
    page: int,
    per_page: int,
    store: Store | None = None,
) -> dict[str, Any]:
    """``GET /api/v1/clients``: a page of the clients whose id or catalog name contains
    ``q`` (any case), in id order, each with its name (``None``: not in the catalog or
    unnamed) and ``statement``: ``True`` for a client with a figure to open (an issued
    statement, or a draft for finance and admin), ``False`` for one known from the usage in
    ``store`` alone (no run yet), which only finance and admin list
    (:func:`~tenantcost.service.permissions.sees_usage_clients`). Filtered, counted and paged
    in SQL (fast on 10,000 clients); while the store holds clients of usage alone, the
    matching clients are merged with them and paged in pandas. Names come from the store's
    catalog for the listed clients only, so a client-scoped principal matches and reads its
    own clients' names, never another's."""
    from tenantcost.service.usage_clients import usage_only_clients
    from tenantcost.store.catalog import catalog_names

    base = _client_names(principal).subquery()
    names = catalog_names().subquery()
    query = select(base.c.client, names.c.name).join_from(
        base, names, names.c.client == base.c.client, isouter=True
    )
    if q:
        query = query.where(_matches(base.c.client, q) | _matches(names.c.name, q))
    usage_only = usage_only_clients(engine, store) if sees_usage_clients(principal) else ()
    if usage_only:
        found, total = _with_usage_only(engine, query, usage_only, q, page, per_page)
        return {"items": found, "page": page, "per_page": per_page, "total": total}
    filtered = query.subquery()
    total_column = func.count().over().label("total")  # the count in the same scan
    paged = (
        select(filtered.c.client, filtered.c.name, total_column)
        .order_by(filtered.c.client)
        .limit(per_page)
        .offset((page - 1) * per_page)
    )
    with engine.connect() as conn:
        rows = conn.execute(paged).all()
        if rows:
            total = int(rows[0].total)
        else:  # a page past the end: count alone
            total = int(conn.execute(select(func.count()).select_from(filtered)).scalar() or 0)
    items = [
        {"id": str(r.client), "name": None if r.name is None else str(r.name), "statement": True}
        for r in rows
    ]  # one page
    return {"items": items, "page": page, "per_page": per_page, "total": total}


def _matches(column: Any, q: str) -> Any:
    """``column`` contains ``q``, in any case (``%`` and ``_`` in ``q`` match themselves)."""
    escaped = q.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return func.lower(func.coalesce(column, "")).like(f"%{escaped}%", escape="\\")


def _with_usage_only(
    engine: Engine,
    query: Select[Any],
    usage_only: tuple[str, ...],
    q: str,
    page: int,
    per_page: int,
) -> tuple[list[dict[str, Any]], int]:
    """One page of the clients with a figure that match (``query``) merged with the clients
    of usage alone that match, in id order, and the count of both."""
    from tenantcost.store.catalog import catalog_names

    with engine.connect() as conn:
        figured = pd.DataFrame(conn.execute(query).all(), columns=["client", "name"])
        catalog = pd.DataFrame(conn.execute(catalog_names()).all(), columns=["client", "name"])
    extra = pd.DataFrame({"client": list(usage_only)}).merge(catalog, on="client", how="left")
    if q:
        wanted = q.lower()
        hit = extra["client"].str.lower().str.contains(wanted, regex=False) | extra["name"].fillna(
            ""
        ).str.lower().str.contains(wanted, regex=False)
        extra = extra[hit]
    both = pd.concat(
        [figured.assign(statement=True), extra.assign(statement=False)], ignore_index=True
    ).sort_values("client", kind="stable")
    shown = both.iloc[(page - 1) * per_page : page * per_page]
    items = [
        {"id": str(c), "name": None if pd.isna(n) else str(n), "statement": bool(st)}
        for c, n, st in zip(shown["client"], shown["name"], shown["statement"], strict=True)
    ]  # one page
    return items, len(both)


def client_months(engine: Engine, principal: Principal, client: str) -> list[str]:
    """The months in which ``client`` has a figure ``principal`` may see (ascending)."""
    s, rc, r = table(Statement).c, table(RunClient).c, table(Run).c
    issued = select(s.month.label("month")).where(s.client == client)
    if sees_drafts(principal):
        drafts = (
            select(r.month.label("month"))
            .join_from(table(RunClient), table(Run), r.id == rc.run_id)
            .where(rc.client == client)
        )
        names = union(issued, drafts).subquery()
    else:
        names = issued.distinct().subquery()
    with engine.connect() as conn:
        rows = conn.execute(select(names.c.month).distinct().order_by(names.c.month))
        return [str(m) for m in rows.scalars()]


def client_month(
    engine: Engine, principal: Principal, client: str, month: str, *, with_lines: bool = True
) -> dict[str, Any] | None:
    """``GET /api/v1/clients/{id}/months/{M}``, or None when there is no such figure."""
    redact = reader_text(engine, principal, client)  # before: one connection at a time
    with engine.connect() as conn:
        source = month_source(conn, principal, month)
        if source is None:
            return None
        run = conn.execute(select(table(Run)).where(table(Run).c.id == source.run_id)).first()
        amount = conn.execute(
            select(table(RunClient).c.amount).where(
                table(RunClient).c.run_id == source.run_id, table(RunClient).c.client == client
            )
        ).scalar()
        statement = _statement(conn, client, month, source.revision)
        if amount is None and statement is None:
            return None
        doc = _month_header(client, source, run, statement, amount)
        doc |= shown_fields(redact, principal, source.reason, source.client_reason,
                            source.issued_by, doc["rule_ids"])  # fmt: skip
        if with_lines:
            doc["lines"] = _lines(conn, source.run_id, client, principal, redact)
    return doc


def _statement(conn: Connection, client: str, month: str, revision: int | None) -> Any:
    if revision is None:
        return None
    s = table(Statement).c
    query = select(table(Statement)).where(
        s.month == month, s.client == client, s.revision == revision
    )
    return conn.execute(query).first()


def _month_header(
    client: str, source: MonthSource, run: Any, statement: Any, amount: int | None
) -> dict[str, Any]:
    from tenantcost.writers.json_output import money_header

    shown = int(statement.amount) if statement is not None else int(amount or 0)
    return {
        "client": client,
        "month": source.month,
        "status": str(source.status),
        "revision": source.revision,
        "state": source.state,
        "money": money_header(run.currency),
        "amount": shown,
        "previous_amount": None
        if statement is None or statement.previous_amount is None
        else int(statement.previous_amount),
        "difference": None if statement is None else int(statement.difference),
        "reason": source.reason,
        "rule_ids": json.loads(run.rule_ids),
        "run_id": source.run_id,
        "issued_at": iso(source.issued_at),
        "issued_by": source.issued_by,
        "confidence": None,
    }


def _lines(
    conn: Connection, run_id: str, client: str, principal: Principal, redact: Callable[[str], str]
) -> list[dict[str, Any]]:
    """The client's lines, one per source, kind and key (summed over rule versions).
    Account managers get their own measure and amount only: the pool's total measure and
    the share would tell them about the other clients of a pool."""
    ln = table(RunLine).c
    rows = conn.execute(
        select(
            ln.source,
            ln.kind,
            ln.key,
            func.sum(ln.measure).label("measure"),
            func.sum(ln.total_measure).label("total_measure"),
            func.sum(ln.amount).label("amount"),
            func.sum(ln.windows).label("windows"),
        )
        .where(ln.run_id == run_id, ln.client == client)
        .group_by(ln.source, ln.kind, ln.key)
        .order_by(ln.source, ln.kind, ln.key)
    ).all()
    cluster_view = sees_drafts(principal)
    out = []
    for row in rows:  # one client's lines: a handful
        line = {
            "source": redact(row.source),
            "kind": row.kind,
            "key": redact(row.key),
            "measure": row.measure,
            "amount": int(row.amount),
            "windows": int(row.windows),
        }
        if cluster_view:
            total = row.total_measure
            share = row.measure / total if total and row.measure is not None else None
            line |= {"total_measure": total, "share": share}
        out.append(line)
    return out


def client_document(engine: Engine, principal: Principal, client: str) -> dict[str, Any] | None:
    """``GET /api/v1/clients/{id}``: the months with a figure, newest last."""
    months = client_months(engine, principal, client)
    entries = [client_month(engine, principal, client, m, with_lines=False) for m in months]
    shown = [e for e in entries if e is not None]  # one per month, not per client
    if not shown:
        return None
    return {"id": client, "months": shown}


def reconciliation_document(
    engine: Engine, principal: Principal, month: str
) -> dict[str, Any] | None:
    """``GET /api/v1/months/{M}/reconciliation``: the cascade and the period figures of the
    run the viewer sees for the month."""
    from tenantcost.writers.json_output import money_header

    with engine.connect() as conn:
        source = month_source(conn, principal, month)
        if source is None:
            return None
        run = conn.execute(select(table(Run)).where(table(Run).c.id == source.run_id)).one()
        f = table(RunFigure).c
        rows = conn.execute(
            select(table(RunFigure))
            .where(f.run_id == source.run_id)
            .order_by(f.section, f.position)
        ).all()
    sections: dict[str, list[dict[str, Any]]] = {}
    for row in rows:  # the run's figures: tens of rows
        item = {"name": row.name, "kind": row.kind, "detail": row.detail, "amount": int(row.amount)}
        if row.section == "residual":
            item |= {"before_distribution": row.before_distribution, "distributed": row.distributed}
        sections.setdefault(str(row.section), []).append(item)
    return {
        "month": month,
        "status": str(source.status),
        "revision": source.revision,
        "state": source.state,
        "run_id": source.run_id,
        "money": money_header(run.currency),
        "reference_total": int(run.reference_total),
        "clients_total": int(run.clients_total),
        "unattributed_total": int(run.unattributed),
        "gap": int(run.gap),
        "cascade": sections.get("cascade", []),
        "unattributed": sections.get("unattributed", []),
        "residual": sections.get("residual", []),
        "exclusions": sections.get("exclusion", []),
    }


def invoice_document(engine: Engine, principal: Principal, month: str) -> dict[str, Any] | None:
    """``GET /api/v1/months/{M}/reconciliation?against=invoice``: the invoice cascade the run
    the viewer sees for the month recorded (``invoice``: the ``invoice`` object of
    ``allocate --format json``; ``null`` for a run without stored billing data)."""
    from tenantcost.writers.json_output import money_header

    with engine.connect() as conn:
        source = month_source(conn, principal, month)
        if source is None:
            return None
        run = conn.execute(select(table(Run)).where(table(Run).c.id == source.run_id)).one()
    return {
        "month": month,
        "against": "invoice",
        "status": str(source.status),
        "revision": source.revision,
        "state": source.state,
        "run_id": source.run_id,
        "money": money_header(run.currency),
        "invoice": json.loads(run.invoice) if run.invoice else None,
    }


def month_exists(engine: Engine, month: str) -> bool:
    """Whether the store knows the month at all (a run or an issued revision)."""
    r, s = table(Run).c, table(Statement).c
    query = select(exists().where(r.month == month) | exists().where(s.month == month))
    with engine.connect() as conn:
        return bool(conn.execute(query).scalar())
