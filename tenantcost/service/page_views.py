"""Display models of the pages: the store's figures (micro-units) as a person reads them.

Amounts are shown like the report pack shows them (:mod:`tenantcost.report.display`): the
currency's decimals, raised for tiny amounts so none reads 0.00; a table's lines are
rounded together with its total so they add up. Charts are the report pack's inline SVG
(:mod:`tenantcost.report.charts`), with a title and description for screen readers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import pandas as pd
from markupsafe import Markup
from sqlalchemy import Engine

from tenantcost.money import MINOR_UNIT_EXPONENT
from tenantcost.report.charts import Bar, Step, bar_chart, waterfall
from tenantcost.report.display import (
    auto_places,
    format_amount,
    format_column,
    format_share,
    format_units,
    key_label,
)
from tenantcost.report.invoice_view import InvoiceView, invoice_view
from tenantcost.report.sheet_view import SheetView
from tenantcost.service import page_data
from tenantcost.service.month_close import MonthClose, month_close
from tenantcost.service.month_usage import UsageView, usage_view
from tenantcost.service.page_data import FigureRow
from tenantcost.service.urls import api_client_path, client_href
from tenantcost.store import shown as shown_figures
from tenantcost.store.data import Store
from tenantcost.timefmt import utc

PER_PAGE_CHOICES = (25, 50, 100, 200, 500)
MONTH_CLIENTS_PER_PAGE = 100


def _places(currency: str, smallest: Any) -> int:
    """The decimals the run's sheets use (from its smallest non-zero client amount)."""
    return auto_places(currency, [] if smallest is None or pd.isna(smallest) else [int(smallest)])


def shown_amount(row: FigureRow, places: int) -> str:
    """A client's figure of a run as every page and sheet of the run shows it (the ``shown``
    of :func:`tenantcost.service.page_data.figures`: the run's one rounding)."""
    if row.shown is None:
        return format_amount(int(row.amount), places)
    return format_units(int(row.shown), places)


def figure_places(row: FigureRow) -> int:
    """The decimals a month's figure row is shown at (its run's sheets': the display rule's,
    frozen by its close)."""
    if row.places is not None:
        return row.places
    return _places(str(row.currency), row.smallest)


def when(value: Any) -> str:
    """A stored instant as people read it: ``2026-11-30 17:29:19 UTC``."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    return f"{utc(value):%Y-%m-%d %H:%M:%S} UTC"


@dataclass(frozen=True)
class SearchRow:
    client: str
    href: str
    month: str | None
    amount: str | None
    currency: str | None
    status: str | None
    name: str | None = None
    """The catalog's name of the client (None: not in the catalog, or unnamed)."""
    statement: bool = True
    """False: known from stored usage alone, no run yet (shown "no statement yet", no link:
    the client has no page until a run)."""


@dataclass(frozen=True)
class SearchView:
    q: str
    page: int
    per_page: int
    pages: int
    total: int
    rows: list[SearchRow]
    summary: str
    prev_href: str | None
    next_href: str | None
    per_page_choices: tuple[int, ...] = PER_PAGE_CHOICES
    hint: str | None = None
    """What to run: on an empty list (nothing to show yet), or under a list with clients of
    usage alone."""


def search_view(
    q: str,
    page: int,
    per_page: int,
    total: int,
    ids: list[str],
    figures: list[FigureRow],
    names: dict[str, str] | None = None,
    usage_only: set[str] | None = None,
    sees_usage: bool = False,
) -> SearchView:
    """The search page: each listed client's latest visible month, and its catalog name;
    ``usage_only``: the clients of this page known from stored usage alone (no run yet);
    ``sees_usage``: the reader lists such clients (finance, admin), which decides what an
    empty list tells it to run."""
    names = names or {}
    usage_only = usage_only or set()
    latest = {f.client: f for f in figures}  # in (client, month) order: the last month wins
    rows = []
    for client in ids:  # one page (at most 500 rows): display only, the query did the work
        if client in latest:
            f = latest[client]
            rows.append(
                SearchRow(
                    client,
                    client_href(client),
                    f.month,
                    shown_amount(f, figure_places(f)),
                    f.currency,
                    f.status,
                    names.get(client),
                )
            )
        else:
            rows.append(SearchRow(client, client_href(client), None, None, None, None,
                                  names.get(client), client not in usage_only))  # fmt: skip
    pages = max(1, math.ceil(total / per_page))

    def href(n: int) -> str:
        return "/clients?" + urlencode({"q": q, "page": n, "per_page": per_page})

    first = (page - 1) * per_page + 1
    summary = (
        f"{total:,} client{'s' if total != 1 else ''}"
        + (f" matching “{q}”" if q else "")
        + (f", showing {first:,} to {first + len(ids) - 1:,}" if ids else "")
    )
    return SearchView(
        q,
        page,
        per_page,
        pages,
        total,
        rows,
        summary,
        href(page - 1) if page > 1 else None,
        href(page + 1) if page < pages else None,
        hint=_search_hint(q, total, bool(usage_only), sees_usage),
    )


def _search_hint(q: str, total: int, usage_only: bool, sees_usage: bool) -> str | None:
    """What to run next, when the list shows nothing yet or clients without a statement."""
    if usage_only:
        return (
            "Clients marked “no statement yet” have stored usage but no run: "
            "`tenantcost run --month YYYY-MM` allocates their month (with its costs "
            "ingested), and `tenantcost close --month YYYY-MM` issues their statements."
        )
    if total or q:
        return None
    if sees_usage:
        return (
            "No clients yet: the store holds no usage, run or statement. Ingest usage "
            "(`tenantcost ingest usage`, or the meter: docs/meter.md) and costs "
            "(`tenantcost ingest costs`), then `tenantcost run --month YYYY-MM`."
        )
    return (
        "No statements issued yet: clients appear here once finance closes a month "
        "(`tenantcost run --month YYYY-MM`, then `tenantcost close --month YYYY-MM`)."
    )


@dataclass(frozen=True)
class Figure:
    amount: str
    currency: str
    status: str
    revision: int | None
    run_id: str
    reason: str | None
    incomplete: bool
    issued_at: str
    issued_by: str
    rule_ids: list[str]
    issued_note: str = ""
    clients_read: str | None = None
    """Finance's view: what the client reads instead of ``reason``."""
    fx: Any = None
    """A converted figure: how (:class:`tenantcost.service.currency_view.FigureFx`)."""


@dataclass(frozen=True)
class HistoryRow:
    month: str
    href: str
    amount: str
    currency: str
    status: str
    revision: int | None
    reason: str | None


@dataclass(frozen=True)
class Notice:
    title: str
    text: str


@dataclass(frozen=True)
class SheetLinks:
    html: str
    pdf: str
    md: str
    internal: SheetLinks | None = None
    """The internal view's links (``?view=internal``: confidence, other keys, input files,
    reproduce command), for a reader :attr:`Action.VIEW_INTERNAL_SHEET` allows; else None."""


@dataclass(frozen=True)
class ClientView:
    client: str
    base_href: str
    month: str
    months: list[str]
    drafts: bool
    figure: Figure | None
    notices: list[Notice]
    sheet: SheetLinks
    history: list[HistoryRow]
    history_svg: Markup
    name: str | None = None
    """The catalog's name of the client (None: not in the catalog, or unnamed)."""
    statement: bool = True
    """False: known from stored usage alone, no run yet (shown "no statement yet", no link:
    the client has no page until a run)."""


def client_view(
    client: str,
    rows: list[FigureRow],
    month: str | None,
    drafts: bool,
    name: str | None = None,
    watched: tuple[str, ...] = (),
    internal_sheet: bool = False,
) -> ClientView:
    """The client page for ``month`` (default: the latest month with a figure or a watch).
    ``watched``: months whose latest watch run has the client; such a month
    without a figure the viewer may see has no figure, notices or sheet: only its watch.
    ``internal_sheet``: the reader may open the sheet's internal view (permissions decide)."""
    months = sorted({r.month for r in rows} | set(watched))
    chosen = month or months[-1]
    figure, notices = None, []
    at = next((i for i, r in enumerate(rows) if r.month == chosen), None)
    if at is not None:
        places = figure_places(rows[at])
        figure, notices = _figure(rows[at], places), _notices(rows, at, places)
    base = api_client_path(client, "months", chosen, "sheet")
    # a figure shown converted links to its sheet in the same currency, as the run converted it
    converted = at is not None and rows[at].ledger is not None
    query = f"?currency={rows[at].currency}" if converted and at is not None else ""
    internal = (query + "&" if query else "?") + "view=" + SheetView.INTERNAL
    sheet = SheetLinks(f"{base}.html{query}", f"{base}.pdf{query}", f"{base}.md{query}",
                       SheetLinks(f"{base}.html{internal}", f"{base}.pdf{internal}",
                                  f"{base}.md{internal}") if internal_sheet else None)  # fmt: skip
    history = [
        HistoryRow(
            r.month,
            client_href(client, r.month),
            shown_amount(r, figure_places(r)),
            r.currency,
            r.status,
            r.revision,
            r.reason,
        )
        for r in rows
    ]
    return ClientView(
        client,
        client_href(client),
        chosen,
        months,
        drafts,
        figure,
        notices,
        sheet,
        history,
        _history_chart(client, rows) if history else Markup(""),
        name,
    )


def _figure(row: FigureRow, places: int) -> Figure:
    return Figure(
        amount=shown_amount(row, places),
        currency=row.currency,
        status=row.status,
        revision=row.revision,
        run_id=row.run_id,
        reason=row.reason,
        incomplete=bool(row.incomplete),
        issued_at=when(row.issued_at),
        issued_by=str(row.issued_by or ""),
        rule_ids=page_data.rule_ids(row.rule_ids),
        issued_note="the month is open",
        clients_read=row.client_reason,
        fx=row.fx,
    )


def _notices(rows: list[FigureRow], at: int, places: int) -> list[Notice]:
    """For a restated month, what changed since the last revision (``rows[at]``: the month
    shown). The change since the previous month is the page's one "What changed" block
    (:mod:`tenantcost.service.what_changed`), not a notice."""
    shown = rows[at]
    row = shown.ledger or shown  # the issued (ledger) revision
    revision = row.revision
    if revision is None or revision <= 1:
        return []
    change = _signed(row.difference or 0, figure_places(row) if shown.ledger else places)
    text = f"{change} {row.currency}"
    if shown.ledger is not None and shown.difference is not None:
        text = f"{_signed(shown.difference, places)} {shown.currency}; in the ledger {text}"
    return [
        Notice(
            f"Restated: revision {revision}",
            f"Revision {revision} replaces revision {revision - 1} of {row.month}: {text}. "
            f"Reason: {row.reason or 'not given'}.",
        )
    ]


def _signed(difference: int, places: int) -> str:
    sign = "+" if difference > 0 else "-" if difference < 0 else "±"
    return f"{sign}{format_amount(abs(difference), places)}"


def _history_chart(client: str, rows: list[FigureRow]) -> Markup:
    unit = 10**MINOR_UNIT_EXPONENT
    bars = [
        Bar(
            f"{r.month}{' (draft)' if r.status == 'draft' else ''}",
            int(r.amount) / unit,
            f"{shown_amount(r, figure_places(r))} {r.currency}",
            r.status == "draft",
        )
        for r in rows
    ]
    svg = bar_chart(
        "history-chart",
        f"{client}: amount per month",
        f"One bar per month, {len(bars)} month(s); the table below lists the same figures.",
        bars,
    )
    return Markup(svg)  # the chart module escapes every text


def done_message(done: str) -> str:
    """The confirmation after a close or reopen redirect (``closed-N``, ``reopened``)."""
    if done.startswith("closed-") and done.removeprefix("closed-").isdigit():
        return f"Closed: revision {done.removeprefix('closed-')} issued."
    if done == "reopened":
        return "Reopened: the month is open for corrections."
    return ""


GAP_ROWS_SHOWN = 50
"""Spans of missing hours listed on the close confirmation at most (the note counts all)."""


@dataclass(frozen=True)
class GapRow:
    kind: str
    start: str
    end: str
    hours: str


@dataclass(frozen=True)
class CloseConfirmation:
    """The step between ticking "close even though hours are missing" and the close: what
    the statements would say, and the missing spans, so one click never issues an
    incomplete revision."""

    note: str
    gaps: list[GapRow]
    more: int
    force: bool


def close_confirmation(engine: Engine, month: str, note: str, force: bool) -> CloseConfirmation:
    """The confirmation of an incomplete close: ``note`` as the statements will carry it
    (:func:`tenantcost.store.cycle.incomplete_note`) and the spans lacking costs or usage."""
    from tenantcost.store.status import missing_hours

    missing = missing_hours(engine, month)
    spans = [frame.assign(kind=kind) for kind, frame in missing.gaps.items() if not frame.empty]
    both = (
        pd.concat(spans, ignore_index=True)
        if spans
        else pd.DataFrame(columns=["start", "end", "kind"])
    )
    shown = both.head(GAP_ROWS_SHOWN)
    hour = pd.Timedelta(hours=1)
    rows = [
        GapRow(str(r.kind), when(r.start), when(r.end), f"{(r.end - r.start) / hour:g}")
        for r in shown.itertuples()
    ]  # at most GAP_ROWS_SHOWN rows: display only
    return CloseConfirmation(note, rows, len(both) - len(shown), force)


@dataclass(frozen=True)
class CascadeRow:
    name: str
    amount: str
    share: str
    detail: str | None


@dataclass(frozen=True)
class KeyRow:
    client: str
    href: str
    amounts: list[str]
    issued: str = ""
    name: str | None = None
    """The catalog's name of the client (None: not in the catalog, or unnamed)."""
    statement: bool = True
    """False: known from stored usage alone, no run yet (shown "no statement yet", no link:
    the client has no page until a run)."""


@dataclass(frozen=True)
class RunView:
    run_id: str
    draft: bool
    currency: str
    cascade: list[CascadeRow]
    waterfall_svg: Markup
    idle_ratio: str
    """Idle before distribution, as a share of the OpenCost total (the cluster's cost)."""
    idle_of_reference: str
    """The cascade's idle line, as a share of the reference total (the table's column)."""
    keys: list[str]
    clients: list[KeyRow]
    key_totals: list[str]
    clients_summary: str
    prev_href: str | None
    next_href: str | None
    started_at: str
    finished_at: str
    actor: str
    rule_ids: list[str]
    rule_file_sha256: str
    code_version: str
    key_override: str | None
    batches: list[dict[str, Any]]
    issued_column: bool = False
    issued_total: str = ""
    invoice: InvoiceView | None = None
    """The invoice cascade and the repricing recorded with the run (billing data), if any."""
    issued_as: int | None = None
    """The latest revision a close issued the run as; ``None``: a draft."""


@dataclass(frozen=True)
class MonthView:
    month: str
    state: str
    revision: int
    hours: Any
    costs_hours: Any
    usage_hours: Any
    incomplete: bool
    events: list[dict[str, Any]]
    run: RunView | None
    usage: UsageView | None = None
    """The month's usage totals per service and client (one page); ``None`` without a data
    directory."""
    close: MonthClose | None = None
    """Finance's first screen (:mod:`tenantcost.service.month_close`); ``None`` for product."""


def month_view(
    engine: Engine, month: str, page: int, store: Store | None = None, usage_page: int = 1
) -> MonthView:
    """The finance month page: state, events, the issued (closed) or latest (draft) run, and
    the usage totals (:mod:`tenantcost.service.month_usage`). Everything it shows is the
    store's and changes only with its generation, so it is built once per generation, month
    and page, and kept (:mod:`tenantcost.service.memo`: do not mutate)."""
    from tenantcost.service.memo import remembered

    data = None if store is None else str(store.data.root)
    return remembered(engine, "month_view", (month, page, usage_page, data),
                      lambda: _month_view(engine, month, page, store, usage_page))  # fmt: skip


def _month_view(
    engine: Engine, month: str, page: int, store: Store | None, usage_page: int
) -> MonthView:
    from tenantcost.service.memo import month_status
    from tenantcost.store.cycle import latest_issued

    status = month_status(engine, month)[0]
    events = page_data.month_events(engine, month)
    issued = latest_issued(engine, month)
    closed = status["state"] == "closed"
    run_id = (
        issued.run_id if closed and issued is not None else page_data.latest_run_id(engine, month)
    )
    run = _run_view(engine, month, run_id, page) if run_id else None
    hours = status["hours"]
    return MonthView(
        month,
        str(status["state"]),
        int(status["revisions"]),
        hours,
        status["costs_hours"],
        status["usage_hours"],
        incomplete=status["costs_hours"] != hours or status["usage_hours"] != hours,
        events=[
            {
                **e,
                "at": when(e["at"]),
                "reason": e["reason"] if isinstance(e["reason"], str) else None,
                "clients_read": _clients_read(e["reason"], e["client_reason"]),
            }
            for e in events.to_dict("records")
        ],
        run=run,
        usage=usage_view(store, month, usage_page, page),
        close=month_close(engine, month, run_id),
    )


def issued_month_view(engine: Engine, month: str, page: int) -> MonthView | None:
    """The month page as product reads it: the latest issued revision's run (also while the
    month is reopened), without finance's workings (coverage, events, batches, usage, the
    invoice cascade); ``None`` when no close ever issued the month."""
    from tenantcost.service.memo import month_status
    from tenantcost.store.cycle import latest_issued

    issued = latest_issued(engine, month)
    if issued is None:
        return None
    status = month_status(engine, month)[0]
    run = replace(_run_view(engine, month, issued.run_id, page), batches=[], invoice=None)
    return MonthView(month, str(status["state"]), int(status["revisions"]), None, None, None,
                     incomplete=False, events=[], run=run)  # fmt: skip


def watch_only_month_view(engine: Engine, month: str) -> MonthView:
    """The month page of a month never issued, as product reads it: its state only, for the
    watch section beside it (month to date, not issued)."""
    from tenantcost.service.memo import month_status

    status = month_status(engine, month)[0]
    return MonthView(month, str(status["state"]), int(status["revisions"]), None, None, None,
                     incomplete=False, events=[], run=None)  # fmt: skip


def _clients_read(reason: Any, client_reason: Any) -> str | None:
    """What clients read of an event's reason (finance's month page), if it has one."""
    from tenantcost.report.privacy import RESTATED_NOTE

    if not isinstance(reason, str):
        return None
    return client_reason if isinstance(client_reason, str) else RESTATED_NOTE


def _run_view(engine: Engine, month: str, run_id: str, page: int) -> RunView:
    """The run's figures; a draft only if no close issued it (after a reopen, the page shows
    the issued run until a new run, labelled with its revision)."""
    facts = page_data.run_facts(engine, run_id)
    issued = page_data.issued_as(engine, run_id)
    run = facts.run
    currency = str(run["currency"])
    reference = int(run["reference_total"])
    run_shown = shown_figures.run_shown(engine, run_id)
    places = run_shown.places
    shown = [format_units(u, places) for u in run_shown.cascade]
    reference_text = format_units(run_shown.reference, places)
    cascade = [
        CascadeRow(
            str(r.name),
            a,
            format_share(int(r.amount) / reference) if reference else "-",
            r.detail if isinstance(r.detail, str) else None,
        )
        for r, a in zip(facts.cascade.itertuples(), shown, strict=True)
    ]
    invoice = page_data.stored_invoice(run)
    cascade += _cascade_foot(facts, reference, reference_text, places, invoice is not None)
    cost_total = facts.cost_total or reference
    idle = (
        format_share(facts.idle_before / cost_total)
        if facts.idle_before is not None and cost_total
        else "-"
    )
    lines = facts.cascade
    idle_line = lines[(lines["kind"] == "residual") & (lines["name"] == "idle")]
    idle_of_reference = (
        format_share(int(idle_line["amount"].iloc[0]) / reference)
        if len(idle_line) and reference
        else "-"
    )
    keyed = _keys_table(engine, run_id, month, page, run_shown)
    return RunView(
        run_id=run_id,
        draft=issued is None,
        currency=currency,
        cascade=cascade,
        waterfall_svg=_waterfall(facts.cascade, reference, shown, reference_text, currency),
        idle_ratio=idle,
        idle_of_reference=idle_of_reference,
        keys=keyed.keys,
        clients=keyed.rows,
        key_totals=keyed.totals,
        clients_summary=keyed.summary,
        prev_href=keyed.prev_href,
        next_href=keyed.next_href,
        started_at=when(run["started_at"]),
        finished_at=when(run["finished_at"]),
        actor=str(run["actor"]),
        rule_ids=page_data.rule_ids(run["rule_ids"]),
        rule_file_sha256=str(run["rule_file_sha256"]),
        code_version=str(run["code_version"]),
        key_override=run["key_override"],
        batches=[
            {**b, "created_at": when(b["created_at"])} for b in facts.batches.to_dict("records")
        ],
        invoice=invoice_view(invoice, places),
        issued_as=issued,
    )


def _cascade_foot(
    facts: page_data.RunFacts, reference: int, reference_text: str, places: int, billed: bool
) -> list[CascadeRow]:
    """The reference total (what it is made of, rounded to add up to it) and the gap, as
    ``allocate`` prints them: the gap is the run's recorded one, computed, not assumed."""
    basis = "billed effective cost in scope" if billed else "OpenCost total"
    detail = None
    if facts.external_total is not None:
        external = facts.external_total
        (cost_text, external_text), _ = format_column([reference - external, external], places)
        detail = f"{basis} {cost_text} + external {external_text}"
    gap = int(facts.run["gap"])
    return [
        CascadeRow("reference total", reference_text, format_share(1.0) if reference else "-",
                   detail),
        CascadeRow("gap", format_amount(gap, places), "", "closes" if gap == 0 else
                   "DOES NOT CLOSE"),
    ]  # fmt: skip


@dataclass(frozen=True)
class KeysTable:
    """One page of the run's clients under each key, with the totals and the paging."""

    keys: list[str]
    rows: list[KeyRow]
    totals: list[str]
    summary: str
    prev_href: str | None
    next_href: str | None


def _keys_table(
    engine: Engine, run_id: str, month: str, page: int, run: shown_figures.RunShown
) -> KeysTable:
    """The page's clients with their figures as every sheet of the run shows them, and each
    key's total: the sum of all its displayed clients (:mod:`tenantcost.store.shown`)."""
    per_page = MONTH_CLIENTS_PER_PAGE
    places = run.places
    wide, _, count = page_data.run_clients_page(engine, run_id, page, per_page)
    from tenantcost.store.catalog import names_of

    keys = [c for c in wide.columns if c != "client"] or ["rule"]
    names = names_of(engine, [str(c) for c in wide["client"]])  # this page's clients: one query
    units = run.clients.reindex(index=wide["client"].astype(str), columns=keys)
    rows = [
        KeyRow(
            client,
            client_href(client, month),
            [format_units(int(u), places) if not pd.isna(u) else "-" for u in amounts],
            name=names.get(client),
        )
        for client, amounts in zip(units.index, units.to_numpy().tolist(), strict=True)
    ]  # one page of clients (at most 100): display only
    totals = run.totals()
    key_totals = [format_units(totals[k], places) if k in totals else "-" for k in keys]
    pages = max(1, math.ceil(count / per_page))
    first = (page - 1) * per_page + 1
    shown = f", showing {first:,} to {first + len(rows) - 1:,}" if rows else ""

    def href(n: int) -> str:
        return f"/months/{month}?page={n}"

    return KeysTable(
        ["the rule" if k == "rule" else key_label(k) for k in keys],
        rows,
        key_totals,
        f"{count:,} clients{shown}",
        href(page - 1) if page > 1 else None,
        href(page + 1) if page < pages else None,
    )


def _waterfall(
    cascade: pd.DataFrame, reference: int, shown: list[str], reference_text: str, currency: str
) -> Markup:
    unit = 10**MINOR_UNIT_EXPONENT
    steps, running = [], 0
    for row, text in zip(cascade.itertuples(), shown, strict=True):
        steps.append(Step(str(row.name), running / unit, (running + int(row.amount)) / unit, text))
        running += int(row.amount)
    steps.append(Step("reference total", 0.0, reference / unit, reference_text, total=True))
    svg = waterfall(
        "cascade-chart",
        "Reconciliation cascade",
        f"Each line of the cascade in {currency}, stacked from zero to the "
        f"reference total ({reference_text}).",
        steps,
    )
    return Markup(svg)  # the chart module escapes every text
