"""The month-to-date watch as the service shows it: read, never computed here.

``tenantcost watch`` allocates the hours covered so far and scores every client's days, far
too slow for a request, so each run records its answer (:mod:`tenantcost.store.watch_snapshots`)
and the service reads the month's **latest** recorded run:

* ``GET /api/v1/months/{M}/watch`` (finance, product, admin: :attr:`Action.VIEW_WATCH`): the
  run's document, the JSON contract of ``watch --format json`` as recorded, plus ``label``
  and ``snapshot`` (when it was computed, whether the month was closed then); ``?page=&
  per_page=`` pages the clients (their own anomalies, rule changes and warnings with them;
  the month-level warnings on every page) and adds ``page``, ``per_page``, ``total``;
* ``GET /api/v1/clients/{id}/months/{M}`` gains ``watch`` (:func:`client_document`): the
  client's own entry and nothing of any other client (its row of ``watch_entry``, and of
  the month-level warnings only those that name no client), free text through the store's
  redaction for a client-scoped reader, like every other surface
  (:func:`tenantcost.service.figures.reader_text`);
* a month of which the viewer may see no figure (an account manager's or product's open
  month never issued; finance's month without a run) but whose watch has the client:
  :func:`watch_only_month`, the usual keys with no figure (``status`` ``not_issued``,
  ``amount`` ``null``, no lines) and the ``watch``: the one view of an open month an account
  manager gets, never a draft run's figures.

Everything is labelled :data:`LABEL`. The pages' display models are here too
(:func:`client_section`, :func:`month_section`), with amounts shown like every page shows
them (:mod:`tenantcost.report.display`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from sqlalchemy import Engine

from tenantcost.config.watch import WatchSettings
from tenantcost.report.display import auto_places, format_amount
from tenantcost.service.figures import iso, reader_text
from tenantcost.service.permissions import Principal
from tenantcost.service.urls import client_href
from tenantcost.service.watch_daily_view import (
    DailyView,
    client_daily_section,
    month_daily_section,
)
from tenantcost.service.watch_seen import (
    AlertLog,
    BandView,
    alert_log,
    client_band,
    month_band,
    score_sentence,
)
from tenantcost.store.watch_snapshots import (
    EntryOrder,
    Snapshot,
    anomaly_total,
    client_entry,
    entry_count,
    latest_snapshot,
    ranked_entries,
    snapshot_document,
)
from tenantcost.timefmt import utc
from tenantcost.writers.watch_text import approximate

LABEL = "month to date, not issued"
"""What every watch figure is labelled with, on the pages and in the API."""
NOT_ISSUED = "not_issued"
"""The ``status`` of a client's month shown by its watch alone (no figure the viewer may see)."""
MONTH_ROWS_PER_PAGE = 100
ANOMALIES_SHOWN = 100
"""Anomalies the month page lists at most (the API has them all)."""
_REDACTED_FIELDS = ("source", "rule_id", "detail")
"""The free text of the watch's items (source names, rule ids, warnings' details)."""


def snapshot_facts(snapshot: Snapshot) -> dict[str, Any]:
    """What the API says of the recorded run itself (never its actor)."""
    return {"id": snapshot.id, "computed_at": iso(snapshot.computed_at),
            "month_closed": snapshot.month_closed}  # fmt: skip


def month_document(
    engine: Engine, month: str, page: int | None = None, per_page: int | None = None
) -> dict[str, Any] | None:
    """``GET /api/v1/months/{M}/watch``: the latest run's contract document, or one page of
    its clients (None: ``watch`` never ran on the month)."""
    snapshot = latest_snapshot(engine, month)
    if snapshot is None:
        return None
    extra: dict[str, Any] = {"label": LABEL, "snapshot": snapshot_facts(snapshot)}
    if page is None and per_page is None:
        return snapshot_document(engine, snapshot) | extra
    page, per_page = page or 1, per_page or MONTH_ROWS_PER_PAGE
    document = snapshot_document(engine, snapshot, offset=(page - 1) * per_page, limit=per_page)
    total = entry_count(engine, snapshot.id)
    return document | extra | {"page": page, "per_page": per_page, "total": total}


def _shown(items: Iterable[dict[str, Any]], redact: Callable[[str], str]) -> list[dict[str, Any]]:
    """Items with their free text as the reader may read it."""
    return [
        {k: redact(v) if k in _REDACTED_FIELDS and isinstance(v, str) else v for k, v in i.items()}
        for i in items
    ]  # one client's items: a handful


def client_document(
    engine: Engine, principal: Principal, client: str, month: str
) -> dict[str, Any] | None:
    """The ``watch`` object of ``client``'s month: its entry of the month's latest watch run
    (None: never watched, or the client is not in the latest run). ``warnings`` are the
    client's own, ``month_warnings`` the month's that name no client (a day without costs,
    unbilled estimates, no data yet): a month-level item naming a client is that client's
    business, so it is not shown here."""
    snapshot = latest_snapshot(engine, month)
    if snapshot is None:
        return None
    entry = client_entry(engine, snapshot.id, client)
    if entry is None:
        return None
    redact = reader_text(engine, principal, client)
    month_level = [w for w in snapshot.document.get("warnings", []) if w.get("client") is None]
    return {
        "label": LABEL,
        "month": month,
        "as_of": snapshot.document.get("as_of"),
        "computed_at": iso(snapshot.computed_at),
        "month_closed": snapshot.month_closed,
        "money": snapshot.document.get("money"),
        "client": client,
        "month_to_date": entry.get("month_to_date"),
        "projected": entry.get("projected"),
        "budget": entry.get("budget"),
        "status": entry.get("status"),
        "anomalies": _shown(entry.get("anomalies", []), redact),
        "rule_changes": _shown(entry.get("rule_changes", []), redact),
        "warnings": _shown(entry.get("warnings", []), redact),
        "month_warnings": _shown(month_level, redact),
    }


def watch_only_month(client: str, month: str, state: str, watch: dict[str, Any]) -> dict[str, Any]:
    """``GET /api/v1/clients/{id}/months/{M}`` for a month the viewer sees no figure of but
    whose watch has the client: every key of a client's month, none with a figure."""
    return {
        "client": client,
        "month": month,
        "status": NOT_ISSUED,
        "revision": None,
        "state": state,
        "money": watch["money"],
        "amount": None,
        "previous_amount": None,
        "difference": None,
        "reason": None,
        "rule_ids": [],
        "run_id": None,
        "issued_at": None,
        "issued_by": None,
        "confidence": None,
        "lines": [],
        "bridge": None,
        "watch": watch,
        "converted": None,
    }


def _band(entry: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    band = entry.get("budget") or {}
    values = (band.get("low"), band.get("expected"), band.get("high"))
    return tuple(None if v is None else int(v) for v in values)  # type: ignore[return-value]


def _when(value: Any) -> str:
    """An instant as the pages show it: ``2026-12-12 06:00 UTC``."""
    return "" if not value else f"{utc(value):%Y-%m-%d %H:%M} UTC"


def _money(value: int | None, places: int) -> str:
    return "–" if value is None else format_amount(int(value), places)


@dataclass(frozen=True)
class AnomalyRow:
    client: str
    href: str
    source: str
    day: str
    amount: str
    baseline: str
    score: str
    kind: str


@dataclass(frozen=True)
class ChangeRow:
    day: str
    rule_id: str
    effect: str


@dataclass(frozen=True)
class WarningRow:
    kind: str
    day: str
    detail: str


def _anomaly_row(a: dict[str, Any], places: int) -> AnomalyRow:
    client = str(a.get("client", ""))
    return AnomalyRow(
        client,
        client_href(client),
        str(a.get("source", "")),
        str(a.get("day", "")),
        _money(a.get("amount"), places),
        _money(a.get("baseline"), places),
        f"{float(a.get('score') or 0.0):.2f}",
        str(a.get("kind", "")),
    )


def _anomaly_rows(items: list[dict[str, Any]], places: int) -> list[AnomalyRow]:
    return [_anomaly_row(a, places) for a in items]  # a page's anomalies: display only


def _warning_rows(items: list[dict[str, Any]]) -> list[WarningRow]:
    return [WarningRow(str(w.get("kind", "")), str(w.get("day") or ""),
                       str(w.get("detail") or "")) for w in items]  # fmt: skip


@dataclass(frozen=True)
class ClientWatchView:
    """The client page's "Month to date, not issued" section."""

    label: str
    as_of: str
    currency: str
    month_to_date: str
    projected: str
    low: str
    expected: str
    high: str
    status: str
    month_closed: bool
    anomalies: list[AnomalyRow]
    rule_changes: list[ChangeRow]
    warnings: list[WarningRow]
    band_svg: Markup | None = None
    """The projection against the band (:mod:`tenantcost.service.watch_seen`)."""
    explained: str = ""
    """How a day is scored, in a sentence."""
    daily: DailyView | None = None
    """The daily cost per source, anomalies marked (:mod:`tenantcost.service.watch_daily_view`)."""
    band_currency: str = ""
    """The band's currency: the client's own when its budget is set in it, else ``currency``."""
    band_projected: str = ""
    """The projection in ``band_currency`` (at the month's rates to date), what the status
    compares; ``""`` when the band is in ``currency``."""
    band_rate: str = ""


def client_section(
    engine: Engine,
    principal: Principal,
    client: str,
    month: str,
    settings: WatchSettings | None = None,
) -> ClientWatchView | None:
    """The section from :func:`client_document` (the same figures, redacted the same);
    ``settings``: ``watch``'s parameters, for the sentence that explains the score."""
    doc = client_document(engine, principal, client, month)
    if doc is None:
        return None

    low, expected, high = _band(doc)
    currency = str((doc["money"] or {}).get("currency", ""))
    budget = doc.get("budget") or {}
    band_currency = str(budget.get("currency") or currency)
    converted = band_currency != currency
    if converted:  # the band and its projection in the client's currency, apart
        band_places = auto_places(band_currency, [v for v in (low, expected, high) if v])
        banded = {**doc, "projected": budget.get("projected"), "money": {"currency": band_currency},
                  "month_to_date": budget.get("month_to_date")}  # fmt: skip
    anomalies, changes = doc["anomalies"], doc["rule_changes"]
    amounts = [doc["month_to_date"], doc["projected"]] + (
        [] if converted else [low, expected, high]
    )
    amounts += [a.get(k) for a in anomalies for k in ("amount", "baseline")]
    amounts += [c.get("effect") for c in changes]
    places = auto_places(currency, [int(a) for a in amounts if a is not None])
    return ClientWatchView(
        label=LABEL,
        as_of=_when(doc["as_of"]),
        currency=currency,
        month_to_date=_money(doc["month_to_date"], places),
        projected=_money(doc["projected"], places),
        low=_money(low, band_places if converted else places),
        expected=_money(expected, band_places if converted else places),
        high=_money(high, band_places if converted else places),
        status=str(doc["status"]),
        month_closed=bool(doc["month_closed"]),
        anomalies=_anomaly_rows(anomalies, places),
        rule_changes=[
            ChangeRow(
                str(c.get("day", "")), str(c.get("rule_id", "")), _money(c.get("effect"), places)
            )
            for c in changes
        ],
        warnings=_warning_rows(doc["warnings"] + doc["month_warnings"]),
        band_svg=client_band(client, banded if converted else doc),
        explained=score_sentence(settings, currency),
        daily=client_daily_section(engine, principal, client, month, anomalies),
        band_currency=band_currency,
        band_projected=_money(budget.get("projected"), band_places) if converted else "",
        band_rate=approximate(str(budget.get("rate", ""))) if converted else "",
    )


@dataclass(frozen=True)
class BandRow:
    client: str
    href: str
    name: str | None
    month_to_date: str
    projected: str
    low: str
    expected: str
    high: str
    against: str
    """How far outside the band: ``+X`` over ``high``, ``-X`` under ``low``, ``0`` within."""
    status: str
    anomalies: int


@dataclass(frozen=True)
class SortLink:
    label: str
    href: str
    current: bool


@dataclass(frozen=True)
class MonthWatchView:
    """The month page's "Month to date, not issued" section (finance, product, admin)."""

    label: str
    as_of: str
    computed_at: str
    currency: str
    month_closed: bool
    rows: list[BandRow]
    summary: str
    sorts: list[SortLink]
    prev_href: str | None
    next_href: str | None
    anomalies: list[AnomalyRow]
    anomalies_summary: str
    warnings: list[WarningRow]
    band: BandView | None = None
    """The month's projection against its band (:mod:`tenantcost.service.watch_seen`)."""
    explained: str = ""
    """How a day is scored, in a sentence."""
    alerts: AlertLog | None = None
    """The alerts sent this month (finance and admin; ``None`` for product)."""
    daily: DailyView | None = None
    """Every client's daily cost per source, anomalies marked."""


def _against(projected: int, low: int | None, high: int | None, places: int) -> str:
    if high is not None and projected > high:
        return "+" + format_amount(projected - high, places)
    if low is not None and projected < low:
        return "-" + format_amount(low - projected, places)
    return "–" if low is None and high is None else "0"


def _band_rows(engine: Engine, month: str, entries: list[dict[str, Any]],
               places: int) -> list[BandRow]:  # fmt: skip
    from tenantcost.store.catalog import names_of

    names = names_of(engine, [str(e["client"]) for e in entries])  # this page's clients
    rows = []
    for e in entries:  # one page (at most MONTH_ROWS_PER_PAGE): display only
        low, expected, high = _band(e)
        client, projected = str(e["client"]), int(e["projected"])
        budget = e.get("budget") or {}
        own = f" {budget['currency']}" if budget.get("rate") else ""  # the client's currency
        compared = int(budget["projected"]) if own else projected
        rows.append(BandRow(client, client_href(client, month), names.get(client),
                            _money(e["month_to_date"], places), _money(projected, places),
                            _money(low, places) + own, _money(expected, places) + own,
                            _money(high, places) + own,
                            _against(compared, low, high, places) + own, str(e["status"]),
                            len(e.get("anomalies", []))))  # fmt: skip
    return rows


def _page_amounts(entries: list[dict[str, Any]], anomalies: list[dict[str, Any]]) -> list[int]:
    amounts = [e.get(k) for e in entries for k in ("month_to_date", "projected")]
    amounts += [v for e in entries for v in _band(e)]
    amounts += [a.get(k) for a in anomalies for k in ("amount", "baseline")]
    return [int(a) for a in amounts if a is not None]


def month_section(
    engine: Engine,
    month: str,
    order: EntryOrder = EntryOrder.CLIENT,
    page: int = 1,
    settings: WatchSettings | None = None,
    alerts: bool = False,
) -> MonthWatchView | None:
    """One page of every client's projection against its band, in ``order``, the month's
    anomalies (the first :data:`ANOMALIES_SHOWN`, by client) and its month-level warnings;
    the month's projection against its band, the score in a sentence (``settings``:
    ``watch``'s parameters) and, with ``alerts`` (finance, admin), the alerts sent; None
    when ``watch`` never ran on the month."""
    snapshot = latest_snapshot(engine, month)
    if snapshot is None:
        return None

    per_page = MONTH_ROWS_PER_PAGE
    entries = ranked_entries(engine, snapshot.id, order, offset=(page - 1) * per_page,
                             limit=per_page)  # fmt: skip
    flagged = ranked_entries(engine, snapshot.id, EntryOrder.CLIENT, anomalous=True,
                             limit=ANOMALIES_SHOWN)  # fmt: skip
    anomalies = [a for e in flagged for a in e.get("anomalies", [])][:ANOMALIES_SHOWN]
    currency = snapshot.currency
    places = auto_places(currency, _page_amounts(entries, anomalies))
    count = entry_count(engine, snapshot.id)
    found, in_clients = anomaly_total(engine, snapshot.id)
    pages = max(1, math.ceil(count / per_page))
    first = (page - 1) * per_page + 1
    shown = f", showing {first:,} to {first + len(entries) - 1:,}" if entries else ""

    def href(o: EntryOrder, n: int) -> str:
        return f"/months/{month}?watch_sort={o.value}&watch_page={n}#watch-h"

    labels = {EntryOrder.CLIENT: "client", EntryOrder.STATUS: "status",
              EntryOrder.ABOVE: "how far above the band"}  # fmt: skip
    return MonthWatchView(
        label=LABEL,
        as_of=_when(snapshot.document.get("as_of")),
        computed_at=_when(snapshot.computed_at),
        currency=currency,
        month_closed=snapshot.month_closed,
        rows=_band_rows(engine, month, entries, places),
        summary=f"{count:,} client{'s' if count != 1 else ''}{shown}",
        sorts=[SortLink(labels[o], href(o, 1), o is order) for o in EntryOrder],
        prev_href=href(order, page - 1) if page > 1 else None,
        next_href=href(order, page + 1) if page < pages else None,
        anomalies=_anomaly_rows(anomalies, places),
        anomalies_summary=f"{found:,} anomal{'y' if found == 1 else 'ies'} in {in_clients:,} "
        f"client{'s' if in_clients != 1 else ''}"
        + (f", the first {len(anomalies)} listed" if found > len(anomalies) else ""),
        warnings=_warning_rows(list(snapshot.document.get("warnings", []))),
        band=month_band(engine, snapshot),
        explained=score_sentence(settings, currency),
        alerts=alert_log(engine, month) if alerts else None,
        daily=month_daily_section(engine, month),
    )
