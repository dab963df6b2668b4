"""Charts as inline SVG: self-contained (no script, no file), deterministic, readable in print.

Every bar carries its label and its value as text, so a chart reads without colour and the same
markup renders in a browser and in WeasyPrint's PDF. Each chart has a ``<title>`` and a
``<desc>`` (``role="img"``, ``aria-labelledby``) for screen readers; the tables next to the
charts hold the same figures.

Why no ``viewBox``: a chart drawn in a fixed coordinate space is scaled to its box, text
included, so on a 390 px phone an 11 px label of a 680-unit chart shrank to 5 px. These bar
charts are laid out in the box's own pixels instead: the SVG is ``width="100%"`` of its
container with a fixed pixel height, bars are placed in percentages of that width, and
every text is 11 px at any width. Each row is a line of text (the label on the left, the
value right-aligned) above its bar, so nothing needs a label column wider than a phone.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

WIDTH = 680
"""The drawing width of the charts that still use a ``viewBox`` (unit economics)."""
ROW_H = 36
TEXT_H = 14
BAR_H = 12
TOP = 6
VALUE_SPACE = 3.0
"""Percent of the width kept free right of the longest bar, so its end stays visible."""


@dataclass(frozen=True)
class Bar:
    """One bar: its label, its value (any unit, for length) and the text printed at the right
    end of its row."""

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


FILL = {
    "bar": "#4a78a8",
    "bar emphasis": "#1d3557",
    "bar total": "#555555",
    "bar rise": "#b3261e",
    "bar fall": "#2e7d32",
}
"""``rise``/``fall``: a signed waterfall's steps up and down (their texts carry the sign too,
so the colour is never the only cue)."""
FONT_SIZE = 11
"""Every chart text, in CSS pixels: the floor for readable chart text on a phone."""
FONT = f'font-family="Liberation Sans, DejaVu Sans, Arial, sans-serif" font-size="{FONT_SIZE}"'


def _open(height: int, title: str, desc: str, chart_id: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'width="100%" height="{height}" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" {FONT} fill="#1a1a1a">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>',
    ]


def _scale(low: float, high: float) -> tuple[float, float]:
    """(x of zero, percent of the width per unit) for values between low and high."""
    low, high = min(low, 0.0), max(high, 0.0)
    span = high - low or 1.0
    per = (100.0 - VALUE_SPACE) / span
    return (-low) * per, per


def _row(top: int, label: str, value: str) -> list[str]:
    """The text line of a row: the label at the left, the value at the right edge."""
    y = top + TEXT_H - 3
    return [
        f'<text class="label" x="0" y="{y}"><title>{escape(label)}</title>'
        f"{escape(_short(label))}</text>",
        f'<text class="value" x="100%" y="{y}" text-anchor="end">{escape(value)}</text>',
    ]


def _bar(cls: str, x0: float, x1: float, y: int) -> str:
    return (
        f'<rect class="{cls}" x="{x0:.2f}%" y="{y}" width="{max(x1 - x0, 0.2):.2f}%" '
        f'height="{BAR_H}" fill="{FILL[cls]}"/>'
    )


def _axis(zero: float, height: int) -> str:
    return (
        f'<line class="axis" x1="{zero:.2f}%" y1="{TOP + TEXT_H}" x2="{zero:.2f}%" '
        f'y2="{height - TOP}" stroke="#333333"/>'
    )


def _height(rows: int) -> int:
    return TOP * 2 + ROW_H * max(rows, 1)


def _step_class(step: Step, signed: bool) -> str:
    if step.total:
        return "bar total"
    if signed and step.end != step.start:
        return "bar rise" if step.end > step.start else "bar fall"
    return "bar"


def bar_chart(chart_id: str, title: str, desc: str, bars: list[Bar]) -> str:
    """Horizontal bars with a zero line; emphasised bars are darker and say so in their label."""
    height = _height(len(bars))
    zero, per = _scale(
        min((b.value for b in bars), default=0.0), max((b.value for b in bars), default=0.0)
    )
    out = _open(height, title, desc, chart_id)
    for i, bar in enumerate(bars):
        top = TOP + i * ROW_H
        x0, x1 = sorted((zero, zero + bar.value * per))
        out += _row(top, bar.label, bar.text)
        out.append(_bar("bar emphasis" if bar.emphasis else "bar", x0, x1, top + TEXT_H + 2))
    out.append(_axis(zero, height))
    out.append("</svg>")
    return "\n".join(out)


def waterfall(chart_id: str, title: str, desc: str, steps: list[Step], signed: bool = False) -> str:
    """A horizontal waterfall: each step floats from the running total; totals start at zero.
    ``signed``: steps up and steps down in two colours (a bridge's rises and falls)."""
    height = _height(len(steps))
    values = [v for s in steps for v in (s.start, s.end)]
    zero, per = _scale(min(values, default=0.0), max(values, default=0.0))
    out = _open(height, title, desc, chart_id)
    previous_end: float | None = None
    for i, step in enumerate(steps):
        top = TOP + i * ROW_H
        y = top + TEXT_H + 2
        a, b = (0.0, step.end) if step.total else (step.start, step.end)
        x0, x1 = sorted((zero + a * per, zero + b * per))
        out += _row(top, step.label, step.text)
        if previous_end is not None:
            xc = zero + previous_end * per
            out.append(
                f'<line class="connector" x1="{xc:.2f}%" y1="{y - ROW_H + BAR_H}" '
                f'x2="{xc:.2f}%" y2="{y}" stroke="#777777" stroke-dasharray="2 2"/>'
            )
        out.append(_bar(_step_class(step, signed), x0, x1, y))
        previous_end = step.end
    out.append(_axis(zero, height))
    out.append("</svg>")
    return "\n".join(out)
