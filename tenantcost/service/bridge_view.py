"""A client's bridge against the previous month, as the API and the client page show it.

The figures are :mod:`tenantcost.store.month_bridge`'s (``explain``'s parts, computed from the
stored runs against the previous month's latest issued revision). Both surfaces name the
revision compared with, since a restated previous month changes the bridge.

* ``GET /api/v1/clients/{id}/months/{M}`` gains ``bridge``: ``previous_month``,
  ``previous_revision``, ``previous_amount``, ``difference`` (this month's amount minus the
  previous one: the statement's own ``difference`` stays revision against revision) and
  ``parts``, one per effect and source (``part`` in ``explain``'s vocabulary), exact
  micro-units that add up to ``difference``; ``null`` without a previous month.
* The client page lists the parts rounded to the page's decimals by largest remainder
  (:func:`tenantcost.report.changes.bridge_notice`, the sheet's own rows) and draws them as a
  small waterfall, narrow enough for a phone (340 px wide, 12 px text).

Source names reach a client-scoped reader through the store's redaction (other clients' ids
out of them), like every other free text (:func:`tenantcost.service.figures.reader_text`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from html import escape
from typing import Any

import pandas as pd
from markupsafe import Markup
from sqlalchemy import Engine

from tenantcost.report.changes import PackBridges, bridge_notice
from tenantcost.service.figures import reader_text
from tenantcost.service.permissions import Principal
from tenantcost.store.data import DataDir
from tenantcost.store.month_bridge import ClientBridge, client_bridge
from tenantcost.store.shown import RunShown, run_shown


def bridge_document(
    engine: Engine,
    principal: Principal,
    client: str,
    month: str,
    run_id: str,
    data: DataDir | None = None,
) -> dict[str, Any] | None:
    """The API's ``bridge`` object of ``client`` for the run shown (``None``: no previous
    month, or the client has no figure in it). Parts of one effect and source over several
    keys are summed (the key is not in the contract), zero parts left out."""
    found = client_bridge(engine, month, run_id, client, data)
    if found is None:
        return None
    redact = reader_text(engine, principal, client)
    parts = found.parts.groupby(["effect", "source"], sort=False, as_index=False)["amount"].sum()
    parts = parts.loc[parts["amount"] != 0]
    return {
        "previous_month": found.previous.month,
        "previous_revision": found.previous.revision,
        "previous_amount": found.previous_amount,
        "difference": found.difference,
        "parts": [
            {"part": str(e), "source": redact(str(s)), "amount": int(a)}
            for e, s, a in zip(parts["effect"], parts["source"], parts["amount"], strict=True)
        ],  # one client's parts: a handful
    }


@dataclass(frozen=True)
class BridgeRow:
    label: str
    amount: str
    part: str


@dataclass(frozen=True)
class BridgeView:
    """The client page's bridge section."""

    title: str
    compared: str
    """``Compared with 2026-09, revision 2``."""
    text: str
    rows: list[BridgeRow]
    svg: Markup


def bridge_view(
    engine: Engine,
    principal: Principal,
    client: str,
    month: str,
    run_id: str,
    places: int,
    data: DataDir | None = None,
) -> BridgeView | None:
    """The section, or ``None`` without a bridge."""
    found = client_bridge(engine, month, run_id, client, data)
    if found is None:
        return None
    currency = _currency(engine, run_id)
    pb = _one_client(found, client, month, currency)
    before = run_shown(engine, found.previous.run_id)  # each end as its own pages show it
    now = run_shown(engine, run_id)
    pb = replace(pb, early_shown=_own(before, client), early_places=before.places)
    late = now.amount(client) if now.places == places else None
    notice = bridge_notice(pb, client, places, late)
    if notice is None:
        return None
    redact = reader_text(engine, principal, client)
    title, text, rows = notice
    shown = [BridgeRow(redact(a), b, c) for a, b, c in rows]
    compared = f"Compared with {found.previous.month}, revision {found.previous.revision}"
    svg = bridge_chart(f"{client}: from {found.previous.month} to {month}", shown, currency)
    return BridgeView(redact(title), compared, redact(text), shown, svg)


def _own(shown: RunShown, client: str) -> dict[str, int]:
    """The client's own displayed figure of a run (never another client's)."""
    amount = shown.amount(client)
    return {} if amount is None else {client: amount}


def _currency(engine: Engine, run_id: str) -> str:
    from sqlalchemy import select

    from tenantcost.store.models import Run, table

    query = select(table(Run).c.currency).where(table(Run).c.id == run_id)
    with engine.connect() as connection:
        return str(connection.execute(query).scalar_one())


def _one_client(found: ClientBridge, client: str, month: str, currency: str) -> PackBridges:
    amounts = pd.DataFrame(
        {"early": [found.previous_amount], "late": [found.amount],
         "change": [found.difference]}, index=[client],
    )  # fmt: skip
    parts = found.parts.assign(client=client)
    return PackBridges(found.previous.month, month, currency, amounts, parts,
                       {client: (0, len(parts))}, found.previous.revision)  # fmt: skip


def cache_in_background(engine: Engine, month: str, data: DataDir | None) -> None:
    """After a close through the service: cache the bridges its sheets will show
    (:func:`tenantcost.store.month_bridge.cache_after_close`) in a thread, so the close
    answers at once; a reader meanwhile gets its own client's bridge computed alone."""
    import logging
    import threading

    from tenantcost.store.month_bridge import cache_after_close

    def work() -> None:
        try:
            cache_after_close(engine, month, data)
        except Exception:  # a cache: the next reader computes it; never lose the error
            logging.getLogger("tenantcost.service").exception("caching the bridges failed")

    threading.Thread(target=work, name=f"bridges-{month}", daemon=True).start()


# --------------------------------------------------------------------------- the chart

WIDTH = 340
ROW = 38
FONT = 12
TOP = 6


def _value(text: str) -> float:
    return float(text.replace(",", "").replace("+", "") or 0)


def bridge_chart(title: str, rows: list[BridgeRow], currency: str) -> Markup:
    """A waterfall of the rows (first and last: the two months' amounts, from zero; between:
    each part from the running total), one row per step: its label above the bar with the
    amount at the right, so nothing is squeezed at phone width. The axis names its unit."""
    values = [_value(r.amount) for r in rows]
    running, spans = 0.0, []
    for i, value in enumerate(values):
        if i in (0, len(values) - 1):
            spans.append((0.0, value))
            running = value
        else:
            spans.append((running, running + value))
            running += value
    low = min([0.0, *(v for s in spans for v in s)])
    high = max([0.0, *(v for s in spans for v in s)])
    per = (WIDTH - 8) / ((high - low) or 1.0)
    zero = 4 + (-low) * per
    height = TOP + ROW * len(rows) + 22
    desc = "; ".join(f"{r.label}: {r.amount} {currency}" for r in rows)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart bridge-chart" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-labelledby="bridge-chart-t bridge-chart-d" font-size="{FONT}" '
        f'font-family="Liberation Sans, DejaVu Sans, Arial, sans-serif" fill="#1a1a1a">',
        f'<title id="bridge-chart-t">{escape(title)}</title>',
        f'<desc id="bridge-chart-d">{escape(desc)}</desc>',
    ]
    for i, (row, (a, b)) in enumerate(zip(rows, spans, strict=True)):
        y = TOP + i * ROW
        label = row.label if len(row.label) <= 36 else row.label[:35] + "…"
        x0, x1 = sorted((zero + a * per, zero + b * per))
        fill = "#555555" if i in (0, len(rows) - 1) else "#4a78a8"
        out += [
            f'<text x="4" y="{y + 13}"><title>{escape(row.label)}</title>{escape(label)}</text>',
            f'<text x="{WIDTH - 4}" y="{y + 13}" text-anchor="end">{escape(row.amount)}</text>',
            f'<rect x="{x0:.1f}" y="{y + 18}" width="{max(x1 - x0, 1.0):.1f}" height="14" '
            f'fill="{fill}"/>',
        ]
    axis_y = TOP + ROW * len(rows)
    out += [
        f'<line x1="{zero:.1f}" y1="{TOP}" x2="{zero:.1f}" y2="{axis_y}" stroke="#333333"/>',
        f'<line x1="4" y1="{axis_y}" x2="{WIDTH - 4}" y2="{axis_y}" stroke="#333333"/>',
        f'<text x="{WIDTH // 2}" y="{axis_y + 16}" text-anchor="middle">'
        f"amount, {escape(currency)} (bars from 0 at the vertical line)</text>",
        "</svg>",
    ]
    return Markup("\n".join(out))  # every text escaped above


__all__ = ["BridgeRow", "BridgeView", "bridge_chart", "bridge_document", "bridge_view"]
