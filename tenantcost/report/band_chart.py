"""The month-to-date projection against its budget band, as an inline SVG (the watch, seen).

``tenantcost watch`` says where a month is heading (month to date, projected by the run rate)
and where its budget band lies (low, expected, high); a table of five figures makes the
reader do the comparison. This chart does it: three rows on one scale, the band as a shaded
span with a tick at ``expected``, then the month to date and the projection as bars, the
projection's bar darker when it leaves the band. It is drawn like the other charts of
:mod:`tenantcost.report.charts` (each row a line of text over its bar, 11 px text at any
width, ``<title>`` and ``<desc>``, no script), so it reads without colour: every value is
written beside its bar and the status is in the title.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from tenantcost.report.charts import BAR_H, FILL, FONT, ROW_H, TEXT_H, TOP, VALUE_SPACE

BAND_FILL = "#d9e2ec"
EXPECTED_STROKE = "#1a1a1a"


@dataclass(frozen=True)
class BandFigures:
    """The figures of one chart, as numbers (length) and as the page's texts (labels)."""

    month_to_date: float
    projected: float
    month_to_date_text: str
    projected_text: str
    band: tuple[float, float, float] | None
    """``(low, expected, high)``; ``None``: no budget."""
    band_text: str
    outside: bool
    """The projection leaves the band (drawn darker, and said in the label)."""


def band_chart(chart_id: str, title: str, desc: str, f: BandFigures) -> str:
    """Three rows on one scale from zero: the band, the month to date, the projection."""
    high = max([f.month_to_date, f.projected, *(f.band or ())], default=0.0) or 1.0
    per = (100.0 - VALUE_SPACE) / high
    rows = 3 if f.band is not None else 2
    height = TOP * 2 + ROW_H * rows
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="100%" '
        f'height="{height}" aria-labelledby="{chart_id}-t {chart_id}-d" {FONT} fill="#1a1a1a">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>',
    ]

    def text_row(top: int, label: str, value: str) -> None:
        y = top + TEXT_H - 3
        out.append(f'<text class="label" x="0" y="{y}">{escape(label)}</text>')
        out.append(f'<text class="value" x="100%" y="{y}" text-anchor="end">{escape(value)}'
                   "</text>")  # fmt: skip

    def bar(cls: str, start: float, end: float, y: int, fill: str) -> None:
        x0, x1 = sorted((max(start, 0.0) * per, max(end, 0.0) * per))
        out.append(f'<rect class="{cls}" x="{x0:.2f}%" y="{y}" width="{max(x1 - x0, 0.2):.2f}%" '
                   f'height="{BAR_H}" fill="{fill}"/>')  # fmt: skip

    top = TOP
    if f.band is not None:
        low, expected, high_ = f.band
        text_row(top, "budget band (low to high, tick: expected)", f.band_text)
        y = top + TEXT_H + 2
        bar("band", low, high_, y, BAND_FILL)
        x = expected * per
        out.append(
            f'<line class="expected" x1="{x:.2f}%" y1="{y - 2}" x2="{x:.2f}%" '
            f'y2="{y + BAR_H + 2}" stroke="{EXPECTED_STROKE}" stroke-width="2"/>'
        )
        top += ROW_H
    text_row(top, "month to date", f.month_to_date_text)
    bar("bar", 0.0, f.month_to_date, top + TEXT_H + 2, FILL["bar"])
    top += ROW_H
    label = "projected for the month" + (" (outside the band)" if f.outside else "")
    text_row(top, label, f.projected_text)
    bar("bar emphasis" if f.outside else "bar total", 0.0, f.projected, top + TEXT_H + 2,
        FILL["bar emphasis"] if f.outside else FILL["bar total"])  # fmt: skip
    out.append("</svg>")
    return "\n".join(out)
