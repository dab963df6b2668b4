"""The unit-economics HTML page: tables and two inline SVG charts, for finance only.

* a strip plot with a box per plan (or segment): every client's cost as a dot, the box from
  p25 to p75 (linear interpolation), the median as a bar, whiskers to min and max;
* margin against revenue: one dot per client with revenue, labelled with the client's id.

This page names clients next to each other's figures, so it belongs with the finance
summary, never on a client's sheet. Like the report pack's charts (:mod:`tenantcost.report.
charts`) every chart has a ``<title>`` and ``<desc>``, the same figures are in the tables, and
the markup is deterministic. The SVG elements are built column-wise from the client frame
(string operations on pandas columns), not by a loop over clients.

The page is a report-layer thing (it renders with the report's charts and templates), so the
command's outputs that include it are chosen here too: :func:`render` (``--format``) and
:func:`write_files` (``--out``), over the JSON, tables and CSV of
:mod:`tenantcost.writers.economics`, which knows nothing of the page. :func:`finance_page` is
``report --catalog``'s page, from the pack's own allocation.
"""

from __future__ import annotations

import json
from datetime import datetime
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tenantcost.catalog import read_catalog
from tenantcost.economics import (
    REQUESTS,
    Economics,
    GroupBy,
    compute,
    month_costs,
    policy_for,
    project,
)
from tenantcost.errors import InputError
from tenantcost.money import MICROS_PER_UNIT, format_amount
from tenantcost.report.charts import FONT, WIDTH
from tenantcost.report.display import currency_places
from tenantcost.usage_source import client_sums
from tenantcost.windows import Period
from tenantcost.writers.economics import (
    NO_GROUP,
    clients_frame,
    document,
    groups_frame,
    text,
    unit_costs_frame,
)

if TYPE_CHECKING:
    from tenantcost.inputs import Inputs
    from tenantcost.result import AllocationResult

TEMPLATE = "unit_economics.html"
LEFT = 150
RIGHT = 30
ROW = 34
LABELLED_POINTS = 40
"""A scatter labels every client up to this many; beyond, only the lowest margins."""


def _open(height: int, title: str, desc: str, chart_id: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-labelledby="{chart_id}-t {chart_id}-d" {FONT} fill="#1a1a1a">'
        f'<title id="{chart_id}-t">{escape(title)}</title>'
        f'<desc id="{chart_id}-d">{escape(desc)}</desc>'
    )


def _fmt(values: pd.Series | np.ndarray) -> pd.Series:
    return pd.Series(np.asarray(values, dtype="float64")).map("{:.1f}".format)


def _esc(values: pd.Series) -> pd.Series:
    return values.astype(str).map(escape)


def strip_plot(economics: Economics, chart_id: str = "cost-per-client") -> str:
    """Cost per client per group: dots, box (p25..p75), median, whiskers."""
    clients = economics.clients.loc[
        economics.clients["in_catalog"] & (economics.clients["cost"] > 0)
    ]
    groups = sorted(clients["group"].astype(str).unique().tolist())
    height = 20 + ROW * max(len(groups), 1) + 24
    top = clients["cost"].max() if len(clients) else 0
    per = (WIDTH - LEFT - RIGHT) / (float(top) or 1.0)
    row_of = {g: i for i, g in enumerate(groups)}
    y = 20 + clients["group"].map(row_of).to_numpy(dtype="float64") * ROW + ROW / 2
    x = LEFT + clients["cost"].to_numpy(dtype="float64") * per
    amount = (clients["cost"].astype("float64") / MICROS_PER_UNIT).map("{:,.6f}".format)
    dots = (
        '<circle class="dot" cx="' + _fmt(x) + '" cy="' + _fmt(y) + '" r="3" fill="#4a78a8" '
        'fill-opacity="0.7"><title>'
        + _esc(clients["client"]).to_numpy()
        + ": "
        + amount.to_numpy()
        + "</title></circle>"
    )
    stats = clients.groupby("group")["cost"].quantile([0.0, 0.25, 0.5, 0.75, 1.0]).unstack()
    boxes = []
    for group, row in stats.iterrows():  # one box per plan: a handful, not per client
        yc = 20 + row_of[str(group)] * ROW + ROW / 2
        lo, q1, med, q3, hi = (LEFT + float(v) * per for v in row.to_numpy())
        boxes.append(
            f'<line x1="{lo:.1f}" y1="{yc:.1f}" x2="{hi:.1f}" y2="{yc:.1f}" stroke="#777777"/>'
            f'<rect class="box" x="{q1:.1f}" y="{yc - 9:.1f}" width="{max(q3 - q1, 1.0):.1f}" '
            f'height="18" fill="none" stroke="#1d3557"/>'
            f'<line class="median" x1="{med:.1f}" y1="{yc - 11:.1f}" x2="{med:.1f}" '
            f'y2="{yc + 11:.1f}" stroke="#1d3557" stroke-width="2.5"/>'
            f'<text x="{LEFT - 8}" y="{yc + 4:.1f}" text-anchor="end">'
            f"{escape(str(group) or NO_GROUP)}</text>"
        )
    axis = (
        f'<line x1="{LEFT}" y1="{height - 22}" x2="{WIDTH - RIGHT}" y2="{height - 22}" '
        f'stroke="#333333"/><text x="{LEFT}" y="{height - 6}">0</text>'
        f'<text x="{WIDTH - RIGHT}" y="{height - 6}" text-anchor="end">'
        f"{float(top) / MICROS_PER_UNIT:,.6f} {escape(economics.costs.currency)}</text>"
    )
    desc = (
        f"Attributed cost of each client with cost, one row per {economics.policy.by}: dots "
        "are clients, the box spans the 25th to 75th percentile, the thick bar is the median, "
        "the line runs from the smallest to the largest."
    )
    title = f"Cost per client by {economics.policy.by}"
    return _open(height, title, desc, chart_id) + "".join(boxes) + "".join(dots) + axis + "</svg>"


def scatter(economics: Economics, chart_id: str = "margin-revenue") -> str:
    """Margin (y) against revenue (x) per client with revenue, labelled with client ids."""
    clients = economics.clients.loc[economics.clients["has_revenue"]]
    height = 320
    bottom, top_pad = height - 30, 14
    xs = clients["revenue"].to_numpy(dtype="float64")
    ys = clients["margin"].to_numpy(dtype="float64")
    x_max = float(xs.max()) if len(xs) else 1.0
    y_lo = min(float(ys.min()) if len(ys) else 0.0, 0.0)
    y_hi = max(float(ys.max()) if len(ys) else 1.0, 0.0)
    sx = (WIDTH - LEFT - RIGHT) / (x_max or 1.0)
    sy = (bottom - top_pad) / ((y_hi - y_lo) or 1.0)
    px = LEFT + xs * sx
    py = bottom - (ys - y_lo) * sy
    zero_y = bottom - (0.0 - y_lo) * sy
    under = clients["under_margin_floor"].to_numpy()
    fill = np.where(under, "#9b1c1c", "#4a78a8")
    names = _esc(clients["client"]).to_numpy()
    dots = (
        '<circle class="dot" cx="'
        + _fmt(px)
        + '" cy="'
        + _fmt(py)
        + '" r="3.5" fill="'
        + fill
        + '"><title>'
        + names
        + "</title></circle>"
    )
    labelled = np.argsort(ys, kind="stable")[:LABELLED_POINTS]
    right = px[labelled] > WIDTH - RIGHT - 80  # labels near the right edge end at their dot
    labels = (
        '<text class="point-label" x="'
        + _fmt(np.where(right, px[labelled] - 5, px[labelled] + 5))
        + '" y="'
        + _fmt(py[labelled] - 4)
        + '" text-anchor="'
        + np.where(right, "end", "start")
        + '">'
        + names[labelled]
        + "</text>"
    )
    currency = escape(economics.costs.currency)
    axes = (
        f'<line x1="{LEFT}" y1="{zero_y:.1f}" x2="{WIDTH - RIGHT}" y2="{zero_y:.1f}" '
        f'stroke="#333333"/><line x1="{LEFT}" y1="{top_pad}" x2="{LEFT}" y2="{bottom}" '
        f'stroke="#333333"/><text x="{LEFT - 6}" y="{zero_y + 4:.1f}" text-anchor="end">'
        f'margin 0</text><text x="{WIDTH - RIGHT}" y="{height - 8}" text-anchor="end">'
        f"revenue {x_max / MICROS_PER_UNIT:,.2f} {currency}</text>"
    )
    desc = (
        "Gross margin (revenue minus all-in cost) against revenue, one dot per client with "
        "revenue; red dots are under the margin floor."
    )
    return (
        _open(height, "Margin against revenue", desc, chart_id)
        + axes
        + "".join(dots)
        + "".join(labels)
        + "</svg>"
    )


def page_context(economics: Economics) -> dict[str, Any]:
    """What the template shows: the JSON document, display strings and the charts."""
    doc = document(economics)
    places = currency_places(economics.costs.currency)
    return {
        "doc": doc,
        "by": str(economics.policy.by),
        "groups": doc[f"{economics.policy.by}s"],
        "places": places,
        "strip_svg": strip_plot(economics),
        "scatter_svg": scatter(economics),
        "no_group": NO_GROUP,
    }


def render_page(economics: Economics, templates: Path | None = None) -> str:
    """The page as HTML text (``templates``: a ``--templates`` folder, searched first)."""
    from markupsafe import Markup

    from tenantcost.report.render import environment

    env = environment("html", templates)
    env.filters["money"] = lambda micros, places=6: (
        "-" if micros is None else format_amount(int(micros), places)
    )
    env.filters["pct"] = lambda value: "-" if value is None else f"{100 * value:.1f} %"
    context = page_context(economics)
    context["strip_svg"] = Markup(context["strip_svg"])
    context["scatter_svg"] = Markup(context["scatter_svg"])
    return env.get_template(TEMPLATE).render(**context)


# --------------------------------------------------------------------------- the outputs


def write_files(economics: Economics, out: Path) -> list[Path]:
    """``unit_economics.json``, ``unit_economics.html``, ``clients.csv``, ``<by>s.csv``,
    ``unit_costs.csv`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "unit_economics.json": json.dumps(document(economics), indent=2) + "\n",
        "unit_economics.html": html(economics),
        "clients.csv": clients_frame(economics).to_csv(index=False),
        f"{economics.policy.by}s.csv": groups_frame(economics).to_csv(index=False),
        "unit_costs.csv": unit_costs_frame(economics).to_csv(index=False),
    }
    written = []
    for name, content in paths.items():
        (out / name).write_text(content, encoding="utf-8")
        written.append(out / name)
    return written


def html(economics: Economics) -> str:
    """The HTML page (:func:`render_page`, the package's own templates)."""
    return render_page(economics)


def render(economics: Economics, fmt: str) -> str:
    """The output of ``--format``."""
    if fmt == "json":
        return json.dumps(document(economics), indent=2) + "\n"
    if fmt == "csv":
        return clients_frame(economics).to_csv(index=False)
    if fmt == "html":
        return html(economics)
    return text(economics)


# --------------------------------------------------------------------------- report --catalog


def finance_page(
    inputs: Inputs,
    period: Period | None,
    result: AllocationResult,
    catalog_path: Path,
    templates: Path | None,
    as_of: datetime | None,
) -> str:
    """``report --catalog``: the unit-economics page of the pack's month, from the pack's own
    allocation (nothing is allocated twice). Clients are named side by side on it, so it is
    a finance page: the client sheets never show it. It takes the run's ``inputs`` and
    ``period``, not the command's run object: the report layer never imports the shell."""
    if period is None or period != Period.month(f"{period.start:%Y-%m}"):
        raise InputError("report --catalog needs --month YYYY-MM (unit economics are monthly)")
    ruleset = inputs.ruleset
    catalog = read_catalog(catalog_path, ruleset.currency)
    policy = policy_for(ruleset.pricing, GroupBy.PLAN)  # report has no --target-margin
    # each client's requests, as unit-economics counts them (cli.economics.usage_requests)
    requests = client_sums(inputs.usage, period, inputs.con, REQUESTS)
    from tenantcost.presentation import revenue_rates

    revenue = revenue_rates(catalog.frame, ruleset, result.currency, period)
    economics = compute(month_costs(result, period, requests), revenue, policy)
    at = pd.Timestamp.now(tz="UTC") if as_of is None else pd.Timestamp(as_of)
    at = at.tz_localize("UTC") if at.tzinfo is None else at.tz_convert("UTC")
    economics.projection = project(economics, max(at, period.start))
    return render_page(economics, templates)
