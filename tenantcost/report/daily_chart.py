"""The daily cost per source as a server-rendered SVG: a column per day stacked by source, each
flagged day marked by a shape and a text label and linking to its day.

The watch's pages (:mod:`tenantcost.service.watch_daily_view`) run no JavaScript, so the chart
is drawn here from figures the caller already rounded into text. An anomaly is never shown
by colour alone: its day carries a triangle (up for a spike, down for a drop, a diamond when
a day has both) and a label ("spike", "drop", "3 anomalies") in the marker band above the
columns, inside a link to the day's row of the table beside the chart. 340 px wide like the
trend charts, so it fits a 390 px phone; ``<title>``/``<desc>`` give its text alternative.
Its role is ``group``, not ``img``: an image's children are presentational, and these hold
links a keyboard must reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT, LEFT, TOP, BOTTOM, MARK_H, FONT = 340, 240, 56, 4, 34, 52, 12
COLOURS = ("#4a78a8", "#d08c2c", "#5b9a5b", "#a8504a", "#7a62a8", "#3d8f8f", "#8a8a3d")
"""The trend charts' fills (the legend and table name each source, never colour alone)."""
MARK_FILL = "#b3261e"


@dataclass(frozen=True)
class DayColumn:
    """One day: its amount per source (currency units, for the scale only) and its text."""

    day: str
    amounts: dict[str, float]
    text: str
    """The day's figures as shown, for the column's tooltip."""


@dataclass(frozen=True)
class DayMark:
    """A flagged day: its shape (``spike``, ``drop`` or ``both``), label and link."""

    day: str
    shape: str
    label: str
    title: str
    href: str


def _marker(x: float, shape: str) -> str:
    y = TOP + 8
    if shape == "spike":
        points = f"{x - 5:.1f},{y + 4} {x + 5:.1f},{y + 4} {x:.1f},{y - 5}"
    elif shape == "drop":
        points = f"{x - 5:.1f},{y - 5} {x + 5:.1f},{y - 5} {x:.1f},{y + 4}"
    else:
        points = f"{x:.1f},{y - 6} {x + 5:.1f},{y} {x:.1f},{y + 6} {x - 5:.1f},{y}"
    return f'<polygon points="{points}" fill="{MARK_FILL}"/>'


def daily_chart(
    chart_id: str,
    title: str,
    desc: str,
    currency: str,
    columns: list[DayColumn],
    sources: list[str],
    marks: list[DayMark],
) -> str:
    """Columns per day stacked by ``sources`` (in that order), ``marks`` above their days."""
    colour = {s: COLOURS[i % len(COLOURS)] for i, s in enumerate(sources)}
    high = max([sum(max(a, 0.0) for a in c.amounts.values()) for c in columns] + [0.0]) or 1.0
    plot_top = TOP + MARK_H
    plot_h = HEIGHT - plot_top - BOTTOM
    step = (WIDTH - LEFT - 4) / max(len(columns), 1)
    x_of = {c.day: LEFT + step * (i + 0.5) for i, c in enumerate(columns)}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart daily-chart" role="group" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" font-size="{FONT}" '
        f'font-family="Liberation Sans, DejaVu Sans, Arial, sans-serif" fill="#1a1a1a">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>',
    ]
    for c in columns:
        base = float(plot_top + plot_h)
        x = x_of[c.day] - step * 0.35
        for source in sources:
            h = max(c.amounts.get(source, 0.0), 0.0) / high * plot_h
            if h <= 0:
                continue
            base -= h
            out.append(f'<rect x="{x:.1f}" y="{base:.1f}" width="{step * 0.7:.1f}" '
                       f'height="{h:.1f}" fill="{colour[source]}"><title>{escape(c.day)} '
                       f"{escape(source)}</title></rect>")  # fmt: skip
        out.append(f'<rect x="{x_of[c.day] - step / 2:.1f}" y="{plot_top}" '
                   f'width="{step:.1f}" height="{plot_h}" fill="none" pointer-events="all">'
                   f"<title>{escape(c.text)}</title></rect>")  # fmt: skip
    for m in marks:
        if m.day not in x_of:
            continue
        x = x_of[m.day]
        out.append(f'<a href="{escape(m.href)}" aria-label="{escape(m.title)}">'
                   f"<title>{escape(m.title)}</title>{_marker(x, m.shape)}"
                   f'<text x="{x + 4:.1f}" y="{TOP + 18}" transform="rotate(90 {x + 4:.1f} '
                   f'{TOP + 18})" font-size="10" fill="{MARK_FILL}">{escape(m.label)}</text>'
                   f'<line x1="{x:.1f}" y1="{plot_top}" x2="{x:.1f}" y2="{plot_top + plot_h}" '
                   f'stroke="{MARK_FILL}" stroke-dasharray="2 2"/></a>')  # fmt: skip
    out += [
        f'<line x1="{LEFT}" y1="{plot_top}" x2="{LEFT}" y2="{plot_top + plot_h}" '
        'stroke="#333333"/>',
        f'<line x1="{LEFT}" y1="{plot_top + plot_h}" x2="{WIDTH - 4}" y2="{plot_top + plot_h}" '
        f'stroke="#333333"/>',
        f'<text x="2" y="{plot_top + 10}">{escape(f"{high:.6g}")}</text>',
        f'<text x="2" y="{plot_top + plot_h}">0</text>',
        f'<text x="2" y="{plot_top + plot_h // 2}">{escape(currency)}</text>',
    ]
    every = max(1, len(columns) // 6)  # about six day labels on a phone
    for i, c in enumerate(columns):
        if i % every == 0 or i == len(columns) - 1:
            out.append(f'<text x="{x_of[c.day]:.1f}" y="{HEIGHT - BOTTOM + 16}" '
                       f'text-anchor="middle">{escape(c.day[8:])}</text>')  # fmt: skip
    out.append(f'<text x="{(LEFT + WIDTH) // 2}" y="{HEIGHT - 4}" text-anchor="middle">'
               "day of the month (UTC)</text>")  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)


__all__ = ["DayColumn", "DayMark", "daily_chart"]
