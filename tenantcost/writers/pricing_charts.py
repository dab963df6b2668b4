"""The pricing page's two charts, per plan (or segment): cost per client and gross margin.

Why not the unit-economics page's strip plot and scatter (:mod:`tenantcost.report.
economics_page`): those draw one mark per client, which a phone cannot read at 10,000
clients, and the page is a file, not a served page. These draw one bar per group (a handful),
on a 360-unit-wide canvas drawn at its own size (never scaled up, only down to the frame), so
at 390 px every text stays at :data:`FONT_SIZE` px (chart text must never read below 11 px on
a phone: docs/service.md, "Every page and sheet fits 390 px"). Each chart has a ``<title>``
and ``<desc>``, both axes carry a title with the unit, and the figures are also in the page's
tables. Input is the ``unit-economics --format json`` document's groups, so the bars show
exactly the figures of the JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from tenantcost.money import MICROS_PER_UNIT

WIDTH = 360
LEFT = 104
"""Room for the group names (cut to :data:`LABEL_CHARS`, the full name in a ``<title>``)."""
RIGHT = 18
TOP = 26
BAR = 20
STEP = 30
AXIS = 48
"""Below the bars: tick labels and the x-axis title."""
FONT_SIZE = 12
LABEL_CHARS = 13
NO_GROUP = "(none)"
FONT = 'font-family="Liberation Sans, DejaVu Sans, Arial, sans-serif"'


def _open(height: int, title: str, desc: str, chart_id: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" {FONT} font-size="{FONT_SIZE}" '
        f'fill="#1a1a1a"><title id="{chart_id}-t">{escape(title)}</title>'
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>'
    )


def _label(name: str | None) -> str:
    shown = name if name else NO_GROUP
    cut = shown if len(shown) <= LABEL_CHARS else shown[: LABEL_CHARS - 1] + "…"
    return f"<title>{escape(shown)}</title>{escape(cut)}"


def _frame(height: int, y_title: str, x_title: str, ticks: Sequence[tuple[float, str]]) -> str:
    """Both axes with their titles, and the x ticks (position in chart units, label)."""
    base = height - AXIS
    parts = [
        f'<text x="{LEFT - 6}" y="{TOP - 10}" text-anchor="end" font-weight="bold">'
        f"{escape(y_title)}</text>",
        f'<line x1="{LEFT}" y1="{TOP - 4}" x2="{LEFT}" y2="{base}" stroke="#333333"/>',
        f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" stroke="#333333"/>',
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.1f}" y="{height - 6}" text-anchor="middle" '
        f'font-weight="bold">{escape(x_title)}</text>',
    ]
    for x, text in ticks:  # two or three ticks
        anchor = "start" if x <= LEFT + 1 else "end" if x >= WIDTH - RIGHT - 1 else "middle"
        parts.append(
            f'<line x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}" stroke="#333333"/>'
            f'<text x="{x:.1f}" y="{base + 18}" text-anchor="{anchor}">{escape(text)}</text>'
        )
    return "".join(parts)


def _height(groups: Sequence[Any]) -> int:
    return TOP + STEP * max(len(groups), 1) + AXIS


def cost_chart(
    groups: list[dict[str, Any]], by: str, currency: str, chart_id: str = "pricing-cost"
) -> str:
    """Mean all-in cost per client of each group (bar), the mean attributed cost inside it
    (darker bar): what a client of the plan costs, with and without its residual share. A
    plan of the catalog with no client with a figure in the month has no mean: it says so."""
    height = _height(groups)
    means = [g["all_in_cost_per_client"]["mean"] for g in groups]
    top = max([int(m) for m in means if m is not None] + [1])
    per = (WIDTH - LEFT - RIGHT) / top
    bars = []
    for i, g in enumerate(groups):  # one bar per plan: a handful
        y = TOP + i * STEP
        bars.append(f'<text x="{LEFT - 6}" y="{y + BAR / 2 + 4:.1f}" text-anchor="end">'
                    f"{_label(g[by])}</text>")  # fmt: skip
        if means[i] is None or g["cost_per_client"]["mean"] is None:
            bars.append(f'<text x="{LEFT + 4}" y="{y + BAR / 2 + 4:.1f}">no client figure</text>')
            continue
        all_in = int(g["all_in_cost_per_client"]["mean"])
        cost = int(g["cost_per_client"]["mean"])
        bars.append(
            f'<rect class="bar all-in" x="{LEFT}" y="{y}" width="{all_in * per:.1f}" '
            f'height="{BAR}" fill="#9db7d5"><title>all-in {all_in / MICROS_PER_UNIT:,.6f} '
            f"{escape(currency)}</title></rect>"
            f'<rect class="bar cost" x="{LEFT}" y="{y + 5}" width="{cost * per:.1f}" '
            f'height="{BAR - 10}" fill="#1d3557"><title>attributed {cost / MICROS_PER_UNIT:,.6f} '
            f"{escape(currency)}</title></rect>"
        )
    ticks = [(LEFT, "0"), (WIDTH - RIGHT, f"{top / MICROS_PER_UNIT:,.2f}")]
    title = f"Cost per client by {by}"
    desc = (
        f"Mean cost of a client of each {by}, in {currency}: the light bar is the all-in "
        "cost (with its share of the residual), the dark bar the attributed cost."
    )
    x_title = f"mean cost per client, {currency}"
    body = "".join(bars) + _frame(height, by, x_title, ticks)
    return _open(height, title, desc, chart_id) + body + "</svg>"


def margin_chart(
    groups: list[dict[str, Any]],
    by: str,
    margin_floor: float | None,
    chart_id: str = "pricing-margin",
) -> str:
    """Gross margin of each group in % of its revenue (bars from 0, red below the floor),
    the margin floor as a dashed line; a group without revenue says so."""
    height = _height(groups)
    pcts = [100 * float(g["margin_pct"]) for g in groups if g["margin_pct"] is not None]
    floor = None if margin_floor is None else 100 * float(margin_floor)
    lo = min([0.0, *pcts, *([floor] if floor is not None else [])])
    hi = max([0.0, *pcts, *([floor] if floor is not None else [])])
    hi = hi if hi > lo else lo + 100.0
    per = (WIDTH - LEFT - RIGHT) / (hi - lo)

    def at(pct: float) -> float:
        return LEFT + (pct - lo) * per

    bars = []
    for i, g in enumerate(groups):  # one bar per plan: a handful
        y = TOP + i * STEP
        bars.append(f'<text x="{LEFT - 6}" y="{y + BAR / 2 + 4:.1f}" text-anchor="end">'
                    f"{_label(g[by])}</text>")  # fmt: skip
        if g["margin_pct"] is None:
            bars.append(f'<text x="{at(0.0) + 4:.1f}" y="{y + BAR / 2 + 4:.1f}">no revenue</text>')
            continue
        pct = 100 * float(g["margin_pct"])
        under = floor is not None and pct < floor
        x0, x1 = sorted((at(0.0), at(pct)))
        bars.append(
            f'<rect class="bar margin" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.0):.1f}" '
            f'height="{BAR}" fill="{"#9b1c1c" if under else "#1e6b34"}">'
            f"<title>{pct:.1f} %</title></rect>"
        )
    base = height - AXIS
    marks = [f'<line x1="{at(0.0):.1f}" y1="{TOP - 4}" x2="{at(0.0):.1f}" y2="{base}" '
             'stroke="#333333"/>']  # fmt: skip
    if floor is not None:
        marks.append(
            f'<line class="floor" x1="{at(floor):.1f}" y1="{TOP - 4}" x2="{at(floor):.1f}" '
            f'y2="{base}" stroke="#8a5a00" stroke-dasharray="4 3">'
            f"<title>margin floor {floor:.1f} %</title></line>"
        )
    ticks: list[tuple[float, str]] = [(LEFT, f"{lo:.0f} %"), (WIDTH - RIGHT, f"{hi:.0f} %")]
    if lo < 0 < hi:
        ticks.insert(1, (at(0.0), "0 %"))
    desc = (
        f"Gross margin of each {by} (revenue minus all-in cost) in % of its revenue; red bars "
        "are under the margin floor (dashed line)."
    )
    body = "".join(bars) + "".join(marks) + _frame(height, by, "gross margin, % of revenue", ticks)
    return _open(height, f"Gross margin by {by}", desc, chart_id) + body + "</svg>"
