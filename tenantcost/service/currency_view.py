"""A client's page in another currency: each month's figure as its run converted it.

Which currency, first match wins (docs/currency.md): ``?currency=``, then the stored rule
file's ``presentation:``, else the ledger currency (nothing converted). A month's figure is
shown converted only when its run recorded a conversion into that currency
(:mod:`tenantcost.store.run_fx`, frozen by the close that issued it); a month whose run has
none stays in its ledger currency, and says so by its currency code.

A converted figure carries what a reader needs to check it: the ledger amount, the policy,
the source, and the span of the rates used (every rate is in the month's sheet). A rates
file is named to a client's reader as "the company's rates file", never by its path
(:func:`tenantcost.report.exchange_view.source_text`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from sqlalchemy import Engine, select, tuple_

from tenantcost.money import MINOR_UNIT_EXPONENT
from tenantcost.report.display import auto_places, format_amount, format_units
from tenantcost.report.exchange_view import POLICY_TEXT, rate_span, source_text
from tenantcost.service.page_data import FigureRow
from tenantcost.store.models import Statement, table
from tenantcost.store.month_inputs import presentation_of
from tenantcost.store.run_fx import client_conversions, run_conversions


@dataclass(frozen=True)
class FigureFx:
    """How a converted figure was formed, formatted."""

    ledger: str
    """The issued ledger amount with its currency: ``150.00 USD``."""
    policy: str
    source: str
    rates: str
    provisional: bool


def stored_presentation(engine: Engine) -> str | None:
    """The latest stored rule file's ``presentation:`` (None: none, or no rules)."""
    return presentation_of(engine)


def converted_rows(
    engine: Engine, rows: list[FigureRow], currency: str, internal: bool
) -> list[FigureRow]:
    """``rows`` (one client's months) with each month its run converted into ``currency``
    shown in it: amount, currency, the decimals of ``currency`` (raised for a figure too
    small to show two digits) and ``fx``. Other rows unchanged."""
    runs = {r.run_id for r in rows if r.currency != currency}
    if not runs:
        return rows
    before = _previous_runs(engine, rows)
    amounts = client_conversions(
        engine, sorted(runs | set(before.values())), currency, [rows[0].client]
    )
    found = {
        (str(r), str(c)): int(a)
        for r, c, a in zip(amounts["run_id"], amounts["client"], amounts["amount"], strict=True)
    }
    documents: dict[str, dict[str, Any]] = {}
    out = []
    for row in rows:  # one client's months: a handful
        amount = found.get((row.run_id, row.client))
        if amount is None or row.currency == currency:
            out.append(row)
            continue
        if row.run_id not in documents:
            documents[row.run_id] = run_conversions(engine, row.run_id)[currency].document
        previous = found.get((before.get((row.month, row.revision or 0), ""), row.client))
        out.append(_converted(row, amount, currency, documents[row.run_id], internal, previous))
    return out


def _previous_runs(engine: Engine, rows: list[FigureRow]) -> dict[tuple[str, int], str]:
    """For each restated month shown, the run of the revision it replaced, by (month,
    revision shown): its conversion gives the restatement's change in the shown currency."""
    wanted = [(r.month, r.revision - 1) for r in rows if r.revision and r.revision > 1]
    if not wanted:
        return {}
    s = table(Statement).c
    client = rows[0].client
    with engine.connect() as connection:
        found = connection.execute(
            select(s.month, s.revision, s.run_id).where(
                s.client == client, tuple_(s.month, s.revision).in_(wanted)
            )
        ).all()
    return {(str(m), int(v) + 1): str(r) for m, v, r in found}


def _converted(
    row: FigureRow,
    amount: int,
    currency: str,
    fx: dict[str, Any],
    internal: bool,
    previous: int | None,
) -> FigureRow:
    places = row.places if row.places is not None else auto_places(row.currency, [row.amount])
    ledger = (
        format_amount(int(row.amount), places)
        if row.shown is None
        else format_units(int(row.shown), places)  # as the issued sheets show it
    )
    note = FigureFx(
        ledger=f"{ledger} {row.currency}",
        policy=POLICY_TEXT.get(str(fx["policy"]), str(fx["policy"])),
        source=source_text(str(fx["source"]), internal),
        rates=rate_span(fx),
        provisional=bool(fx.get("provisional")),
    )
    return replace(
        row,
        amount=amount,
        currency=currency,
        shown=None,
        places=auto_places(currency, [amount]),
        smallest=None,
        difference=None if previous is None else amount - previous,
        previous_amount=previous,
        fx=note,
        ledger=row,
    )


def converted_amount(
    engine: Engine, doc: dict[str, Any], asked: str | None, internal: bool
) -> dict[str, Any] | None:
    """The ``converted`` block of ``GET /api/v1/clients/{id}/months/{M}``: the month's amount
    in ``asked`` (default the client's own currency, else ``presentation:``) as its run
    converted it, ``{currency, amount, ledger_amount, fx}`` (micro-units; ``fx`` the run's
    document, its source named as :func:`source_text` gives it); None when that is the
    ledger currency or the run has no such conversion."""
    from tenantcost.store.catalog import currency_of

    client, ledger = str(doc["client"]), str(doc["money"]["currency"])
    currency = asked or currency_of(engine, client) or stored_presentation(engine)
    if not currency or currency == ledger or doc.get("amount") is None:
        return None
    mine = client_conversions(engine, [str(doc["run_id"])], currency, [client])
    if mine.empty:
        return None
    fx = reader_document(run_conversions(engine, str(doc["run_id"]))[currency].document, internal)
    return {
        "currency": currency,
        "amount": int(mine["amount"].iloc[0]),
        "ledger_amount": int(mine["ledger_amount"].iloc[0]),
        "fx": fx,
    }


def reader_document(document: dict[str, Any], internal: bool) -> dict[str, Any]:
    """A run's conversion document as a reader may see it: a client's reader (not
    ``internal``) reads "the company's rates file" for the source and no file name in any
    quote (:func:`tenantcost.report.exchange_view.source_text`)."""
    fx = dict(document)
    fx["source"] = source_text(str(fx["source"]), internal)
    if not internal:  # a quote's file is the company's, not named to a client's reader
        fx["rates"] = [_unnamed(entry) for entry in fx.get("rates", [])]
    return fx


def _unnamed(entry: dict[str, Any]) -> dict[str, Any]:
    quotes = [
        {**q, "source": source_text(str(q.get("source", "")), False)}
        for q in entry.get("quotes", [])
    ]
    return {**entry, "quotes": quotes} if quotes else entry


@dataclass(frozen=True)
class FxChange:
    """A converted month's change from the month before, split as ``explain --currency``
    splits it (:func:`tenantcost.bridge.converted_bridge`): what the client used and paid
    (the ledger change at the earlier month's effective rate) and the exchange rate (``fx``,
    the rest). The two add up exactly to the change."""

    vs: str
    text: str


def _units(micros: int, unit: int) -> int:
    """Micro-units in display units, half to even (as :func:`format_amount` shows them)."""
    return round(Fraction(micros, unit))


def fx_change(rows: list[FigureRow], month: str) -> FxChange | None:
    """For ``month``'s converted figure (``rows``: :func:`converted_rows`), the change from
    the previous calendar month when that month is converted into the same currency too."""
    import pandas as pd

    at = next((i for i, r in enumerate(rows) if r.month == month), None)
    if at is None or at == 0 or rows[at].ledger is None:
        return None
    now, before = rows[at], rows[at - 1]
    previous = (pd.Period(month, freq="M") - 1).strftime("%Y-%m")
    if before.month != previous or before.ledger is None or before.currency != now.currency:
        return None
    ledger_before, ledger_now = int(before.ledger.amount), int(now.ledger.amount)
    rate = Fraction(int(before.amount), ledger_before) if ledger_before else None
    at_rate = round(ledger_now * rate) if rate is not None else int(now.amount)
    places = max(now.places or 2, before.places or 2)
    # as displayed: each month's figure rounded alone, the change their difference, and the
    # parts adding up to it (the exchange rate's part takes the rounding, a display unit)
    unit = 10 ** (MINOR_UNIT_EXPONENT - places)
    change = _units(int(now.amount), unit) - _units(int(before.amount), unit)
    used = _units(at_rate - int(before.amount), unit)
    fx = change - used

    def signed(units: int) -> str:
        sign = "+" if units > 0 else "\u2212" if units < 0 else "±"
        return f"{sign}{format_units(abs(units), places)} {now.currency}"

    text = (
        f"{signed(change)} from {previous}: {signed(used)} from what was used and billed (at "
        f"{previous}'s rate), {signed(fx)} from the exchange rate"
    )
    return FxChange(previous, text)


def listed_conversions(
    engine: Engine, run_id: str | None, clients: list[str], asked: str | None
) -> dict[str, dict[str, Any]]:
    """A client list's page in each client's currency: ``{client: {currency, amount}}``
    (micro-units) for each client of ``clients`` whose currency (``asked``, else its own in
    the catalog, else ``presentation:``) the list's run (``run_id``: every figure of an
    issued revision is of its one run) converted into. One query per currency of the page."""
    from tenantcost.store.catalog import currencies_of

    if run_id is None or not clients:
        return {}
    default = asked or stored_presentation(engine) or ""
    wanted = dict.fromkeys(clients, default) | ({} if asked else currencies_of(engine, clients))
    out: dict[str, dict[str, Any]] = {}
    for code in sorted({c for c in wanted.values() if c}):
        mine = client_conversions(
            engine, [run_id], code, [c for c, w in wanted.items() if w == code]
        )
        for client, amount in zip(mine["client"], mine["amount"], strict=True):
            out[str(client)] = {"currency": code, "amount": int(amount)}
    return out


def conversion_notes(
    engine: Engine, run_id: str | None, codes: set[str], internal: bool
) -> list[str]:
    """How the run converted into each of ``codes``, one sentence each, for a page that
    shows converted figures beside the ledger's: the policy, the rates' span and source."""
    if run_id is None or not codes:
        return []
    recorded = run_conversions(engine, run_id)
    notes = []
    for code in sorted(codes & set(recorded)):
        fx = recorded[code].document
        policy = POLICY_TEXT.get(str(fx["policy"]), str(fx["policy"])).split(":")[0]
        provisional = "; provisional" if fx.get("provisional") else ""
        notes.append(f"{code}: {policy} rates, {rate_span(fx)}; rates from "
                     f"{source_text(str(fx['source']), internal)}{provisional}")  # fmt: skip
    return notes
