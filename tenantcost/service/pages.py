"""The HTML pages: login, client search, the client page, the finance month pages.

Rendered with jinja2 from ``tenantcost/templates/service/`` (package data, through the report
pack's :func:`~tenantcost.report.render.template_loader`, so ``--templates``-style overrides
and the wheel work alike). No JavaScript framework: plain forms and links, so every page
works with a keyboard, a screen reader and a phone.

Every route asks :mod:`tenantcost.service.permissions` through
:mod:`tenantcost.service.auth` (``authorize``, ``client_access``, ``require``); none decides
access itself. Denials render here (:func:`render_denied`): 401 sends a browser to the login
form, 403 is the "not allowed" page, and 404 is one page, byte for byte the same for another
client's URL and a client that does not exist.

Browser sessions and CSRF are :mod:`tenantcost.service.session`'s; every POST checks the
form's CSRF field before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Form, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from starlette.exceptions import HTTPException as StarletteHTTPException

from tenantcost.month import MONTH_PATTERN, parse_month
from tenantcost.service import figures, page_data
from tenantcost.service.auth import (
    ClientAccess,
    Denied,
    authorize,
    client_access,
    get_principal,
    log_denial,
    not_found,
    set_session_lookup,
)
from tenantcost.service.config import ServiceSettings
from tenantcost.service.json_body import text_problem
from tenantcost.service.params import CatalogValue, CurrencyCode, PageNumber, SearchText
from tenantcost.service.permissions import (
    MANAGER_MONTH_FIELDS,
    Action,
    Decision,
    Principal,
    can,
    client_scope,
    sees_drafts,
    sees_month_workings,
    sees_usage_clients,
)
from tenantcost.service.session import (
    COOKIE_NAME,
    CSRF_HEADER,
    Session,
    SessionCodec,
    clear_session_cookie,
    csrf_matches,
    end_session,
    new_session,
    read_session,
    session_ended,
    set_session_cookie,
)
from tenantcost.store.watch_snapshots import EntryOrder

router = APIRouter(include_in_schema=False)
PER_PAGE = 50
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
API_PREFIX = "/api/"
LOCKED = "Another process is writing to the store (an ingest or a run); try again in a minute."


@dataclass(frozen=True)
class Layout:
    """What every page's frame needs: who is signed in, their CSRF value, the nav."""

    principal: Principal | None
    csrf: str
    section: str
    cluster: bool
    pricing: bool = False
    """The nav's "Pricing" link (product, finance, admin)."""
    months: bool = False
    """The nav's "Months" link (product, finance, admin)."""


def install(app: FastAPI, settings: ServiceSettings) -> None:
    """Plug the pages into ``app`` (called by :func:`tenantcost.service.app.create_app`)."""
    codec = SessionCodec(settings.secret)
    app.state.session_codec = codec
    app.state.page_env = _environment()
    set_session_lookup(app, _session_lookup)
    app.state.render_denied = render_denied
    app.add_exception_handler(StarletteHTTPException, _page_not_found)
    app.include_router(router)


async def _page_not_found(request: Request, exc: Exception) -> Response:
    """An unknown page URL gets the 404 page (the same as a client's); the API and every
    other status keep FastAPI's JSON answer."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404 and not request.url.path.startswith(API_PREFIX):
        return render_denied(request, Denied(Decision.NOT_FOUND))
    return await http_exception_handler(request, exc)


def _environment() -> jinja2.Environment:
    from tenantcost.report.render import template_loader

    return jinja2.Environment(
        loader=template_loader(None),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _session_lookup(request: Request) -> int | None:
    """The token id of the request's session; None without a logged-in session, for one
    ended by logout, and for a cookie-authenticated unsafe API call without the session's
    ``X-CSRF-Token`` header."""
    session = read_session(request, request.app.state.session_codec)
    if session is None or not session.logged_in:
        return None
    if (
        request.method in UNSAFE_METHODS
        and request.url.path.startswith(API_PREFIX)
        and not csrf_matches(session, request.headers.get(CSRF_HEADER))
    ):
        return None
    if session_ended(request.app.state.engine, session):
        return None
    return session.token_id


def _session(request: Request) -> tuple[Session, bool]:
    """The request's session, or a new anonymous one (True: it must be set as a cookie)."""
    session = read_session(request, request.app.state.session_codec)
    return (session, False) if session is not None else (new_session(), True)


def render(
    request: Request,
    name: str,
    *,
    section: str = "",
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render a page; a first visit gets its anonymous session (for the login form's CSRF)."""
    session, fresh = _session(request)
    principal = get_principal(request) if session.logged_in else None
    cluster = principal is not None and can(principal, Action.VIEW_CLUSTER).allowed
    pricing = principal is not None and can(principal, Action.VIEW_PRICING).allowed
    months = principal is not None and can(principal, Action.VIEW_ISSUED_MONTH).allowed
    layout = Layout(principal, session.csrf, section, cluster, pricing, months)
    html = request.app.state.page_env.get_template(name).render(layout=layout, **context)
    response = HTMLResponse(html, status_code=status)  # headers: service.headers
    if fresh:
        set_session_cookie(response, request, request.app.state.session_codec, session)
    return response


_DENIED_PAGES = {
    Decision.FORBIDDEN: ("Not allowed", "Your access token's role does not open this page."),
    Decision.NOT_FOUND: ("Page not found", "There is nothing here, or nothing you may open."),
}


def render_denied(request: Request, exc: Denied) -> Response:
    """401: to the login form (GET) or the login page with 401 (other methods); 403 and 404:
    their pages. The 404 page depends on nothing but the principal: another client's URL and
    a missing one read the same."""
    if exc.decision is Decision.UNAUTHENTICATED:
        if request.method == "GET":
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            login = "/login?" + urlencode({"next": target})
            response: Response = RedirectResponse(login, status_code=303)
            if request.cookies.get(COOKIE_NAME):
                clear_session_cookie(response, request)
            return response
        return _login_page(request, "/", error="Please log in again.", status=401)
    heading, text = _DENIED_PAGES.get(exc.decision, _DENIED_PAGES[Decision.NOT_FOUND])
    return render(
        request,
        "service/error.html",
        status=int(exc.decision),
        code=int(exc.decision),
        heading=heading,
        text=text,
        back_href="/clients",
        back_label="Back to the clients",
    )


def _safe_next(target: str | None) -> str:
    """Only a local path (no scheme, no ``//host``): a login link cannot send people away."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"  # the role's answer (tenantcost.service.landing)
    return target


def _login_page(
    request: Request, next_: str, *, error: str = "", message: str = "", status: int = 200
) -> HTMLResponse:
    return render(
        request,
        "service/login.html",
        status=status,
        error=error,
        message=message,
        next=_safe_next(next_),
    )


def _check_csrf(request: Request, submitted: str | None) -> Session:
    """The session, if the form's CSRF value is its own; else 403 (logged)."""
    session = read_session(request, request.app.state.session_codec)
    if session is None or not csrf_matches(session, submitted):
        log_denial(request, None, "csrf", Decision.FORBIDDEN)
        raise Denied(Decision.FORBIDDEN)
    return session


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> Response:
    """Signed in: the role's answer (:mod:`tenantcost.service.landing`); else the login form."""
    from tenantcost.service.landing import landing

    principal = get_principal(request)
    target = "/login" if principal is None else landing(request.app.state.engine, principal)
    return RedirectResponse(target, status_code=303)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/", logged_out: int = 0) -> Response:
    message = "You are logged out." if logged_out else ""
    return _login_page(request, next, message=message)


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request,
    token: str = Form(""),
    csrf_token: str = Form(""),
    next: str = Form("/"),
) -> Response:
    """Check the token (as a Bearer header would be) and start a new session for it."""
    _check_csrf(request, csrf_token)
    from tenantcost.service.tokens import principal_for_secret

    principal = principal_for_secret(request.app.state.engine, token.strip())
    if principal is None or principal.token_id is None:
        log_denial(request, None, "login", Decision.UNAUTHENTICATED)
        return _login_page(
            request, next, status=401, error="That token is not valid: unknown, expired or revoked."
        )
    response = RedirectResponse(_safe_next(next), status_code=303)
    session = new_session(principal.name, principal.token_id)
    set_session_cookie(response, request, request.app.state.session_codec, session)
    return response


@router.post("/logout")
def logout(request: Request, csrf_token: str = Form("")) -> Response:
    """End the session: the cookie is removed and the browser goes to the login form."""
    session = _check_csrf(request, csrf_token)
    end_session(request.app.state.engine, session, request.app.state.session_codec.max_age)
    response = RedirectResponse("/login?logged_out=1", status_code=303)
    clear_session_cookie(response, request)
    return response


def _scope(principal: Principal) -> page_data.Scope:
    return page_data.Scope(client_scope(principal), sees_drafts(principal))


@router.get("/clients", response_class=HTMLResponse)
def clients_page(
    request: Request,
    q: SearchText = "",
    page: PageNumber = 1,
    per_page: int = Query(PER_PAGE, ge=1, le=500),
    month: str | None = Query(None, pattern=MONTH_PATTERN),
    plan: CatalogValue = "",
    segment: CatalogValue = "",
    manager: CatalogValue = "",
    sort: str | None = Query(None, max_length=40),
    order: str | None = Query(None, max_length=8),
    currency: CurrencyCode | None = None,
) -> Response:
    """The client list of a month (:mod:`tenantcost.service.client_list`), sortable,
    filtered and paged on the server, with its totals and CSV link."""
    from tenantcost.errors import InputError
    from tenantcost.service import client_list as listing
    from tenantcost.service.client_list_view import client_list_view
    from tenantcost.service.page_views import _search_hint

    principal = authorize(request, get_principal(request), Action.LIST_CLIENTS)
    engine = request.app.state.engine
    try:
        field, direction = listing.parse_sort(sort, order)
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
    query = listing.ListQuery(month, q.strip(), plan, segment, manager, field, direction,
                              page, per_page)  # fmt: skip
    found = listing.client_list(engine, principal, query, request.app.state.store)
    months = [str(m["month"]) for m in figures.months_document(engine, principal)]
    usage_only = not found.rows.empty and not bool(found.rows["statement"].all())
    hint = _search_hint(query.q, found.total, usage_only, sees_usage_clients(principal))
    from tenantcost.service.currency_view import conversion_notes, listed_conversions

    page_clients = [str(c) for c in found.rows["id"]]
    converted = listed_conversions(engine, found.run_id, page_clients, currency)
    internal = can(principal, Action.VIEW_INTERNAL_SHEET).allowed
    notes = conversion_notes(engine, found.run_id, {c["currency"] for c in converted.values()},
                             internal)  # fmt: skip
    view = client_list_view(engine, found, query, months,
                            listing.filter_values(engine, principal), hint, converted,
                            notes)  # fmt: skip
    return render(request, "service/clients.html", section="clients", search=view)


@router.get("/clients/{client_id}", response_class=HTMLResponse)
def client_page(
    request: Request,
    access: Annotated[ClientAccess, Depends(client_access)],
    month: str | None = Query(None, pattern=MONTH_PATTERN),
    currency: CurrencyCode | None = None,
) -> Response:
    """A client's month: figure, status, change notice, sheet, history, and its
    "Month to date, not issued" section from the month's latest watch run. A month of which
    the viewer may see no figure but whose watch has the client shows that section alone.
    Figures in ``?currency=`` (default the client's own currency in the catalog, else the
    stored ``presentation:``) where the month's run
    converted into it (:mod:`tenantcost.service.currency_view`)."""
    from tenantcost.service import page_views
    from tenantcost.service.watch_view import client_section
    from tenantcost.store.watch_snapshots import watched_months

    engine = request.app.state.engine
    scope = _scope(access.principal)
    rows = page_data.figures(engine, scope, [access.client])
    watched = tuple(watched_months(engine, access.client))  # the one view of an open month
    known = {r.month for r in rows} | set(watched)
    if not known or (month is not None and month not in known):
        raise not_found()
    from tenantcost.service.currency_view import converted_rows, fx_change, stored_presentation
    from tenantcost.store.catalog import currency_of, names_of

    rows = _shown_text(engine, access.principal, access.client, rows)
    name = names_of(engine, [access.client]).get(access.client)  # the client's own name only
    internal = can(access.principal, Action.VIEW_INTERNAL_SHEET, access.client).allowed
    shown_in = currency or currency_of(engine, access.client) or stored_presentation(engine)
    if shown_in:
        rows = converted_rows(engine, rows, shown_in, internal)
    view = page_views.client_view(access.client, rows, month, scope.drafts, name, watched,
                                  internal_sheet=internal)  # fmt: skip
    # in the figures' currency: converted, the ledger bridge's parts at the earlier month's
    # rate and the exchange rate's part (explain --currency's), adding up to the change
    changed = _changed(request, access, rows, view.month) if view.figure else None
    watch = client_section(engine, access.principal, access.client, view.month,
                           request.app.state.settings.store.watch)  # fmt: skip
    from tenantcost.service.trend import client_trend
    from tenantcost.service.trend_view import trend_section

    trend = trend_section(client_trend(engine, access.principal, access.client, 12, shown_in))
    figure = view.figure
    converted = (changed is not None and bool(changed.rows) and figure is not None
                 and figure.fx is not None and changed.currency == figure.currency)  # fmt: skip
    # "Change in EUR" says it in one line when the block below could not (no bridge)
    fx = fx_change(rows, view.month) if view.figure and not converted else None
    return render(request, "service/client.html", section="clients", view=view, changed=changed,
                  watch=watch, trend=trend, fx_change=fx)  # fmt: skip


def _changed(
    request: Request, access: ClientAccess, rows: list[page_data.FigureRow], month: str
) -> Any:
    """The month's "What changed" block (:mod:`tenantcost.service.what_changed`)."""
    from tenantcost.service.what_changed import what_changed

    store = request.app.state.store
    data = store.data if store is not None else None
    return what_changed(request.app.state.engine, access.principal, access.client, rows,
                        month, data)  # fmt: skip


def _shown_text(
    engine: Any, principal: Principal, client: str, rows: list[page_data.FigureRow]
) -> list[page_data.FigureRow]:
    """Each month with its free text as ``principal`` may read it (the API's
    :func:`figures.shown_fields`: ``reason``, ``issued_by``, ``rule_ids``), and
    ``client_reason``: for finance and admin, what the client reads of a restatement."""
    import json
    from dataclasses import replace

    from tenantcost.report.privacy import RESTATED_NOTE

    if not rows:
        return rows
    redact = figures.reader_text(engine, principal, client)
    out = []
    for row in rows:  # one client's months: a handful
        d = figures.shown_fields(redact, principal, row.reason, row.client_reason,
                                 row.issued_by, page_data.rule_ids(row.rule_ids))  # fmt: skip
        client_reason = (
            (d["client_reason"] or RESTATED_NOTE) if "client_reason" in d and d["reason"] else None
        )
        out.append(
            replace(
                row,
                reason=d["reason"],
                issued_by=d["issued_by"],
                rule_ids=json.dumps(d["rule_ids"]),
                client_reason=client_reason,
            )
        )
    return out


@router.get("/months", response_class=HTMLResponse)
def months_page(request: Request) -> Response:
    """Finance: every stored month with its coverage, runs and state; product: the months
    with an issued revision, their state and revisions only."""
    from tenantcost.service.memo import month_status

    principal = authorize(request, get_principal(request), Action.VIEW_ISSUED_MONTH)
    months = month_status(request.app.state.engine)
    workings = sees_month_workings(principal)
    if not workings:  # issued months, and months with a watch (month to date, not issued)
        from tenantcost.store.watch_snapshots import watched_month_list

        watched = set(watched_month_list(request.app.state.engine))
        months = [{f: m[f] for f in MANAGER_MONTH_FIELDS} for m in months
                  if m["revisions"] > 0 or m["month"] in watched]  # fmt: skip
    return render(request, "service/months.html", section="months", months=months,
                  workings=workings)  # fmt: skip


def _month_response(
    request: Request,
    month: str,
    *,
    page: int = 1,
    usage_page: int = 1,
    status: int = 200,
    **context: Any,
) -> Response:
    from tenantcost.service import page_views

    view = page_views.month_view(
        request.app.state.engine, month, page, request.app.state.store, usage_page
    )
    context.setdefault("message", "")
    context.setdefault("error", "")
    context.setdefault("confirm", None)
    context.setdefault("workings", True)
    context.setdefault("movers", None)  # a form's answer (409, 422) shows the month without them
    context.setdefault("trend", None)
    if "watch" not in context:
        from tenantcost.service.watch_view import month_section

        context["watch"] = month_section(request.app.state.engine, month,
                                         settings=request.app.state.settings.store.watch,
                                         alerts=True)  # fmt: skip
    return render(
        request, "service/month.html", section="months", status=status, view=view, **context
    )


@router.get("/months/{month}", response_class=HTMLResponse)
def month_page(
    request: Request,
    month: str,
    page: PageNumber = 1,
    usage_page: PageNumber = 1,
    done: str = Query(""),
    watch_sort: EntryOrder = EntryOrder.CLIENT,
    watch_page: PageNumber = 1,
) -> Response:
    """Finance: the month's cascade, waterfall, idle, clients under each key, close/reopen,
    run and batch provenance, usage totals per service and client. Product: the latest
    issued revision's cascade, waterfall, idle and clients under each key only. Both: the
    latest watch run's "Month to date, not issued" section, every client's
    projection against its band (``watch_sort``, ``watch_page``) and the anomalies; of a
    month never issued, product reads that section alone."""
    principal = authorize(request, get_principal(request), Action.VIEW_ISSUED_MONTH)
    _known_month(month)
    from tenantcost.service import page_views
    from tenantcost.service.watch_view import month_section

    engine = request.app.state.engine
    watch = (month_section(engine, month, watch_sort, watch_page,
                           request.app.state.settings.store.watch,
                           alerts=sees_month_workings(principal))
             if can(principal, Action.VIEW_WATCH).allowed else None)  # fmt: skip
    from tenantcost.service.movers import month_movers, movers_section

    store = request.app.state.store
    data = store.data if store is not None else None
    movers = movers_section(month_movers(engine, principal, month, 5, data), month)
    from tenantcost.service.month_trend import DEFAULT_MONTHS, month_trend, month_trend_section

    trend = month_trend_section(month_trend(engine, principal, month, DEFAULT_MONTHS))
    if not sees_month_workings(principal):
        view = page_views.issued_month_view(engine, month, page)
        if view is None and watch is not None:
            view = page_views.watch_only_month_view(engine, month)
        if view is None:
            raise not_found()  # never issued nor watched: nothing product may read
        return render(request, "service/month.html", section="months", view=view,
                      workings=False, message="", error="", confirm=None,
                      watch=watch, movers=movers, trend=trend)  # fmt: skip

    return _month_response(request, month, page=page, usage_page=usage_page,
                           message=page_views.done_message(done), watch=watch,
                           movers=movers, trend=trend)  # fmt: skip


@router.get("/pricing", response_class=HTMLResponse)
def pricing_page(
    request: Request,
    month: str | None = Query(None, pattern=MONTH_PATTERN),
    by: Literal["plan", "segment"] = Query("plan"),
    as_of: str | None = Query(None, max_length=64),
    page: PageNumber = 1,
    currency: CurrencyCode | None = None,
) -> Response:
    """Product, finance, admin: the unit economics of a month (:mod:`tenantcost.service.
    pricing`), the month the viewer's latest visible one by default, in ``?currency=``
    (default ``presentation:``) where the month's run converted into it."""
    from tenantcost.economics import GroupBy
    from tenantcost.errors import InputError
    from tenantcost.service import pricing

    principal = authorize(request, get_principal(request), Action.VIEW_PRICING)
    engine = request.app.state.engine
    months = [str(m["month"]) for m in figures.months_document(engine, principal)]
    month = month or (months[-1] if months else None)
    context: dict[str, Any] = {"months": months, "by": by, "by_choices": [str(g) for g in GroupBy],
                               "view": None, "error": ""}  # fmt: skip
    if month is None:
        context["error"] = "No month to price yet: no run has been issued."
        return render(request, "service/pricing.html", section="pricing", **context)
    try:
        at = pricing.as_of_time(as_of)
    except InputError as exc:
        context["error"] = str(exc)
        return render(request, "service/pricing.html", section="pricing", status=422, **context)
    try:
        priced = pricing.priced_month(engine, request.app.state.store, principal, month,
                                      GroupBy(by), at, currency)  # fmt: skip
    except InputError as exc:
        context["error"] = str(exc)
        return render(request, "service/pricing.html", section="pricing", status=409, **context)
    if priced is None:
        raise not_found()
    context["view"] = pricing.page_context(priced, months, page, as_of or "")
    context["view"] |= {"cost_svg": Markup(context["view"]["cost_svg"]),
                        "margin_svg": Markup(context["view"]["margin_svg"])}  # fmt: skip
    from tenantcost.service.plan_margins import DEFAULT_MONTHS, margins_section, plan_margins

    found = plan_margins(engine, request.app.state.store, principal, month, DEFAULT_MONTHS,
                         GroupBy(by))  # fmt: skip
    context["margins"] = margins_section(found, month)
    return render(request, "service/pricing.html", section="pricing", **context)


@router.get("/months/{month}/finance-summary.html")
def finance_summary_html(
    request: Request, month: str, currency: CurrencyCode | None = None
) -> Response:
    """Finance: the month's finance summary as the month page shows its run (the issued
    revision, or the draft marked as such), HTML; ``?currency=`` one the run converted into
    (else 404)."""
    return _finance_summary(request, month, "html", currency)


@router.get("/months/{month}/finance-summary.pdf")
def finance_summary_pdf(
    request: Request, month: str, currency: CurrencyCode | None = None
) -> Response:
    """Finance: the month's finance summary, PDF (a download)."""
    return _finance_summary(request, month, "pdf", currency)


def _finance_summary(
    request: Request, month: str, fmt: str, currency: str | None = None
) -> Response:
    """The summary of the run ``principal`` may see for ``month`` (drafts for those who see
    drafts; else the latest issued revision); 404 when there is none."""
    from tenantcost.errors import InputError
    from tenantcost.service.sheets import render_summary

    principal = authorize(request, get_principal(request), Action.VIEW_CLUSTER)
    _known_month(month)
    engine = request.app.state.engine
    source = figures.month_source(engine, principal, month)
    if source is None:
        raise not_found()
    store = request.app.state.store
    try:
        return render_summary(engine, source, fmt, store.data if store is not None else None,
                              currency)  # fmt: skip
    except InputError as exc:  # e.g. a run recorded before its figures were stored (0007)
        return _month_response(request, month, status=409, error=str(exc))


def _known_month(month: str) -> None:
    """A month the service accepts, else: a path that is not ``YYYY-MM`` at all is no page
    (the 404 page); a month outside 2000-01 .. 2099-12 is refused, 422 with its one line
    (:func:`tenantcost.month.parse_month`), like every route with a month."""
    import re

    from tenantcost.errors import InputError

    if not re.fullmatch(r"[0-9]{4}-(0[1-9]|1[0-2])", month):
        raise not_found()
    try:
        parse_month(month, "month")
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None


@router.post("/months/{month}/close", response_class=HTMLResponse)
def close_month_form(
    request: Request,
    month: str,
    csrf_token: str = Form(""),
    allow_incomplete: str = Form(""),
    confirmed: str = Form(""),
    force: str = Form(""),
) -> Response:
    """Close the month (issues the next revision) and show it. Closing an incomplete month
    takes two steps: the box ticked, then the confirmation listing the missing hours
    (``confirmed``); ``force`` issues a revision that changes nothing."""
    principal = authorize(request, get_principal(request), Action.CLOSE_MONTH)
    _check_csrf(request, csrf_token)
    _known_month(month)
    from tenantcost.errors import InputError
    from tenantcost.store.cycle import (
        MonthState,
        NothingChanged,
        close_month,
        incomplete_note,
        month_state,
    )
    from tenantcost.store.lock import StoreLocked

    store = request.app.state.store
    if store is None:
        return _month_response(
            request,
            month,
            status=409,
            error="The service has no data directory: it cannot run a month.",
        )
    engine = request.app.state.engine
    if allow_incomplete and not confirmed and month_state(engine, month) is MonthState.OPEN:
        note = incomplete_note(engine, month)
        if note is not None:
            return _confirm_response(request, month, note, bool(force))
    try:
        closed = close_month(
            store,
            month,
            allow_incomplete=bool(allow_incomplete),
            actor=principal.actor,
            wait=request.app.state.settings.ingest_wait,
            force=bool(force),
        )
    except NothingChanged as exc:
        hint = " On this page: tick “Close even though nothing changed”."
        return _month_response(request, month, status=409, error=str(exc) + hint)
    except InputError as exc:
        return _month_response(request, month, status=409, error=str(exc))
    except StoreLocked:
        return _month_response(request, month, status=503, error=LOCKED)
    from tenantcost.service.bridge_view import cache_in_background

    cache_in_background(request.app.state.engine, month, store.data)
    return RedirectResponse(f"/months/{month}?done=closed-{closed.revision}", status_code=303)


def _confirm_response(request: Request, month: str, note: str, force: bool) -> Response:
    """The month page with the incomplete close's confirmation step instead of its form."""
    from tenantcost.service import page_views

    confirm = page_views.close_confirmation(request.app.state.engine, month, note, force)
    return _month_response(request, month, confirm=confirm)


@router.post("/months/{month}/reopen", response_class=HTMLResponse)
def reopen_month_form(
    request: Request,
    month: str,
    csrf_token: str = Form(""),
    reason: str = Form(""),
    client_reason: str = Form(""),
) -> Response:
    """Reopen the month with a reason (required) for corrections, and optionally the reason
    clients read (else "restated by finance")."""
    principal = authorize(request, get_principal(request), Action.REOPEN_MONTH)
    _check_csrf(request, csrf_token)
    _known_month(month)
    from tenantcost.errors import InputError
    from tenantcost.store.cycle import reopen_month
    from tenantcost.store.lock import StoreLocked

    if not reason.strip():
        return _month_response(
            request,
            month,
            status=422,
            error="Give a reason: finance and admin read it with the restated statements.",
        )
    if (problem := text_problem(reason)) is not None:  # NUL: PostgreSQL cannot store it
        return _month_response(request, month, status=422, error=f"The reason {problem}.")
    try:
        reopen_month(
            request.app.state.engine,
            month,
            reason=reason.strip(),
            actor=principal.actor,
            wait=request.app.state.settings.ingest_wait,
            client_reason=client_reason,
        )
    except InputError as exc:
        return _month_response(request, month, status=409, error=str(exc))
    except StoreLocked:
        return _month_response(request, month, status=503, error=LOCKED)
    return RedirectResponse(f"/months/{month}?done=reopened", status_code=303)
