"""The "Currency conversion" part of a sheet: what a reader needs to redo the conversion.

A converted sheet (``report --currency``, ``presentation:``) shows figures that are not the
ledger's. The reader must be able to check them without trusting tenantcost
(docs/currency.md): the amount in the ledger currency, the policy, where the rates come from,
and every rate used with its date. A rate formed from two published quotes (an inverse, a
cross) is shown as that ratio and the quotes, never as a rounded decimal: a ratio of
decimals is not a finite decimal, and a rounded rate would not reproduce the figure.

With the daily policy the sheet also lists the client's ledger amount per UTC day, so
``sum(day amount x day rate)`` gives the exact converted amount; the shown amount is that
value rounded once, within the total (largest remainder, at most one micro-unit away).

File names are internal: a client's view names a rates file as "the company's rates file"
(the ECB's label stays, it is public).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pandas as pd

from tenantcost.report.display import auto_places, format_amount
from tenantcost.result import AllocationResult

POLICY_TEXT = {
    "daily": "daily: each hour at the rate of its UTC date (the last rate published on or "
    "before that date)",
    "monthly_average": "monthly average: each month at the mean of the rates published in it",
    "month_end": "month end: each month at the last rate published in it",
    "fixed": "fixed: each month at the rate the rule file gives for it",
}


@dataclass(frozen=True)
class RateRow:
    """One rate used: its date, the multiplier (1 ledger unit in the shown currency) and how
    it is formed; ``ledger``: the client's ledger amount on that day (daily policy)."""

    date: str
    rate: str
    formed: str
    ledger: str


@dataclass(frozen=True)
class ExchangeView:
    """The conversion of one sheet, formatted."""

    ledger_currency: str
    currency: str
    policy: str
    source: str
    ledger_total: str
    rows: list[RateRow]
    periods: list[str]
    provisional: bool
    per_day: bool
    """The rows carry the client's ledger amount per day."""


def _formed(entry: dict[str, Any]) -> str:
    """How a multiplier is formed: the published quote(s), and a carried rate's date."""
    quotes = entry.get("quotes") or []
    parts = [f"1 {q['base']} = {q['rate']} {q['quote']} published {q['date']}" for q in quotes]
    text = "; ".join(parts) if parts else "as published"
    if entry.get("published") and not quotes:
        text += f" (carried from {entry['published']})"
    return text


def _rate_text(rate: str) -> str:
    return rate.replace("/", " ÷ ")


def source_text(source: str, internal: bool) -> str:
    """Where the rates come from, as a reader may see it: a client's reader gets the ECB's
    public label and "the company's rates file" for any file or stored load (a path, an
    ``fx load``), never its name."""
    if internal:
        return source
    parts = [p if p.startswith(("ECB", "rule file")) else "the company's rates file"
             for p in source.split("; ")]  # fmt: skip
    return "; ".join(dict.fromkeys(parts))


def _day_ledger(result: AllocationResult, client: str) -> dict[str, int]:
    """The client's ledger amount per UTC day (empty without day lines)."""
    ledger = result.ledger
    days = ledger.line_days if ledger is not None else None
    if days is None or days.empty:
        return {}
    mine = days.loc[days["client"].astype(str) == client]
    sums = mine.groupby(pd.to_datetime(mine["day"]).dt.strftime("%Y-%m-%d"))["amount"].sum()
    return {str(k): int(v) for k, v in sums.items()}


def exchange_view(result: AllocationResult, client: str, internal: bool) -> ExchangeView | None:
    """The conversion part of ``client``'s sheet; None for a sheet in the ledger currency."""
    fx = result.fx
    if fx is None:
        return None
    ledger_currency = str(fx["ledger_currency"])
    lines = result.lines
    mine = lines.loc[lines["client"].astype(str) == client] if not lines.empty else lines
    ledger_total = int(mine["ledger_amount"].sum()) if "ledger_amount" in mine else 0
    places = auto_places(ledger_currency, [ledger_total])
    per_day = _day_ledger(result, client) if fx["policy"] == "daily" else {}
    day_places = auto_places(ledger_currency, [v for v in per_day.values() if v]) if per_day else 0
    shown = max(places, day_places)
    rows = [
        RateRow(
            date=str(e["date"]),
            rate=_rate_text(str(e["rate"])),
            formed=_formed(e) if e.get("quotes") or e.get("published") else "as published",
            ledger=format_amount(per_day.get(str(e["date"]), 0), shown) if per_day else "",
        )
        for e in fx["rates"]
    ]
    periods = [
        f"{p['month']}: {_rate_text(str(p['rate']))}"
        + (f" (mean of {p['published_days']} published rates)" if p.get("published_days", 1) > 1
           else "")
        for p in fx.get("periods", [])
    ]  # fmt: skip
    return ExchangeView(
        ledger_currency=ledger_currency,
        currency=str(fx["currency"]),
        policy=POLICY_TEXT.get(str(fx["policy"]), str(fx["policy"])),
        source=source_text(str(fx["source"]), internal),
        ledger_total=format_amount(ledger_total, places),
        rows=rows,
        periods=periods,
        provisional=bool(fx.get("provisional")),
        per_day=bool(per_day),
    )


def _value(rate: str) -> Fraction:
    """A multiplier's exact value from its text (``0.92``, ``1/1.0800``, ``0.84/1.08``)."""
    top, _, bottom = rate.partition("/")
    value = Fraction(Decimal(top))
    return value / Fraction(Decimal(bottom)) if bottom else value


def summary_note(result: AllocationResult, places: int) -> str:
    """The finance summary's line on a converted pack: the ledger reference total, the
    policy, the source and the range of the rates used (each rate is in the sheets)."""
    fx = result.fx
    if fx is None or result.ledger is None:
        return ""
    ledger = str(fx["ledger_currency"])
    reference = result.ledger.reference_total
    total = format_amount(reference, auto_places(ledger, [reference]))
    provisional = (
        "; provisional (a day's rate is not published yet)" if fx.get("provisional") else ""
    )
    return (
        f"converted from the ledger currency {ledger} (reference total {total} {ledger}); "
        f"policy {fx['policy']}; rates from {fx['source']}: {rate_span(fx)}{provisional}"
    )


def rate_span(fx: dict[str, Any]) -> str:
    """The rates of an ``fx`` document in one phrase: how many, their dates and the range of
    the multipliers (``3 rate(s) dated 2026-11-06 to 2026-11-09, 1 USD = 1 ÷ 1.0850 to
    1 ÷ 1.0800 EUR``); each rate is in the sheets."""
    rates = fx["rates"]
    if not rates:
        return "no rate used"
    texts = sorted({str(e["rate"]) for e in rates}, key=_value)
    span = _rate_text(texts[0]) if len(texts) == 1 else (
        f"{_rate_text(texts[0])} to {_rate_text(texts[-1])}")  # fmt: skip
    dates = sorted(str(e["date"]) for e in rates)
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    return f"{len(rates)} rate(s) dated {when}, 1 {fx['ledger_currency']} = {span} {fx['currency']}"
