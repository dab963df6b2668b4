"""The watch, seen: the month-to-date figures of ``tenantcost watch`` as a chart, a sentence
and a log, beside the tables of :mod:`tenantcost.service.watch_view`.

A finance lead reading an open month wants three answers the tables only imply: is the month
heading out of its budget band (:func:`month_band` and :func:`client_band`: the projection
against the band, drawn by :mod:`tenantcost.report.band_chart`); why is a day called an
anomaly (:func:`score_sentence`: the method of :mod:`tenantcost.watch` in one sentence, with
the parameters the service's settings give ``watch``); and whom did the alerts reach
(:func:`alert_log`: the ``alert_delivery`` rows of the month, finance and admin only, since
they name every client alerted and every destination).

The month's band is the sum of the bands of the clients that have one, compared with the
same clients' month to date and projection (never all clients' projection against some
clients' budgets); it is summed in SQL (:func:`tenantcost.store.watch_snapshots.
watch_totals`), one query at 10,000 clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pandas as pd
from markupsafe import Markup
from sqlalchemy import Engine

from tenantcost.config.watch import WatchSettings
from tenantcost.money import MINOR_UNIT_EXPONENT
from tenantcost.report.band_chart import BandFigures, band_chart
from tenantcost.report.display import auto_places, format_amount
from tenantcost.service.urls import client_href
from tenantcost.store.watch_snapshots import Snapshot, watch_totals
from tenantcost.timefmt import utc

ALERTS_SHOWN = 50
"""Deliveries the month page's log lists at most (latest first; the count says how many)."""


def score_sentence(settings: WatchSettings | None, currency: str) -> str:
    """How a day is scored and flagged, in one sentence, with ``watch``'s parameters."""
    s = settings or WatchSettings()
    threshold = f"{s.threshold:g}"
    return (
        f"A day's score is how far the client's cost from a source lies from its baseline, the "
        f"median of the previous {s.window_days} days with usage under the same rule, in units "
        f"of the usual spread (1.4826 × the median absolute deviation, at least 10 % of the "
        f"median and {s.min_amount} {currency}); a day is an anomaly when the score reaches "
        f"{threshold} or −{threshold}, the move is at least {s.min_amount} {currency} and the "
        f"baseline has at least {s.min_days} days (a day without usage is a gap, never a drop)."
    )


def _figures(mtd: int, projected: int, band: tuple[int, int, int] | None,
             currency: str) -> BandFigures:  # fmt: skip
    unit = 10**MINOR_UNIT_EXPONENT
    amounts = [mtd, projected, *(band or ())]
    places = auto_places(currency, [a for a in amounts if a])
    outside = band is not None and not band[0] <= projected <= band[2]
    band_text = (
        ""
        if band is None
        else f"{format_amount(band[0], places)} to {format_amount(band[2], places)}, "
        f"expected {format_amount(band[1], places)}"
    )
    return BandFigures(
        mtd / unit, projected / unit, format_amount(mtd, places),
        format_amount(projected, places),
        None if band is None else (band[0] / unit, band[1] / unit, band[2] / unit),
        band_text, outside,
    )  # fmt: skip


def _chart(chart_id: str, who: str, f: BandFigures, currency: str) -> Markup:
    where = (
        "no budget" if f.band is None else "outside the band" if f.outside else "within the band"
    )
    title = f"{who}: projected month against the budget band ({where})"
    desc = (
        f"Month to date {f.month_to_date_text} {currency}, projected {f.projected_text} "
        f"{currency}" + (f"; budget band {f.band_text} {currency}" if f.band else "") + "."
    )
    return Markup(band_chart(chart_id, title, desc, f))  # the chart module escapes every text


@dataclass(frozen=True)
class BandView:
    svg: Markup
    note: str
    """What the chart sums (the month's): which clients, so the comparison is fair."""


def month_band(engine: Engine, snapshot: Snapshot) -> BandView:
    """All clients' month to date and projection, or, when some clients have a budget, those
    clients' against the sum of their bands."""
    t = watch_totals(engine, snapshot.id)
    currency = snapshot.currency
    if t.budgeted:
        band = (t.low, t.expected, t.high)
        f = _figures(t.budgeted_month_to_date, t.budgeted_projected, band, currency)
        note = (
            f"The {t.budgeted:,} client{'s' if t.budgeted != 1 else ''} with a budget"
            + (f" (of {t.clients:,})" if t.budgeted != t.clients else "")
            + ": their month to date and projection against the sum of their bands."
        )
    else:
        f = _figures(t.month_to_date, t.projected, None, currency)
        note = f"All {t.clients:,} clients; no budget is loaded for the month."
    return BandView(_chart("watch-band", "All clients", f, currency), note)


def client_band(client: str, doc: dict[str, Any]) -> Markup:
    """The client's own projection against its band (``doc``: its watch document)."""
    budget = doc.get("budget")
    band = None if not budget else (int(budget["low"]), int(budget["expected"]),
                                     int(budget["high"]))  # fmt: skip
    currency = str((doc.get("money") or {}).get("currency", ""))
    f = _figures(int(doc["month_to_date"] or 0), int(doc["projected"] or 0), band, currency)
    return _chart("watch-band", client, f, currency)


@dataclass(frozen=True)
class AlertRow:
    at: str
    client: str
    href: str
    kind: str
    channel: str
    destination: str
    status: str
    attempts: int
    error: str


@dataclass(frozen=True)
class AlertLog:
    rows: list[AlertRow]
    summary: str


def _destination(value: str) -> str:
    """A webhook's scheme and host only (its path often holds a secret); an address as is."""
    parts = urlsplit(value)
    return f"{parts.scheme}://{parts.hostname}/…" if parts.scheme and parts.hostname else value


def _at(value: Any) -> str:
    return "" if value is None or pd.isna(value) else f"{utc(value):%Y-%m-%d %H:%M} UTC"


def alert_log(engine: Engine, month: str) -> AlertLog:
    """The month's alert deliveries, latest first (finance and admin)."""
    from tenantcost.store.alert_deliveries import delivery_log

    frame, count = delivery_log(engine, month, ALERTS_SHOWN)
    rows = [
        AlertRow(_at(r.sent_at if r.sent_at is not None and not pd.isna(r.sent_at)
                     else r.last_attempt_at), str(r.client), client_href(str(r.client), month),
                 str(r.kind), str(r.channel), _destination(str(r.destination)), str(r.status),
                 int(r.attempts), str(r.last_error or ""))
        for r in frame.itertuples()
    ]  # at most ALERTS_SHOWN: display only  # fmt: skip
    summary = (
        f"{count:,} deliver{'y' if count == 1 else 'ies'} this month"
        + (f", the latest {len(rows)} listed" if count > len(rows) else "")
        if count
        else "No alert sent this month (alerts go out with `tenantcost watch --notify`)"
    )
    return AlertLog(rows, summary)
