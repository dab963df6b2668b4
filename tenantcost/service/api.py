"""The JSON API under ``/api/v1`` (usage ingest: :mod:`tenantcost.service.usage`), and the
health probes.

Routes are thin: each names its :class:`~tenantcost.service.permissions.Action` through a
dependency (:func:`~tenantcost.service.auth.require`,
:func:`~tenantcost.service.auth.client_access`),
reads through :mod:`tenantcost.service.figures` (which filters by principal) and maps the
store's refusals to HTTP: a bad value 422, a closed / not-closed / incomplete month 409, a
close that changes nothing 409 (``{"detail": "nothing changed since revision N ...",
"revision": N}``), the store locked past the wait 503. Handlers are plain ``def``: the store
is synchronous, so FastAPI runs them in its thread pool.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from tenantcost.errors import InputError
from tenantcost.month import MONTH_PATTERN
from tenantcost.report.sheet_view import SheetView
from tenantcost.service import figures
from tenantcost.service.auth import (
    ClientAccess,
    ClientAccessDep,
    MayClose,
    MayListBatches,
    MayListClients,
    MayListMonths,
    MayManageTokens,
    MayReopen,
    MayViewIssuedMonth,
    MayViewPricing,
    MayViewWatch,
    MayWithdrawBatch,
    authorize,
    not_found,
    require,
)
from tenantcost.service.json_body import JSONBodyRoute
from tenantcost.service.params import (
    MAX_PAGE,
    CatalogValue,
    CurrencyCode,
    PageNumber,
    SearchText,
)
from tenantcost.service.permissions import Action, Principal, can, sees_drafts

Month = Annotated[
    str, Path(pattern=MONTH_PATTERN, description="A month, YYYY-MM (UTC), 2000-01 .. 2099-12.")
]

health = APIRouter(tags=["health"])
router = APIRouter(prefix="/api/v1", route_class=JSONBodyRoute)


class StoreBusy(HTTPException):
    """The store stayed locked by another writer past the service's wait."""

    def __init__(self, message: str) -> None:
        super().__init__(503, message, headers={"Retry-After": "5"})


@contextmanager
def store_refusals() -> Iterator[None]:
    """The store's refusals as HTTP answers (one line each, like the CLI's)."""
    from tenantcost.service.problems import Problem
    from tenantcost.store.cycle import (
        IncompleteMonth,
        MonthClosed,
        MonthNotClosed,
        NothingChanged,
    )
    from tenantcost.store.lock import StoreLocked

    try:
        yield
    except NothingChanged as exc:
        raise Problem(409, exc.one_line(), revision=exc.revision) from None
    except (MonthClosed, MonthNotClosed, IncompleteMonth) as exc:
        raise HTTPException(409, exc.one_line()) from None
    except InputError as exc:
        raise HTTPException(422, exc.one_line()) from None
    except StoreLocked as exc:
        raise StoreBusy(str(exc)) from None


@health.get("/healthz", summary="The process is up")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@health.get("/readyz", summary="The database is reachable and its schema current")
def readyz(request: Request) -> JSONResponse:
    from sqlalchemy.exc import SQLAlchemyError

    from tenantcost.store.schema import current_revision, head_revision

    expected = head_revision()
    try:
        revision = current_revision(request.app.state.engine)
    except SQLAlchemyError as exc:
        detail = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        return JSONResponse({"status": "unavailable", "detail": f"database: {detail}"}, 503)
    if revision != expected:
        return JSONResponse(
            {
                "status": "unavailable",
                "schema": revision,
                "expected": expected,
                "detail": "run `tenantcost db upgrade`",
            },
            503,
        )
    return JSONResponse({"status": "ready", "schema": revision})


@router.get("/months", tags=["months"], summary="Months: coverage, runs, state, revisions")
def list_months(request: Request, principal: MayListMonths) -> list[dict[str, Any]]:
    return figures.months_document(request.app.state.engine, principal)


@router.get(
    "/clients",
    tags=["clients"],
    response_model=None,
    summary="The client list of a month: search, filter, sort (paginated; CSV)",
)
def list_clients(
    request: Request,
    principal: MayListClients,
    q: SearchText = "",
    page: PageNumber = 1,
    per_page: Annotated[int, Query(ge=1, le=figures.MAX_PER_PAGE)] = figures.DEFAULT_PER_PAGE,
    month: Annotated[
        str | None, Query(pattern=MONTH_PATTERN, description="YYYY-MM (default: the latest)")
    ] = None,
    plan: CatalogValue = "",
    segment: CatalogValue = "",
    manager: CatalogValue = "",
    sort: Annotated[
        str | None, Query(max_length=40, description="An item's field (default amount)")
    ] = None,
    order: Annotated[str | None, Query(max_length=8, description="asc or desc")] = None,
    format: Annotated[Literal["json", "csv"], Query(description="csv: every row")] = "json",
    currency: CurrencyCode | None = None,
) -> dict[str, Any] | Response:
    """:mod:`tenantcost.service.client_list`: one page of the month's clients, or (``csv``)
    every matching row. Each JSON item's ``converted``: its amount in ``?currency=`` (else
    the client's own, else ``presentation:``) as the month's run converted it, or null."""
    from tenantcost.service import client_list as listing
    from tenantcost.service.csv_table import csv_response

    with store_refusals():
        field, direction = listing.parse_sort(sort, order)
    query = listing.ListQuery(month, q.strip(), plan, segment, manager, field, direction,
                              page, per_page)  # fmt: skip
    found = listing.client_list(request.app.state.engine, principal, query,
                                request.app.state.store, paged=format == "json")  # fmt: skip
    if format == "csv":
        return csv_response(listing.csv_frame(found), listing.csv_name(found), listing.AMOUNTS)
    from tenantcost.service.currency_view import listed_conversions

    doc = listing.document(found, query)
    shown = listed_conversions(request.app.state.engine, found.run_id,
                               [str(i["id"]) for i in doc["items"]], currency)  # fmt: skip
    for item in doc["items"]:  # one page
        item["converted"] = shown.get(str(item["id"]))
    return doc


@router.get("/clients/{client_id}", tags=["clients"], summary="A client's months")
def get_client(request: Request, access: ClientAccessDep) -> dict[str, Any]:
    doc = figures.client_document(request.app.state.engine, access.principal, access.client)
    if doc is None:
        raise not_found()
    return doc


@router.get(
    "/clients/{client_id}/months/{month}",
    tags=["clients"],
    summary="A client's month: amount, lines, rule, revision, status",
)
def get_client_month(
    request: Request, month: Month, access: ClientAccessDep, currency: CurrencyCode | None = None
) -> dict[str, Any]:
    """``watch``: the client's entry of the month's latest watch run (null: none); a month
    with no figure the viewer may see but a watch of the client answers the watch alone.
    ``converted``: the month's amount in ``?currency=`` (default the client's own, else
    ``presentation:``) as its run converted it (null: shown in the ledger, or not converted);
    every other figure stays in ``money.currency``, the ledger's."""
    from tenantcost.service import watch_view
    from tenantcost.service.currency_view import converted_amount

    engine = request.app.state.engine
    doc = figures.client_month(engine, access.principal, access.client, month)
    if doc is not None:
        internal = can(access.principal, Action.VIEW_INTERNAL_SHEET, access.client).allowed
        doc["converted"] = converted_amount(engine, doc, currency, internal)
    watch = watch_view.client_document(engine, access.principal, access.client, month)
    if doc is None:
        if watch is None:
            raise not_found()
        from tenantcost.store.cycle import month_state

        state = str(month_state(engine, month))
        return watch_view.watch_only_month(access.client, month, state, watch)
    doc["watch"] = watch
    source = figures.month_source(engine, access.principal, month)
    if source is not None:
        from tenantcost.service.sheets import client_confidence

        store = request.app.state.store
        data = store.data if store is not None else None
        doc["confidence"] = client_confidence(engine, source, access.client, data)
    doc["bridge"] = None
    if source is not None:  # against the previous month's latest issued revision
        from tenantcost.service.bridge_view import bridge_document

        store = request.app.state.store
        data = store.data if store is not None else None
        with store_refusals():
            doc["bridge"] = bridge_document(
                engine, access.principal, access.client, month, source.run_id, data
            )
    return doc


@router.get(
    "/clients/{client_id}/history",
    tags=["clients"],
    summary="Issued revisions of a client's statements (like `tenantcost history`)",
)
def get_client_history(request: Request, access: ClientAccessDep) -> list[dict[str, Any]]:
    engine = request.app.state.engine
    entries = figures.client_history(engine, access.principal, access.client)
    if not entries and not figures.client_months(engine, access.principal, access.client):
        raise not_found()
    return entries


SheetViewParam = Annotated[
    SheetView,
    Query(
        description="`client` (default: what the client receives) or `internal` (finance "
        "and admin: with the confidence grade, the amounts under other keys, the input "
        "files and the reproduce command; rendered on demand, never kept)."
    ),
]


def _sheet(
    request: Request,
    month: str,
    access: ClientAccess,
    fmt: str,
    view: SheetView,
    currency: str | None = None,
) -> Response:
    from tenantcost.service.sheets import render_sheet

    if view.internal:
        authorize(request, access.principal, Action.VIEW_INTERNAL_SHEET, access.client)
    engine = request.app.state.engine
    source = figures.month_source(engine, access.principal, month)
    if (
        source is None
        or figures.client_month(engine, access.principal, access.client, month, with_lines=False)
        is None
    ):
        raise not_found()
    with store_refusals():
        store = request.app.state.store
        data = store.data if store is not None else None
        return render_sheet(engine, source, access.client, fmt, data, view, currency)


@router.get(
    "/clients/{client_id}/months/{month}/sheet.html",
    tags=["sheets"],
    response_class=Response,
    summary="The client's cost sheet, HTML",
)
def sheet_html(
    request: Request,
    month: Month,
    access: ClientAccessDep,
    view: SheetViewParam = SheetView.CLIENT,
    currency: CurrencyCode | None = None,
) -> Response:
    """``?currency=``: the sheet as the month's run converted it into that currency, the
    rates frozen with its revision (docs/currency.md); default: as issued, in the ledger
    currency. A currency the run did not convert into is a 404."""
    return _sheet(request, month, access, "html", view, currency)


@router.get(
    "/clients/{client_id}/months/{month}/sheet.pdf",
    tags=["sheets"],
    response_class=Response,
    summary="The client's cost sheet, PDF",
)
def sheet_pdf(
    request: Request,
    month: Month,
    access: ClientAccessDep,
    view: SheetViewParam = SheetView.CLIENT,
    currency: CurrencyCode | None = None,
) -> Response:
    return _sheet(request, month, access, "pdf", view, currency)


@router.get(
    "/clients/{client_id}/months/{month}/sheet.md",
    tags=["sheets"],
    response_class=Response,
    summary="The client's cost sheet, Markdown",
)
def sheet_md(
    request: Request,
    month: Month,
    access: ClientAccessDep,
    view: SheetViewParam = SheetView.CLIENT,
    currency: CurrencyCode | None = None,
) -> Response:
    return _sheet(request, month, access, "md", view, currency)


@router.get(
    "/months/{month}/reconciliation",
    tags=["months"],
    summary="The month's cascade: reference total to clients, to the micro-unit",
)
def get_reconciliation(
    request: Request,
    month: Month,
    principal: MayViewIssuedMonth,
    against: Annotated[
        Literal["opencost", "invoice"],
        Query(
            description="opencost (default): the cascade to the reference total; invoice: "
            "the invoice cascade of a run on stored billing data (finance and admin)."
        ),
    ] = "opencost",
) -> dict[str, Any]:
    if against == "invoice":
        authorize(request, principal, Action.VIEW_INVOICE)
        invoice = figures.invoice_document(request.app.state.engine, principal, month)
        if invoice is None:
            raise HTTPException(404, f"no run of {month}: run `tenantcost run --month {month}`")
        if invoice["invoice"] is None:
            raise HTTPException(404, f"run {invoice['run_id']} of {month} has no invoice "
                                "cascade (no billing data stored for the month): `tenantcost "
                                "ingest billing --billing PATH`, then run again")  # fmt: skip
        return invoice
    doc = figures.reconciliation_document(request.app.state.engine, principal, month)
    if doc is None:
        raise HTTPException(404, f"no run of {month}: run `tenantcost run --month {month}`")
    return doc


@router.get(
    "/months/{month}/compare",
    tags=["months"],
    summary="Every client's amount under other keys (current stored inputs)",
)
def get_compare(
    request: Request,
    month: Month,
    keys: Annotated[str, Query(description="Comma-separated keys, e.g. requests,cpu")],
    principal: MayViewIssuedMonth,
) -> dict[str, Any]:
    from tenantcost.service.compare import compare_month
    from tenantcost.store.cycle import MonthState, month_state

    wanted = [k.strip() for k in keys.split(",") if k.strip()]
    if not wanted:
        raise HTTPException(422, "keys: name at least one key, e.g. ?keys=requests,cpu")
    closed = month_state(request.app.state.engine, month) is MonthState.CLOSED
    if not sees_drafts(principal) and not closed:
        # computed from the current inputs: issued figures only while the month is closed
        raise HTTPException(404, f"{month} is not closed: its comparison would show figures "
                            "not issued (finance and admin only)")  # fmt: skip
    with store_refusals():
        return compare_month(_store(request), month, wanted)


@router.get(
    "/months/{month}/unit-economics",
    tags=["months"],
    summary="Unit economics of the month (as `unit-economics --format json`); the /pricing page",
)
def get_unit_economics(
    request: Request,
    month: Month,
    principal: MayViewPricing,
    by: Annotated[Literal["plan", "segment"], Query(description="Group clients by.")] = "plan",
    as_of: Annotated[
        str | None,
        Query(
            max_length=64,
            description="ISO 8601 time (default now): a month in progress "
            "at this time also gets a projection, an estimate.",
        ),
    ] = None,
    currency: CurrencyCode | None = None,
) -> dict[str, Any]:
    """In ``?currency=`` (default ``presentation:``) where the month's run converted into
    it: ``currency`` and ``fx`` say which (``fx`` null: the ledger's)."""
    from tenantcost.economics import GroupBy
    from tenantcost.service.pricing import as_of_time, priced_month

    with store_refusals():
        priced = priced_month(request.app.state.engine, request.app.state.store, principal,
                              month, GroupBy(by), as_of_time(as_of), currency)  # fmt: skip
    if priced is None:
        raise HTTPException(404, f"no figures of {month} to price")
    return priced.doc


@router.get(
    "/months/{month}/watch",
    tags=["months"],
    summary="Every client's month to date against its budget band, and anomalies "
    "(the latest `tenantcost watch` run)",
)
def get_month_watch(
    request: Request,
    month: Month,
    _principal: MayViewWatch,
    page: Annotated[
        int | None, Query(ge=1, le=MAX_PAGE, description="One page of the clients (by id).")
    ] = None,
    per_page: Annotated[int | None, Query(ge=1, le=figures.MAX_PER_PAGE)] = None,
) -> dict[str, Any]:
    """The document of ``tenantcost watch --month M --format json`` as its latest run on the
    store recorded it, labelled "month to date, not issued"; 404 before any run."""
    from tenantcost.service.problems import Problem
    from tenantcost.service.watch_view import month_document

    doc = month_document(request.app.state.engine, month, page, per_page)
    if doc is None:
        command = f"tenantcost watch --month {month}"
        raise Problem(404, f"no watch of {month} recorded: run `{command}` on the store "
                      "(e.g. hourly from a CronJob)", month=month)  # fmt: skip
    return doc


@router.get(
    "/months/{month}/watch/daily",
    tags=["months"],
    summary="Every client's daily cost per source and anomalies per day (the latest watch run)",
)
def get_month_watch_daily(
    request: Request,
    month: Month,
    _principal: MayViewWatch,
    format: Annotated[
        Literal["json", "csv"], Query(description="json (default) or csv: the same rows.")
    ] = "json",
) -> Any:
    """``days``: one item per day and source, summed over every client (``?format=csv``)."""
    from tenantcost.service.watch_daily_view import month_daily

    daily = month_daily(request.app.state.engine, month)
    if daily is None:
        raise HTTPException(404, f"no daily figures of a watch of {month} recorded")
    if format == "csv":
        from tenantcost.service.csv_table import csv_response

        return csv_response(daily.frame, f"watch-daily-{month}.csv", ["amount"])
    return daily.document()


class CloseRequest(BaseModel):
    allow_incomplete: bool = Field(
        default=False, description="Close even if hours lack costs or usage (said on sheets)."
    )
    force: bool = Field(
        default=False,
        description="After a reopen: issue revision N+1 even though no client's amount, no "
        'rule and not the completeness changed (else 409 "nothing changed since revision N").',
    )


class ReopenRequest(BaseModel):
    reason: str = Field(
        min_length=1,
        max_length=2000,
        description="Why (goes on revision N+1); shown to finance and admin only.",
    )
    client_reason: str | None = Field(
        default=None,
        max_length=2000,
        description="What account managers and client sheets read instead of `reason`, "
        'redacted for each client (default: "restated by finance").',
    )


def _store(request: Request) -> Any:
    store = request.app.state.store
    if store is None:
        raise HTTPException(503, "the service has no data directory: start it with --data DIR")
    return store


@router.post("/months/{month}/close", tags=["months"], summary="Issue the next revision")
def post_close(
    request: Request,
    month: Month,
    principal: MayClose,
    body: CloseRequest | None = None,
) -> dict[str, Any]:
    from tenantcost.store.cycle import close_month

    settings = request.app.state.settings
    with store_refusals():
        closed = close_month(
            _store(request),
            month,
            actor=principal.actor,
            allow_incomplete=bool(body and body.allow_incomplete),
            wait=settings.ingest_wait,
            force=bool(body and body.force),
        )
    from tenantcost.service.bridge_view import cache_in_background

    cache_in_background(request.app.state.engine, month, _store(request).data)
    return {
        "month": closed.month,
        "revision": closed.revision,
        "run_id": closed.run_id,
        "reused_run": closed.reused_run,
        "incomplete": closed.incomplete,
        "detail": closed.detail,
        "reason": closed.reason,
        "client_reason": closed.client_reason,
        "rates_changed": closed.rates_changed,
        "issued_at": figures.iso(closed.issued_at),
        "statements": len(closed.statements),
    }


@router.post("/months/{month}/reopen", tags=["months"], summary="Unlock a closed month")
def post_reopen(
    request: Request,
    month: Month,
    body: ReopenRequest,
    principal: MayReopen,
) -> dict[str, Any]:
    from tenantcost.store.cycle import reopen_month

    settings = request.app.state.settings
    with store_refusals():
        done = reopen_month(
            request.app.state.engine,
            month,
            reason=body.reason,
            actor=principal.actor,
            wait=settings.ingest_wait,
            client_reason=body.client_reason,
        )
    return {
        "month": done.month,
        "revision": done.revision,
        "reason": done.reason,
        "client_reason": done.client_reason,
        "at": figures.iso(done.at),
        "actor": done.actor,
    }


@router.get("/batches", tags=["batches"], summary="Ingested batches (like `tenantcost batch list`)")
def list_batches(
    request: Request,
    _principal: MayListBatches,
    month: Annotated[
        str | None, Query(pattern=MONTH_PATTERN, description="Only batches with windows in it.")
    ] = None,
) -> list[dict[str, Any]]:
    from tenantcost.store.batches import batches_document
    from tenantcost.store.batches import list_batches as batches

    return batches_document(batches(request.app.state.engine, month))


class WithdrawRequest(BaseModel):
    reason: str = Field(min_length=1, max_length=2000, description="Why (recorded, internal).")


@router.post(
    "/batches/{uid}/withdraw",
    tags=["batches"],
    summary="Withdraw a batch from its open months (nothing is deleted)",
)
def post_withdraw(
    request: Request,
    uid: Annotated[str, Path(description="The batch uid, or its first 8 or more hex digits.")],
    body: WithdrawRequest,
    principal: MayWithdrawBatch,
) -> dict[str, Any]:
    """404 for an unknown batch, 409 for one already withdrawn or reaching into a closed
    month, 422 for an empty reason."""
    from tenantcost.store.batches import AlreadyWithdrawn, UnknownBatch, withdraw_batch

    settings = request.app.state.settings
    with store_refusals():
        try:
            done = withdraw_batch(request.app.state.engine, uid, reason=body.reason,
                                  actor=principal.actor, wait=settings.ingest_wait)  # fmt: skip
        except UnknownBatch as exc:
            raise HTTPException(404, exc.one_line()) from None
        except AlreadyWithdrawn as exc:
            raise HTTPException(409, exc.one_line()) from None
    return {**done.batch.document(), "months": done.batch.months,
            "restored_cells": done.restored}  # fmt: skip


class TokenRequest(BaseModel):
    role: str = Field(description="admin, finance, product, account-manager or ingest")
    clients: list[str] = Field(default_factory=list, description="account-manager only")
    name: str | None = None
    expires: str | None = Field(default=None, description="e.g. 90d, 12h, 2w")


@router.get("/tokens", tags=["tokens"], summary="Every token (never the secret)")
def get_tokens(request: Request, _principal: MayManageTokens) -> list[dict[str, Any]]:
    from tenantcost.service.tokens import list_tokens

    return [t.document() for t in list_tokens(request.app.state.engine)]


@router.post(
    "/tokens",
    tags=["tokens"],
    status_code=201,
    summary="Create a token; its secret is in this answer only",
)
def post_token(
    request: Request,
    body: TokenRequest,
    principal: MayManageTokens,
) -> dict[str, Any]:
    from tenantcost.service.tokens import create_token, parse_duration

    settings = request.app.state.settings
    with store_refusals():
        expires = parse_duration(body.expires) if body.expires else None
        secret, info = create_token(
            request.app.state.engine,
            body.role,
            clients=body.clients,
            name=body.name,
            expires=expires,
            actor=principal.actor,
            wait=settings.ingest_wait,
        )
    return {"token": secret, **info.document()}


@router.delete("/tokens/{name}", tags=["tokens"], summary="Revoke a token now")
def delete_token(request: Request, name: str, principal: MayManageTokens) -> dict[str, Any]:
    from tenantcost.service.tokens import revoke_token

    settings = request.app.state.settings
    try:
        with store_refusals():
            info = revoke_token(
                request.app.state.engine, name, actor=principal.actor, wait=settings.ingest_wait
            )
    except HTTPException as exc:
        if exc.status_code == 422:
            raise HTTPException(404, str(exc.detail)) from None
        raise
    return info.document()


# --------------------------------------------------------------------------- trends and movers

CsvFormat = Annotated[
    Literal["json", "csv"], Query(description="json (default) or csv: the same rows, as a file.")
]


@router.get(
    "/clients/{client_id}/trend", tags=["clients"], summary="A client's trend across months"
)
def get_client_trend(
    request: Request,
    access: ClientAccessDep,
    months: Annotated[int, Query(ge=1, le=36, description="Calendar months, at most 36.")] = 12,
    currency: CurrencyCode | None = None,
    format: CsvFormat = "json",
) -> Any:
    """Months oldest first (tenantcost.service.trend); ``?format=csv``: one row per month and
    source. ``?currency=``: each month as its run converted it (docs/currency.md), with its
    ``ledger_amount``; months without a conversion are named in ``not_converted``."""
    from tenantcost.service.trend import client_trend

    engine = request.app.state.engine
    trend = client_trend(engine, access.principal, access.client, months, currency)
    if trend is None:
        raise not_found()
    if format == "csv":
        from tenantcost.service.csv_table import csv_response

        frame = trend.by_source_frame()
        amounts = [c for c in ("amount", "ledger_amount") if c in frame]
        return csv_response(frame, f"trend-{access.client}.csv", amounts)
    return trend.document()


@router.get(
    "/clients/{client_id}/months/{month}/watch/daily",
    tags=["clients"],
    summary="A client's daily cost per source this month, anomalies per day (latest watch)",
)
def get_client_watch_daily(
    request: Request, month: Month, access: ClientAccessDep, format: CsvFormat = "json"
) -> Any:
    """The client's own row of the latest watch run's daily figures (``?format=csv``)."""
    from tenantcost.service.watch_daily_view import client_daily

    engine = request.app.state.engine
    daily = client_daily(engine, access.principal, access.client, month)
    if daily is None:
        raise not_found()
    if format == "csv":
        from tenantcost.service.csv_table import csv_response

        name = f"watch-daily-{access.client}-{month}.csv"
        return csv_response(daily.frame, name, ["amount"])
    return daily.document()


@router.get(
    "/clients/{client_id}/unit-cost-trend",
    tags=["clients"],
    summary="A client's cost per unit of each key metric across months (CSV or JSON rows)",
)
def get_client_unit_cost_trend(
    request: Request,
    access: ClientAccessDep,
    months: Annotated[int, Query(ge=1, le=36, description="Calendar months, at most 36.")] = 12,
    currency: CurrencyCode | None = None,
    format: CsvFormat = "json",
) -> Any:
    """The ``unit_costs`` of the trend as rows: ``month, status, revision, metric, unit,
    amount`` (the client page's unit-cost chart links here for its CSV); ``?currency=`` as
    the trend's."""
    from tenantcost.service.trend import client_trend

    engine = request.app.state.engine
    trend = client_trend(engine, access.principal, access.client, months, currency)
    if trend is None:
        raise not_found()
    frame = trend.unit_cost_frame()
    if format == "csv":
        from tenantcost.service.csv_table import csv_response

        return csv_response(frame, f"unit-costs-{access.client}.csv", ["amount"])
    return trend.unit_cost_document()


@router.get(
    "/months/{month}/movers",
    tags=["months"],
    summary="The clients whose figures moved most since the previous month (top movers)",
)
def get_month_movers(
    request: Request,
    month: Month,
    principal: Annotated[Principal, Depends(require(Action.VIEW_MOVERS))],
    limit: Annotated[int, Query(ge=1, le=500, description="Items of each list.")] = 10,
    format: CsvFormat = "json",
) -> Any:
    """Account managers: among their own clients only (tenantcost.service.movers)."""
    from tenantcost.service.movers import month_movers

    store = request.app.state.store
    data = store.data if store is not None else None
    with store_refusals():
        found = month_movers(request.app.state.engine, principal, month, limit, data)
    if found is None:
        raise HTTPException(404, f"no figures of {month} to compare")
    if format == "csv":
        from tenantcost.service.csv_table import csv_response
        from tenantcost.service.movers import CSV_AMOUNTS

        return csv_response(found.frame(), f"movers-{month}.csv", CSV_AMOUNTS)
    return found.document()


@router.get(
    "/months/{month}/trend",
    tags=["months"],
    summary="The reference total, the clients' share and the idle share across months",
)
def get_month_trend(
    request: Request,
    month: Month,
    principal: MayViewIssuedMonth,
    months: Annotated[int, Query(ge=1, le=36, description="Calendar months, at most 36.")] = 12,
    format: CsvFormat = "json",
) -> Any:
    """The ``months`` months ending at ``month``, oldest first (tenantcost.service.month_trend)."""
    from tenantcost.service.month_trend import AMOUNTS, month_trend

    found = month_trend(request.app.state.engine, principal, month, months)
    if found is None:
        raise HTTPException(404, f"no figures of the {months} months to {month}")
    if format == "csv":
        from tenantcost.service.csv_table import csv_response

        return csv_response(found.frame, f"month-trend-{month}.csv", AMOUNTS)
    return found.document()


@router.get(
    "/pricing/margins",
    tags=["months"],
    summary="Gross margin per plan (or segment) across months, as the pricing page prices each",
)
def get_plan_margins(
    request: Request,
    principal: MayViewPricing,
    month: Annotated[
        str | None,
        Query(pattern=MONTH_PATTERN, description="The last month (default: the newest shown)."),
    ] = None,
    months: Annotated[int, Query(ge=1, le=36, description="Calendar months, at most 36.")] = 12,
    by: Annotated[Literal["plan", "segment"], Query(description="Group clients by.")] = "plan",
    format: CsvFormat = "json",
) -> Any:
    """Months oldest first, each on its basis (tenantcost.service.plan_margins)."""
    from tenantcost.economics import GroupBy
    from tenantcost.service.plan_margins import AMOUNTS, plan_margins

    engine = request.app.state.engine
    if month is None:
        shown = figures.months_document(engine, principal)
        if not shown:
            raise HTTPException(404, "no month to price yet: no run has been issued")
        month = str(shown[-1]["month"])
    with store_refusals():
        found = plan_margins(engine, request.app.state.store, principal, month, months,
                             GroupBy(by))  # fmt: skip
    if found is None:
        raise HTTPException(404, f"no figures of the {months} months to {month} to price")
    if format == "csv":
        from tenantcost.service.csv_table import csv_response

        return csv_response(found.csv_frame(), f"margins-{by}-{month}.csv", AMOUNTS)
    return found.document()
