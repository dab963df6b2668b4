"""Charts as inline SVG: self-contained (no script, no file), deterministic, readable in print.

Every bar carries its label and its value as text, so a chart reads without colour and the same
markup renders in a browser and in WeasyPrint's PDF. Each chart has a ``<title>`` and a
``<desc>`` (``role="img"``, ``aria-labelledby``) for screen readers; the tables next to the
charts hold the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

WIDTH = 680
LABEL_W = 230
VALUE_W = 120
ROW_H = 26
BAR_H = 16
TOP = 8


@dataclass(frozen=True)
class Bar:
    """One bar: its label, its value (any unit, for length) and the text printed next to it."""

    label: str
    value: float
    text: str
    emphasis: bool = False


@dataclass(frozen=True)
class Step:
    """One waterfall step from ``start`` to ``end``; a total is drawn from zero in full."""

    label: str
    start: float
    end: float
    text: str
    total: bool = False


def _short(label: str, limit: int = 34) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


FILL = {"bar": "#4a78a8", "bar emphasis": "#1d3557", "bar total": "#555555"}
FONT = 'font-family="Liberation Sans, DejaVu Sans, Arial, sans-serif" font-size="11"'


def _open(height: int, title: str, desc: str, chart_id: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" {FONT} fill="#1a1a1a">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>',
    ]


def _scale(low: float, high: float) -> tuple[float, float]:
    """(x of zero, pixels per unit) for values between low and high."""
    low, high = min(low, 0.0), max(high, 0.0)
    span = high - low or 1.0
    width = WIDTH - LABEL_W - VALUE_W
    per = width / span
    return LABEL_W + (-low) * per, per


def _row(y: int, label: str) -> list[str]:
    return [
        f'<text class="label" x="{LABEL_W - 8}" y="{y + BAR_H - 3}" text-anchor="end">'
        f"<title>{escape(label)}</title>{escape(_short(label))}</text>"
    ]


def bar_chart(chart_id: str, title: str, desc: str, bars: list[Bar]) -> str:
    """Horizontal bars with a zero line; emphasised bars are darker and say so in their label."""
    height = TOP * 2 + ROW_H * max(len(bars), 1)
    zero, per = _scale(
        min((b.value for b in bars), default=0.0), max((b.value for b in bars), default=0.0)
    )
    out = _open(height, title, desc, chart_id)
    for i, bar in enumerate(bars):
        y = TOP + i * ROW_H + (ROW_H - BAR_H) // 2
        x0, x1 = sorted((zero, zero + bar.value * per))
        cls = "bar emphasis" if bar.emphasis else "bar"
        out += _row(y, bar.label)
        out.append(
            f'<rect class="{cls}" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.0):.1f}" '
            f'height="{BAR_H}" fill="{FILL[cls]}"/>'
        )
        out.append(
            f'<text class="value" x="{max(x1, zero) + 6:.1f}" y="{y + BAR_H - 3}">'
            f"{escape(bar.text)}</text>"
        )
    out.append(
        f'<line class="axis" x1="{zero:.1f}" y1="{TOP - 4}" x2="{zero:.1f}" '
        f'y2="{height - TOP + 4}" stroke="#333333"/>'
    )
    out.append("</svg>")
    return "\n".join(out)


def waterfall(chart_id: str, title: str, desc: str, steps: list[Step]) -> str:
    """A horizontal waterfall: each step floats from the running total; totals start at zero."""
    height = TOP * 2 + ROW_H * max(len(steps), 1)
    values = [v for s in steps for v in (s.start, s.end)]
    zero, per = _scale(min(values, default=0.0), max(values, default=0.0))
    out = _open(height, title, desc, chart_id)
    previous_end: float | None = None
    for i, step in enumerate(steps):
        y = TOP + i * ROW_H + (ROW_H - BAR_H) // 2
        a, b = (0.0, step.end) if step.total else (step.start, step.end)
        x0, x1 = sorted((zero + a * per, zero + b * per))
        cls = "bar total" if step.total else "bar"
        out += _row(y, step.label)
        if previous_end is not None:
            xc = zero + previous_end * per
            out.append(
                f'<line class="connector" x1="{xc:.1f}" y1="{y - (ROW_H - BAR_H):.1f}" '
                f'x2="{xc:.1f}" y2="{y}" stroke="#777777" stroke-dasharray="2 2"/>'
            )
        out.append(
            f'<rect class="{cls}" x="{x0:.1f}" y="{y}" width="{max(x1 - x0, 1.0):.1f}" '
            f'height="{BAR_H}" fill="{FILL[cls]}"/>'
        )
        out.append(
            f'<text class="value" x="{max(x1, zero) + 6:.1f}" y="{y + BAR_H - 3}">'
            f"{escape(step.text)}</text>"
        )
        previous_end = step.end
    out.append(
        f'<line class="axis" x1="{zero:.1f}" y1="{TOP - 4}" x2="{zero:.1f}" '
        f'y2="{height - TOP + 4}" stroke="#333333"/>'
    )
    out.append("</svg>")
    return "\n".join(out)
