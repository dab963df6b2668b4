"""The month-close dashboard: what finance (and admin) read on the first screen of a month.

Finance opens a month to answer one question: can it be closed, and what would the close
issue? The month page used to open on its state and a red Reopen form, with the cascade and
the gap below the fold and the invoice cascade some 2,000 px down. This module builds the
part of the page that answers that question at 1366 x 768 without scrolling, as one display
model (:class:`MonthClose`), from figures the store already holds:

* **the strip**: the last :data:`STRIP_MONTHS` months up to this one, each with its state
  (``open``, ``closed``, or ``reopened``: open with a revision issued before) and its latest
  revision, linked, so finance moves between months without the months list;
* **the headline**: the reference total and the gap of the run the page shows (the cascade's
  own foot, so the two can never disagree), the invoice total and its gap when the run has
  billing data, and the coverage of costs, usage and billing in hours;
* **what blocks a close**: each reason in words (a closed month, a month with no run, missing
  hours or billing, a cascade that does not close, a reopened month where nothing changed):
  the same checks ``close`` makes, read, never run;
* **the close preview** of a reopened month: each client whose amount the next revision
  would change, issued amount -> new amount and the change, largest changes first. It reads
  the latest (draft) run's client amounts against the statements of the issued revision (the
  comparison ``close`` makes before it refuses a revision that changes nothing), so finance
  sees what it restates before it restates it;
* **the invoice waterfall**: the invoice cascade (:mod:`tenantcost.report.invoice_view`) as a
  chart next to its table, from the run's recorded ``invoice`` object.

The page's figures change only with the store's generation, so the whole model is kept per
generation (:mod:`tenantcost.service.memo`). Everything is computed per month or per run with
a few queries and pandas on whole columns: a 10,000-client month costs two frames of
10,000 rows, never a query per client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from markupsafe import Markup
from sqlalchemy import Engine, select

from tenantcost.money import MINOR_UNIT_EXPONENT
from tenantcost.report.charts import Step, waterfall
from tenantcost.report.display import format_amount, format_units
from tenantcost.report.invoice_view import InvoiceView, invoice_view
from tenantcost.service.urls import client_href

STRIP_MONTHS = 6
"""Months the strip shows: this month and the five before it that the store knows."""
PREVIEW_ROWS = 50
"""Clients the close preview lists at most (largest changes first; the count says how many)."""


class StripState(StrEnum):
    """A month's state as the strip reads it."""

    OPEN = "open"
    """Never closed."""
    CLOSED = "closed"
    """Closed: its latest revision is what clients read."""
    REOPENED = "reopened"
    """Open again after a close: the next close issues a restatement."""


@dataclass(frozen=True)
class StripMonth:
    month: str
    href: str
    state: StripState
    revision: int
    current: bool


@dataclass(frozen=True)
class CoverageItem:
    """One input's coverage of the month, in hours."""

    name: str
    text: str
    complete: bool | None
    """``None``: nothing to be complete about (no billing data is not a gap)."""


@dataclass(frozen=True)
class PreviewRow:
    client: str
    href: str
    name: str | None
    issued: str
    new: str
    change: str
    rise: bool
    """The amount goes up (shown with a sign and a word, never by colour alone)."""


@dataclass(frozen=True)
class ClosePreview:
    """What the next close of a reopened month would restate, client by client."""

    revision: int
    """The issued revision the preview compares with."""
    next_revision: int
    run_id: str
    rows: list[PreviewRow]
    changed: int
    """Clients whose amount would change (the rows are the first :data:`PREVIEW_ROWS`)."""
    summary: str


@dataclass(frozen=True)
class ConvertedTotal:
    """The reference total in a currency the run converted into, with how, and where the
    month's finance summary in that currency is."""

    text: str
    currency: str
    summary_href: str


@dataclass(frozen=True)
class MonthClose:
    """The month page's first screen (finance, admin)."""

    strip: list[StripMonth]
    state: StripState
    currency: str
    reference_total: str | None
    """``None``: no run of the month yet."""
    gap: str | None
    gap_closes: bool
    invoice_total: str | None
    """The billed total of the run's invoice cascade (``None``: no billing data)."""
    invoice_gap: str | None
    invoice_closes: bool
    coverage: list[CoverageItem]
    blockers: list[str]
    """Why the month cannot be closed as it is, in words (empty: a close would go through)."""
    preview: ClosePreview | None
    invoice_waterfall: Markup
    converted: list[ConvertedTotal] = field(default_factory=list)
    """The reference total in each currency the run converted into, with how: what the
    month's close issues in those currencies (:mod:`tenantcost.store.run_fx`)."""


def _hours(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def strip(months: list[dict[str, Any]], month: str) -> list[StripMonth]:
    """The last :data:`STRIP_MONTHS` months of ``months`` (``month_status``'s objects) up to
    ``month``, oldest first; ``month`` is always one of them."""
    known = sorted({str(m["month"]) for m in months} | {month})
    shown = [m for m in known if m <= month][-STRIP_MONTHS:]
    by_month = {str(m["month"]): m for m in months}
    out = []
    for name in shown:  # at most STRIP_MONTHS
        status = by_month.get(name, {"state": "open", "revisions": 0})
        revision = int(status["revisions"])
        state = (StripState.CLOSED if status["state"] == "closed"
                 else StripState.REOPENED if revision else StripState.OPEN)  # fmt: skip
        out.append(StripMonth(name, f"/months/{name}", state, revision, name == month))
    return out


def _coverage(status: Mapping[str, Any]) -> list[CoverageItem]:
    hours = status["hours"]
    items = [
        CoverageItem(kind, f"{_hours(status[f'{kind}_hours'])} of {_hours(hours)} h",
                     status[f"{kind}_hours"] == hours)
        for kind in ("costs", "usage")
    ]  # fmt: skip
    billing = status.get("billing")
    if billing is None:
        items.append(CoverageItem("billing", "no billing data", None))
    else:
        items.append(CoverageItem("billing", f"{_hours(billing['hours'])} of {_hours(hours)} h",
                                  bool(billing["complete"])))  # fmt: skip
    return items


def _blockers(
    engine: Engine,
    month: str,
    state: StripState,
    status: Mapping[str, Any],
    gap: int | None,
    preview: ClosePreview | None,
) -> list[str]:
    """Why a close of the month would be refused or need a confirmation, in words."""
    if state is StripState.CLOSED:
        revision = int(status["revisions"])
        return [f"Closed: revision {revision} is issued; reopen the month to change it."]
    from tenantcost.store.cycle import incomplete_note

    out = []
    if status["latest_run"] is None:
        out.append("No run yet: a close runs the month on the stored inputs first.")
    note = incomplete_note(engine, month)
    if note is not None:
        out.append(f"Incomplete: {note}. A close must be confirmed and the statements say so.")
    if gap:
        out.append("The cascade does not close: the gap is not zero.")
    if preview is not None and preview.changed == 0:
        out.append(
            f"Nothing changed since revision {preview.revision} in the latest run: a close "
            "needs “Close even though nothing changed” (or new inputs and a new run)."
        )
    return out


def close_preview(
    engine: Engine, month: str, run_id: str, revision: int, issued_run: str
) -> ClosePreview:
    """Each client whose amount ``run_id`` changes against the statements of ``revision``
    (a client only in one of them counts 0 in the other, as ``close`` writes it), by the
    absolute change, largest first, then by client."""
    from tenantcost.store.catalog import names_of
    from tenantcost.store.connection import result_frame
    from tenantcost.store.cycle import statements
    from tenantcost.store.models import RunClient, table
    from tenantcost.store.shown import run_shown

    c = table(RunClient).c
    with engine.connect() as connection:
        new = result_frame(
            connection.execute(select(c.client, c.amount).where(c.run_id == run_id)),
            ["client", "amount"],
        )
    old = statements(engine, month, revision)[["client", "amount"]]
    both = (
        new.astype({"client": "str", "amount": "int64"})
        .merge(old.astype({"client": "str"}), on="client", how="outer", suffixes=("", "_issued"))
        .fillna({"amount": 0, "amount_issued": 0})
        .astype({"amount": "int64", "amount_issued": "int64"})
    )
    both["change"] = both["amount"] - both["amount_issued"]
    changed = both[both["change"] != 0].copy()
    changed["size"] = changed["change"].abs()
    changed = changed.sort_values(["size", "client"], ascending=[False, True], kind="stable")
    top = changed.head(PREVIEW_ROWS)
    now, before = run_shown(engine, run_id), run_shown(engine, issued_run)
    places = now.places
    names = names_of(engine, top["client"].tolist())

    def change_text(client: str, change: int) -> str:
        """The change as the two shown amounts differ (they are read side by side), or,
        when the two runs show different decimals, the exact change at the new run's."""
        new_units, old_units = now.amount(client) or 0, before.amount(client) or 0
        sign = "+" if change > 0 else "-"
        if before.places == places and new_units != old_units:
            return sign + format_units(abs(new_units - old_units), places)
        return sign + format_amount(abs(change), places)

    rows = [
        PreviewRow(
            client,
            client_href(client, month),
            names.get(client),
            format_units(before.amount(client) or 0, before.places),
            format_units(now.amount(client) or 0, places),
            change_text(client, change),
            change > 0,
        )
        for client, change in zip(top["client"], top["change"].tolist(), strict=True)
    ]  # at most PREVIEW_ROWS: display only
    count = len(changed)
    summary = (
        f"{count:,} client{'s' if count != 1 else ''} would change"
        + (f", the {len(rows)} largest changes listed" if count > len(rows) else "")
        if count
        else f"No client's amount changes against revision {revision}"
    )
    return ClosePreview(revision, revision + 1, run_id, rows, count, summary)


def invoice_chart(invoice: Mapping[str, Any], view: InvoiceView) -> Markup:
    """The invoice cascade as a waterfall: each part from the running total, the effective
    cost in scope and the invoice total drawn in full; the values are the table's strings."""
    unit = 10**MINOR_UNIT_EXPONENT
    amounts = iter(int(line["amount"]) for line in invoice["lines"])
    steps, running = [], 0
    for row in view.rows:  # the cascade's lines: a dozen
        if row.subtotal:
            steps.append(Step(row.name, 0.0, running / unit, row.amount, total=True))
            continue
        amount = next(amounts)
        steps.append(Step(f"{row.part}: {row.name}", running / unit, (running + amount) / unit,
                          row.amount))  # fmt: skip
        running += amount
    billed = int(invoice["billed_total"])
    steps.append(Step("invoice total (billed)", 0.0, billed / unit, view.billed_total, total=True))
    svg = waterfall(
        "invoice-chart",
        "Invoice cascade",
        f"Each line of the invoice cascade in {view.currency}, from the clients' lines to the "
        f"effective cost in scope, then to the invoice total ({view.billed_total}); the table "
        "below lists the same figures.",
        steps,
    )
    return Markup(svg)  # the chart module escapes every text


def month_close(engine: Engine, month: str, run_id: str | None) -> MonthClose:
    """The first screen of ``month`` for the run the page shows (``run_id``, ``None``: no
    run), kept per store generation."""
    from tenantcost.service.memo import remembered

    return remembered(engine, "month_close", (month, run_id),
                      lambda: _month_close(engine, month, run_id))  # fmt: skip


def _month_close(engine: Engine, month: str, run_id: str | None) -> MonthClose:
    from tenantcost.service import page_data
    from tenantcost.service.memo import month_status
    from tenantcost.store.cycle import latest_issued
    from tenantcost.store.shown import run_shown

    months = month_status(engine)
    status = (
        next((m for m in months if m["month"] == month), None) or month_status(engine, month)[0]
    )
    bar = strip(months, month)
    state = next(s.state for s in bar if s.current)
    currency, reference, gap_text, gap = "", None, None, None
    invoice_total = invoice_gap = None
    invoice_closes, chart = False, Markup("")
    preview = None
    converted: list[ConvertedTotal] = []
    if run_id is not None:
        facts = page_data.run_facts(engine, run_id)
        shown = run_shown(engine, run_id)
        currency = str(facts.run["currency"])
        reference = format_units(shown.reference, shown.places)
        gap = int(facts.run["gap"])
        gap_text = format_amount(gap, shown.places)
        invoice = page_data.stored_invoice(facts.run)
        view = invoice_view(invoice, shown.places)
        if invoice is not None and view is not None:
            invoice_total, invoice_gap, invoice_closes = view.billed_total, view.gap, view.closes
            chart = invoice_chart(invoice, view)
        issued = latest_issued(engine, month)
        if state is StripState.REOPENED and issued is not None and issued.run_id != run_id:
            preview = close_preview(engine, month, run_id, issued.revision, issued.run_id)
        converted = _converted(engine, month, run_id)
    return MonthClose(
        strip=bar,
        state=state,
        currency=currency,
        reference_total=reference,
        gap=gap_text,
        gap_closes=gap == 0,
        invoice_total=invoice_total,
        invoice_gap=invoice_gap,
        invoice_closes=invoice_closes,
        coverage=_coverage(status),
        blockers=_blockers(engine, month, state, status, gap, preview),
        preview=preview,
        invoice_waterfall=chart,
        converted=converted,
    )


def _converted(engine: Engine, month: str, run_id: str) -> list[ConvertedTotal]:
    """``277.35 EUR (daily rates: 3 rate(s) dated ..., 1 USD = ... EUR; rates from ...)``
    per conversion of the run, finance's view (the rates' file named)."""
    from tenantcost.report.display import auto_places
    from tenantcost.report.exchange_view import POLICY_TEXT, rate_span
    from tenantcost.store.run_fx import run_conversions

    out = []
    for code, c in sorted(run_conversions(engine, run_id).items()):
        total = format_amount(c.reference_total, auto_places(code, [c.reference_total]))
        policy = POLICY_TEXT.get(str(c.document["policy"]), str(c.document["policy"]))
        provisional = "; provisional" if c.provisional else ""
        text = (f"{total} {code} ({policy.split(':')[0]} rates: {rate_span(c.document)}; "
                f"from {c.document['source']}{provisional})")  # fmt: skip
        href = f"/months/{month}/finance-summary.html?currency={code}"
        out.append(ConvertedTotal(text, code, href))
    return out
