"""The client page's one "What changed" block: the change since the previous month, and why.

Why one block: the page used to say the same change three ways, each rounded its own way
("up by 0.0078 USD from 0.116", a bridge "+0.0077 from 0.1157", a history column reading
0.116). Now one block says it once, and every figure in it is a displayed figure
(:mod:`tenantcost.store.shown`, the one rounding a close freezes):

* the two ends are the two months' frozen strings, each at its own decimals, exactly as the
  history, the client list and the sheets show them;
* the change and the parts are at the finer of the two decimals, and the parts add up to the
  change between the two ends as shown (:func:`tenantcost.report.changes.shown_bridge`, the
  sheet's own rounding of ``explain``'s parts: the sheet's bridge reads the same);
* each part is named in plain words from the one label map
  (:data:`tenantcost.bridge.PART_LABELS`: ``new_source`` reads "new service") with
  ``explain``'s sentence beside it;
* a rise and a fall differ in colour **and** in words and signs ("up", "+"; "down", "−"), so
  the colour is never the only cue (WCAG 1.4.1), and the waterfall colours its steps the same.

The bridge compares with the previous calendar month's latest issued revision
(:mod:`tenantcost.store.month_bridge`). Without one (the previous month not issued, the client
new), the block falls back to the change from the previous month the viewer sees, in one
sentence, without parts. Free text (sources) reaches a client-scoped reader redacted
(:func:`tenantcost.service.figures.reader_text`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from markupsafe import Markup
from sqlalchemy import Engine

from tenantcost.money import round_for_display
from tenantcost.report.changes import ShownBridge, effect_labels, shown_bridge
from tenantcost.report.charts import Step, waterfall
from tenantcost.report.display import format_share, format_units
from tenantcost.service.bridge_view import one_client_bridges
from tenantcost.service.figures import reader_text
from tenantcost.service.page_data import FigureRow
from tenantcost.service.page_views import figure_places
from tenantcost.service.permissions import Principal
from tenantcost.store.data import DataDir
from tenantcost.store.month_bridge import ClientBridge, client_bridge
from tenantcost.store.shown import run_shown

MINUS = "\u2212"
"""The minus sign of a fall (read "minus" by screen readers, unlike a hyphen)."""


class Direction(StrEnum):
    """Which way a figure moved; its value is the word the page prints."""

    UP = "up"
    DOWN = "down"
    SAME = "unchanged"

    @classmethod
    def of(cls, units: int) -> Direction:
        return cls.UP if units > 0 else cls.DOWN if units < 0 else cls.SAME

    @property
    def css(self) -> str:
        """The class that colours it: a rise, a fall, or neither."""
        return {Direction.UP: "rise", Direction.DOWN: "fall", Direction.SAME: "same"}[self]


def signed(units: int, places: int) -> str:
    """``+0.0637`` or ``−0.0580`` (``0.0000`` unchanged)."""
    sign = "+" if units > 0 else MINUS if units < 0 else ""
    return sign + format_units(abs(units), places)


@dataclass(frozen=True)
class ChangeRow:
    """One part of the change."""

    label: str
    """The part in plain words: "New service", "Unit cost"..."""
    detail: str
    """``explain``'s sentence: "you started using search in 2026-11"."""
    amount: str
    """Signed: ``+0.0637``."""
    direction: Direction


@dataclass(frozen=True)
class WhatChanged:
    """The block: a title, one sentence, and the parts (none in the fallback)."""

    title: str
    summary: str
    """``0.1234 USD in 2026-11, up 0.0074 USD (6.4 %) from 0.116 USD in 2026-10.``"""
    compared: str
    """``Compared with 2026-10, revision 1``."""
    direction: Direction
    change: str
    """The change, signed, with its currency."""
    start: str
    """The first row's label: the month compared with (and its revision)."""
    end: str
    """The last row's label: the month shown."""
    ends: tuple[str, str]
    """The two months' figures as shown (each its frozen string)."""
    rows: list[ChangeRow]
    currency: str
    svg: Markup


def what_changed(
    engine: Engine,
    principal: Principal,
    client: str,
    rows: list[FigureRow],
    month: str,
    data: DataDir | None = None,
) -> WhatChanged | None:
    """The block of ``month`` (``rows``: the client's figures the viewer sees, in month
    order, one of them ``month``'s; shown converted, :mod:`tenantcost.service.currency_view`,
    the block is in their currency with an exchange-rate part); ``None`` without a previous
    month to compare with."""
    at = next((i for i, r in enumerate(rows) if r.month == month), None)
    if at is None:
        return None
    row = rows[at]
    found = _bridge(engine, client, row, data, rows[at - 1] if at > 0 else None)
    if found is not None:
        redact = reader_text(engine, principal, client)
        return _from_bridge(found, client, redact)
    if at == 0:
        return None
    before = rows[at - 1]
    if before.currency != row.currency:  # one shown converted, one not: compare as issued
        before, row = before.ledger or before, row.ledger or row
    return _from_rows(before, row)


def _bridge(
    engine: Engine,
    client: str,
    row: FigureRow,
    data: DataDir | None,
    before_row: FigureRow | None = None,
) -> ShownBridge | None:
    found = client_bridge(engine, row.month, row.run_id, client, data)
    if found is None:
        return None
    if row.ledger is not None:  # the figure is shown converted: the bridge is, with fx
        return _converted(found, client, row, before_row)
    before, now = run_shown(engine, found.previous.run_id), run_shown(engine, row.run_id)
    places = row.places if row.places is not None else now.places
    pb = one_client_bridges(found, client, row.month, row.currency)
    early = before.amount(client)
    pb = replace(pb, early_shown=None if early is None else {client: early},
                 early_places=before.places)  # fmt: skip
    late = now.amount(client) if now.places == places else None
    return shown_bridge(pb, client, places, late)


def _converted(
    found: ClientBridge, client: str, row: FigureRow, before: FigureRow | None
) -> ShownBridge | None:
    """The bridge in the currency ``row`` is shown in (issue 37), as ``explain --from-db
    --currency`` gives it: each ledger part at the previous month's effective rate, split by
    largest remainder, and the exchange rate's ``fx`` part the rest, so the parts add up to
    the change between the two converted figures. Both months must be shown converted into
    that currency, the previous one being the revision the bridge compares with; else
    ``None``, and the block says the change in one sentence."""
    from tenantcost.bridge import ClientBridge as Explained
    from tenantcost.bridge import converted_bridge

    if (before is None or before.ledger is None or before.currency != row.currency
            or before.run_id != found.previous.run_id or row.ledger is None):  # fmt: skip
        return None
    parts = found.parts.assign(text=found.parts["reason"])
    ledger = Explained(client, row.month, found.previous.month, row.ledger.currency,
                       found.previous_amount, found.amount, parts, ((), ()), [])  # fmt: skip
    fx = {"ledger_currency": row.ledger.currency}
    shown = converted_bridge(ledger, (int(before.amount), int(row.amount)), row.currency, fx)
    pb = one_client_bridges(
        ClientBridge(found.previous, shown.from_amount, shown.to_amount,
                     shown.parts[["effect", "source", "key", "amount", "reason"]]),
        client, row.month, row.currency,
    )  # fmt: skip
    places = figure_places(row)
    early = _shown(before)
    pb = replace(pb, early_shown={client: early[0]}, early_places=early[1])
    return shown_bridge(pb, client, places, _shown(row)[0])


def _from_bridge(b: ShownBridge, client: str, redact: Callable[[str], str]) -> WhatChanged:
    rows = [
        ChangeRow(_capital(effect_labels(e)), redact(lab), signed(u, b.places), Direction.of(u))
        for lab, e, u in zip(b.labels, b.effects, b.units, strict=True)
    ]
    revision = f", revision {b.vs_revision}" if b.vs_revision else ""
    steps, running = [Step(f"{b.vs}{revision}", 0, _value(b.early, b.places),
                           f"{b.early_text} {b.currency}", total=True)], b.early  # fmt: skip
    for r, u in zip(rows, b.units, strict=True):
        steps.append(Step(f"{r.label}: {r.detail}", _value(running, b.places),
                          _value(running + u, b.places), f"{r.direction} {r.amount}"))  # fmt: skip
        running += u
    steps.append(Step(b.month, 0, _value(b.late, b.places), f"{b.late_text} {b.currency}", True))
    svg = waterfall(
        "what-changed-chart",
        f"{client}: from {b.vs} to {b.month}",
        "; ".join(f"{s.label}: {s.text}" for s in steps),
        steps,
        signed=True,
    )
    return _view(b.vs, b.vs_revision, b.month, b.currency, (b.early_text, b.late_text),
                 (b.early, b.late), b.places, rows, Markup(svg))  # fmt: skip


def _from_rows(before: FigureRow, row: FigureRow) -> WhatChanged:
    """Without a bridge: the change between the two figures as shown, in one sentence."""
    ends = [_shown(before), _shown(row)]
    places = max(ends[0][1], ends[1][1])
    units = tuple(u * 10 ** (places - p) for u, p in ends)
    texts = (format_units(*ends[0]), format_units(*ends[1]))
    return _view(before.month, before.revision, row.month, row.currency, texts,
                 (units[0], units[1]), places, [], Markup(""))  # fmt: skip


def _view(
    vs: str,
    vs_revision: int | None,
    month: str,
    currency: str,
    texts: tuple[str, str],
    units: tuple[int, int],
    places: int,
    rows: list[ChangeRow],
    svg: Markup,
) -> WhatChanged:
    change = units[1] - units[0]
    direction = Direction.of(change)
    share = f" ({format_share(change / units[0])})" if units[0] and change else ""
    moved = (
        f"{direction} {format_units(abs(change), places)} {currency}{share}"
        if change
        else "unchanged"
    )
    summary = f"{texts[1]} {currency} in {month}, {moved} from {texts[0]} {currency} in {vs}."
    compared = f"Compared with {vs}" + (f", revision {vs_revision}" if vs_revision else "")
    return WhatChanged(
        f"What changed since {vs}", summary, compared, direction,
        f"{signed(change, places)} {currency}", compared.removeprefix("Compared with "),
        month, texts, rows, currency, svg,
    )  # fmt: skip


def _shown(row: FigureRow) -> tuple[int, int]:
    """A figure row's displayed figure (units, decimals): the run's one rounding."""
    places = figure_places(row)
    if row.shown is not None:
        return int(row.shown), places
    return round_for_display([int(row.amount)], places)[0], places


def _value(units: int, places: int) -> float:
    return units / 10**places


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


__all__ = ["ChangeRow", "Direction", "WhatChanged", "signed", "what_changed"]
