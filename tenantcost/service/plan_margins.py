"""Margin per plan (or segment) across months: ``GET /api/v1/pricing/margins`` and the pricing
page's chart.

Product asks "which plan is losing margin, month after month?". Each month's figures are the
pricing page's for that month, to the micro-unit: the plan rows of
:func:`tenantcost.service.pricing.priced_month` (the run the viewer sees: product the latest
issued revision, finance and admin a draft on an open month), so a month reads the same here
as on ``/pricing?month=M``. That includes its **basis**: on an open month, or a closed one
whose cost data covers less than the month, the costs are projected at the current run rate
(:class:`tenantcost.economics.Basis`), never a partial cost against a full revenue, and the
month is marked ``projected`` (hollow points on the chart).

Each month is priced from its stored run once per store generation
(:func:`tenantcost.service.memo.remembered`, keyed by run), so the page and the route cost a
lookup per month once warm; the pricing is vectorised over clients (no loop per client). The
requests per client (only for the price floors) are not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from tenantcost.economics import Basis, GroupBy
from tenantcost.service.figures import month_source
from tenantcost.service.month_trend import month_window
from tenantcost.service.permissions import Principal
from tenantcost.store.data import Store
from tenantcost.store.models import Run, table

MAX_MONTHS = 36
DEFAULT_MONTHS = 12
AMOUNTS = ["revenue", "all_in_cost", "margin"]
"""The CSV's amount columns (exact decimals)."""
GROUP = "group"


@dataclass(frozen=True)
class PlanMargins:
    """``frame``: one row per month and group, oldest month first, groups by name:
    ``month, status, revision, basis, coverage, group, clients, revenue, all_in_cost, margin,
    margin_pct``."""

    by: GroupBy
    currency: str
    frame: pd.DataFrame

    def csv_frame(self) -> pd.DataFrame:
        return self.frame.rename(columns={GROUP: str(self.by)})

    def document(self) -> dict[str, Any]:
        from tenantcost.money import money_header

        months: list[dict[str, Any]] = []
        rows = self.frame.astype(object).where(self.frame.notna(), None).to_dict("records")
        for row in rows:  # at most 36 months x a handful of groups
            if not months or months[-1]["month"] != row["month"]:
                months.append({k: row[k] for k in ("month", "status", "revision", "basis",
                                                   "coverage")} | {"groups": []})  # fmt: skip
            months[-1]["groups"].append({str(self.by): row[GROUP]} | {
                k: row[k] for k in ("clients", "revenue", "all_in_cost", "margin", "margin_pct")
            })  # fmt: skip
        return {"by": str(self.by), "money": money_header(self.currency), "months": months}


def _month_rows(
    engine: Engine, store: Store | None, principal: Principal, month: str, by: GroupBy
) -> pd.DataFrame:
    from tenantcost.errors import InputError
    from tenantcost.service.pricing import priced_month
    from tenantcost.windows import Period

    end = pd.Timestamp(Period.month(month).end)  # the basis, not the estimate, is used
    try:
        priced = priced_month(engine, store, principal, month, by, end)
    except InputError:  # a month that cannot be priced (no rate for a client's revenue):
        return pd.DataFrame()  # its own pricing page says why; the trend leaves it out
    if priced is None:
        return pd.DataFrame()
    doc = priced.doc
    groups = pd.DataFrame(doc[f"{by}s"])
    frame = pd.DataFrame({
        GROUP: groups[str(by)],
        "clients": groups["clients"],
        "revenue": groups["revenue"],
        "all_in_cost": groups["all_in_cost"],
        "margin": groups["margin"],
        "margin_pct": groups["margin_pct"],
    })  # fmt: skip
    frame.insert(0, "coverage", doc["coverage"])
    frame.insert(0, "basis", doc["basis"])
    frame.insert(0, "revision", priced.source.revision)
    frame.insert(0, "status", str(priced.source.status))
    frame.insert(0, "month", month)
    frame.attrs["currency"] = str(doc["currency"])
    return frame


def plan_margins(
    engine: Engine,
    store: Store | None,
    principal: Principal,
    month: str,
    months: int,
    by: GroupBy,
) -> PlanMargins | None:
    """The margins of the ``months`` months ending at ``month`` (None: no month to show).
    ``store``: the Parquet store, so each month is the document the pricing page shows
    (its requests included), computed once for both."""
    from tenantcost.service.memo import remembered

    window = month_window(month, months)
    r = table(Run).c
    with engine.connect() as conn:
        ran = conn.execute(select(r.month).where(r.month.in_(window)).distinct()).scalars().all()
        sources = [s for s in (month_source(conn, principal, m) for m in sorted(ran)) if s]
    frames = [
        remembered(
            engine,
            "plan_margins",
            (s.run_id, str(by)),
            partial(_month_rows, engine, store, principal, s.month, by),
        )
        for s in sources
    ]  # fmt: skip  (at most 36 months, each priced once per store generation)
    frames = [f for f in frames if not f.empty]
    if not frames:
        return None
    currency = frames[-1].attrs["currency"]
    # a month priced in another currency (its run did not convert) is not on this scale
    frames = [f for f in frames if f.attrs["currency"] == currency]
    frame = pd.concat(frames, ignore_index=True)
    frame = frame.astype({"revision": "Int64", "clients": "Int64", "revenue": "Int64",
                          "all_in_cost": "Int64", "margin": "Int64"})  # fmt: skip
    order = frame[GROUP].isna()  # no group last, then by name
    frame = frame.assign(_none=order).sort_values(["month", "_none", GROUP], kind="stable")
    return PlanMargins(by, currency, frame.drop(columns="_none").reset_index(drop=True))


@dataclass(frozen=True)
class MarginRow:
    month: str
    status: str
    basis: str
    group: str
    margin_pct: str
    margin: str


@dataclass(frozen=True)
class MarginsSection:
    """The pricing page's "Margin per plan across months": chart, table, CSV link."""

    svg: Any
    rows: list[MarginRow]
    csv_href: str


NO_GROUP = "(none)"


def margins_section(found: PlanMargins | None, month: str) -> MarginsSection | None:
    from tenantcost.report.display import format_share
    from tenantcost.service.trend_view import decimal_text, lines_chart

    if found is None:
        return None
    frame = found.frame
    months = sorted(frame["month"].unique().tolist())
    groups = frame[GROUP].fillna(NO_GROUP)
    pct = frame.assign(group=groups).pivot_table(
        index="group", columns="month", values="margin_pct", aggfunc="first", dropna=False
    )
    pct = pct.reindex(columns=months)
    series = {str(g): [None if pd.isna(v) else 100 * float(v) for v in row]
              for g, row in zip(pct.index, pct.to_numpy(), strict=True)}  # fmt: skip
    projected = {i for i, m in enumerate(months)
                 if (frame.loc[frame["month"] == m, "basis"] == Basis.PROJECTED).any()}  # fmt: skip
    title = f"Gross margin per {found.by} across months, % of revenue"
    svg = lines_chart("plan-margins-chart", title, months, series, "%", projected)

    def share(value: Any) -> str:
        return "–" if pd.isna(value) else format_share(float(value))

    rows = [MarginRow(str(r["month"]), str(r["status"]), str(r["basis"]),
                      NO_GROUP if r[GROUP] is None or pd.isna(r[GROUP]) else str(r[GROUP]),
                      share(r["margin_pct"]),
                      "–" if pd.isna(r["margin"]) else decimal_text(int(r["margin"])))
            for r in frame.to_dict("records")]  # fmt: skip
    href = (f"/api/v1/pricing/margins?month={month}&months={DEFAULT_MONTHS}&by={found.by}"
            "&format=csv")  # fmt: skip
    return MarginsSection(svg, rows, href)


__all__ = ["AMOUNTS", "DEFAULT_MONTHS", "MAX_MONTHS", "MarginsSection", "PlanMargins",
           "margins_section", "plan_margins"]  # fmt: skip
