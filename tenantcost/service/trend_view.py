"""The client page's trend section: a column per month stacked by source, the budget band on
the open month, and a line of each key metric's unit cost, as server-rendered SVG.

The pages run no JavaScript, so the charts are SVG drawn here from the trend document of
:mod:`tenantcost.service.trend` (the API's figures, nothing computed again). Each chart has a
``<title>``/``<desc>`` and the section a table of the same figures (its text alternative),
labelled axes with the currency and unit, 12 px text, and a link to its CSV. 340 px wide, so
it fits a 390 px phone.

The one chart module of the trends: :func:`columns_chart` (stacked columns per month) draws
the month page's trend (:mod:`tenantcost.service.month_trend`), :func:`lines_chart` (a line
per group, negative values allowed) the pricing page's margin per plan across months
(:mod:`tenantcost.service.plan_margins`), with the same frame, axes and text.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from markupsafe import Markup

from tenantcost.money import MICROS_PER_UNIT, MINOR_UNIT_EXPONENT
from tenantcost.service.trend import PROJECTED, Trend

WIDTH, HEIGHT, LEFT, TOP, BOTTOM, FONT = 340, 200, 56, 10, 34, 12
COLOURS = ("#4a78a8", "#d08c2c", "#5b9a5b", "#a8504a", "#7a62a8", "#3d8f8f", "#8a8a3d")
"""Distinguishable fills; the legend and table name each source (never colour alone)."""


@dataclass(frozen=True)
class TrendRow:
    month: str
    status: str
    amount: str
    sources: str


@dataclass(frozen=True)
class TrendSection:
    svg: Markup
    unit_svgs: list[Markup]
    rows: list[TrendRow]
    currency: str
    csv_href: str
    unit_csv_href: str
    ledger_currency: str | None = None
    """Shown converted: the ledger currency the months were issued in."""
    not_converted: tuple[str, ...] = ()
    """Shown converted: the months left out, with no conversion into ``currency``."""


def decimal_text(micros: int) -> str:
    """:func:`~tenantcost.money.micros_to_decimal_strings` of one amount, in integers: a page
    formats some 200 of them, and a one-row pandas Series each took 150 ms a page."""
    whole, frac = divmod(abs(int(micros)), MICROS_PER_UNIT)
    return f"{'-' if micros < 0 else ''}{whole}.{frac:0{MINOR_UNIT_EXPONENT}d}"


def _open(chart_id: str, title: str, desc: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart trend-chart" role="img" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" font-size="{FONT}" '
        f'font-family="Liberation Sans, DejaVu Sans, Arial, sans-serif" fill="#1a1a1a">',
        f'<title id="{chart_id}-t">{escape(title)}</title>',
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>',
    ]


def _axes(high: float, y_label: str, months: list[str], low: str = "0") -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    step = (WIDTH - LEFT - 4) / max(len(months), 1)
    out = [
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="#333333"/>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - 4}" y2="{TOP + plot_h}" '
        f'stroke="#333333"/>',
        f'<text x="2" y="{TOP + 10}">{escape(f"{high:.6g}")}</text>',
        f'<text x="2" y="{TOP + plot_h}">{escape(low)}</text>',
        f'<text x="2" y="{TOP + plot_h // 2}">{escape(y_label)}</text>',
    ]
    every = max(1, len(months) // 6)  # at most about six month labels on a phone
    for i, month in enumerate(months):
        if i % every == 0 or i == len(months) - 1:
            x = LEFT + step * (i + 0.5)
            out.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
                       f"{escape(month[2:])}</text>")  # fmt: skip
    out.append(f'<text x="{(LEFT + WIDTH) // 2}" y="{HEIGHT - 4}" text-anchor="middle">'
               "month (YY-MM)</text>")  # fmt: skip
    return out


def stacked_chart(trend: Trend) -> Markup:
    """Columns per month stacked by source; the open month's band as a shaded span."""
    months = trend.months
    sources = sorted({s for m in months for s in m.by_source})
    colour = {s: COLOURS[i % len(COLOURS)] for i, s in enumerate(sources)}
    tops = [max(m.amount, (m.budget or {}).get("high", 0)) for m in months]
    high = max([*tops, 1]) / 1e6
    plot_h = HEIGHT - TOP - BOTTOM
    per = plot_h / high
    step = (WIDTH - LEFT - 4) / max(len(months), 1)
    desc = "; ".join(f"{m.month} ({m.status}): {decimal_text(m.amount)} {trend.currency}"
                     for m in months)  # fmt: skip
    out = _open("trend-chart", f"{trend.client}: amount per month by source", desc)
    for i, m in enumerate(months):
        x = LEFT + step * i + step * 0.15
        width = step * 0.7
        base = float(TOP + plot_h)
        if m.budget:
            y_hi = base - m.budget["high"] / 1e6 * per
            y_lo = base - m.budget["low"] / 1e6 * per
            out.append(f'<rect x="{x - step * 0.1:.1f}" y="{y_hi:.1f}" width="{step * 0.9:.1f}" '
                       f'height="{max(y_lo - y_hi, 1):.1f}" fill="#e6e6e6" stroke="#777777" '
                       f'stroke-dasharray="3 2"><title>budget band {decimal_text(m.budget["low"])}'
                       f' to {decimal_text(m.budget["high"])} {escape(trend.currency)}</title>'
                       "</rect>")  # fmt: skip
        for source, amount in m.by_source.items():
            h = max(amount, 0) / 1e6 * per
            base -= h
            pattern = ' fill-opacity="0.55"' if m.status == PROJECTED else ""
            out.append(f'<rect x="{x:.1f}" y="{base:.1f}" width="{width:.1f}" height="{h:.1f}" '
                       f'fill="{colour[source]}"{pattern}><title>{escape(m.month)} '
                       f"{escape(source)}: {decimal_text(amount)}</title></rect>")  # fmt: skip
    out += _axes(high, trend.currency, [m.month for m in months])
    out.append("</svg>")
    return Markup("\n".join(out))  # every text escaped above


def unit_chart(trend: Trend, key: str) -> Markup | None:
    points = [(m.month, m.unit_costs[key]) for m in trend.months if key in m.unit_costs]
    if not points:
        return None
    unit = points[0][1][0]
    high = max(a for _, (_, a) in points) / 1e6 or 1.0
    plot_h = HEIGHT - TOP - BOTTOM
    months = [m.month for m in trend.months]
    step = (WIDTH - LEFT - 4) / max(len(months), 1)
    xy = [(LEFT + step * (months.index(month) + 0.5), TOP + plot_h - a / 1e6 / high * plot_h)
          for month, (_, a) in points]  # fmt: skip
    desc = "; ".join(f"{month}: {decimal_text(a)} {trend.currency} {u}" for month, (u, a) in points)
    chart_id = f"unit-{''.join(c for c in key if c.isalnum())}"
    out = _open(chart_id, f"{trend.client}: cost {unit}", desc)
    out.append('<polyline fill="none" stroke="#4a78a8" stroke-width="2" points="'
               + " ".join(f"{x:.1f},{y:.1f}" for x, y in xy) + '"/>')  # fmt: skip
    out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#4a78a8"/>' for x, y in xy]
    out += _axes(high, f"{trend.currency} {unit}", months)
    out.append("</svg>")
    return Markup("\n".join(out))


def columns_chart(
    chart_id: str,
    title: str,
    months: list[str],
    stacks: list[dict[str, int]],
    unit: str,
    faded: set[int] | frozenset[int] = frozenset(),
) -> Markup:
    """Columns per month, each stacked from its parts (``stacks[i]``: label -> micro-units, in
    drawing order from the axis up); the columns of ``faded`` (e.g. drafts) lighter. Each
    part's ``<title>`` names it; the caller's table beside gives every figure."""
    labels = list(dict.fromkeys(label for stack in stacks for label in stack))
    colour = {label: COLOURS[i % len(COLOURS)] for i, label in enumerate(labels)}
    high = max([sum(max(a, 0) for a in stack.values()) for stack in stacks] + [1]) / 1e6
    plot_h = HEIGHT - TOP - BOTTOM
    per = plot_h / high
    step = (WIDTH - LEFT - 4) / max(len(months), 1)
    desc = "; ".join(f"{m}: " + ", ".join(f"{k} {decimal_text(a)}" for k, a in stack.items())
                     for m, stack in zip(months, stacks, strict=True))  # fmt: skip
    out = _open(chart_id, title, desc)
    for i, (month, stack) in enumerate(zip(months, stacks, strict=True)):  # <= 36 months
        x, base = LEFT + step * i + step * 0.15, float(TOP + plot_h)
        opacity = ' fill-opacity="0.55"' if i in faded else ""
        for label, amount in stack.items():
            h = max(amount, 0) / 1e6 * per
            base -= h
            out.append(f'<rect x="{x:.1f}" y="{base:.1f}" width="{step * 0.7:.1f}" '
                       f'height="{h:.1f}" fill="{colour[label]}"{opacity}><title>'
                       f"{escape(month)} {escape(label)}: {decimal_text(amount)} {escape(unit)}"
                       "</title></rect>")  # fmt: skip
    out += _axes(high, unit, months)
    out.append("</svg>")
    return Markup("\n".join(out))  # every text escaped above


def lines_chart(
    chart_id: str,
    title: str,
    months: list[str],
    series: dict[str, list[float | None]],
    unit: str,
    hollow: set[int] | frozenset[int] = frozenset(),
) -> Markup:
    """A line per series across ``months`` (values in ``unit``, e.g. percent; negative
    allowed; ``None``: no point); the points of ``hollow`` months (e.g. projected) drawn
    hollow. Each point's ``<title>`` names series, month and value."""
    values = [v for vs in series.values() for v in vs if v is not None]
    low, high = min([0.0, *values]), max([0.0, *values])
    span = (high - low) or 1.0
    plot_h = HEIGHT - TOP - BOTTOM
    step = (WIDTH - LEFT - 4) / max(len(months), 1)

    def y(v: float) -> float:
        return TOP + plot_h - (v - low) / span * plot_h

    desc = "; ".join(f"{name}: " + ", ".join(f"{m} {v:.1f}" for m, v in zip(months, vs,
                     strict=True) if v is not None) for name, vs in series.items())  # fmt: skip
    out = _open(chart_id, title, desc)
    if low < 0:
        out.append(f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH - 4}" y2="{y(0):.1f}" '
                   'stroke="#999999" stroke-dasharray="3 2"/>')  # fmt: skip
    for n, (name, vs) in enumerate(series.items()):  # a handful of groups
        colour = COLOURS[n % len(COLOURS)]
        xy = [(i, LEFT + step * (i + 0.5), y(v)) for i, v in enumerate(vs) if v is not None]
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                   + " ".join(f"{px:.1f},{py:.1f}" for _, px, py in xy) + '"/>')  # fmt: skip
        for i, px, py in xy:
            fill = "#ffffff" if i in hollow else colour
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{fill}" '
                       f'stroke="{colour}"><title>{escape(name)} {escape(months[i])}: '
                       f"{vs[i]:.1f} {escape(unit)}</title></circle>")  # fmt: skip
    out += _axes(high, unit, months, low=f"{low:.6g}")
    out.append("</svg>")
    return Markup("\n".join(out))


def _rows(trend: Trend) -> list[TrendRow]:
    """The table's months at the currency's decimals for the whole table (raised so no
    month reads 0.00: :func:`~tenantcost.report.display.auto_places`), as every other figure
    of the page; each month's sources rounded to add up to its amount as shown (largest
    remainder), never a figure to six decimals beside one to two."""
    from tenantcost.money import round_for_display
    from tenantcost.report.display import auto_places, format_amount, format_units

    places = auto_places(trend.currency, [m.amount for m in trend.months])
    out = []
    for m in trend.months:  # at most 36 months, a few sources each
        shown = round_for_display([m.amount], places)[0]
        parts = round_for_display(list(m.by_source.values()), places, total=shown)
        sources = ", ".join(f"{s} {format_units(u, places)}"
                            for s, u in zip(m.by_source, parts, strict=True))  # fmt: skip
        out.append(TrendRow(m.month, m.status, format_amount(m.amount, places), sources))
    return out


def trend_section(trend: Trend | None) -> TrendSection | None:
    if trend is None or len(trend.months) == 0:
        return None
    from tenantcost.service.urls import api_client_path

    keys = sorted({k for m in trend.months for k in m.unit_costs})
    units = [u for u in (unit_chart(trend, k) for k in keys) if u is not None]
    rows = _rows(trend)
    query = "?format=csv" + (f"&currency={trend.currency}" if trend.ledger_currency else "")
    csv_href = api_client_path(trend.client, "trend") + query
    unit_href = api_client_path(trend.client, "unit-cost-trend") + query
    return TrendSection(stacked_chart(trend), units, rows, trend.currency, csv_href, unit_href,
                        trend.ledger_currency, tuple(trend.not_converted))  # fmt: skip


__all__ = ["TrendSection", "columns_chart", "decimal_text", "lines_chart", "stacked_chart",
           "trend_section", "unit_chart"]  # fmt: skip
