"""A month's trend across months: ``GET /api/v1/months/{M}/trend`` and the month page's chart.

Finance and product ask "is the cluster getting dearer, and is more of it reaching clients or
sitting idle?". The answer is, per month, the reconciliation cascade's own figures, read from
what the store recorded (never allocated in a request), so each month reads as its
reconciliation route and cascade table do:

* ``reference_total``: the run's reference total (the cascade's bottom line);
* ``clients``: the cascade's client lines (the run's ``clients_total``, idle distributed to
  clients by the rule included);
* ``idle``: the cascade's ``idle`` residual line: idle left after the rule's distribution,
  the month page's "Idle, % of the reference total" (0 when the rule distributes all idle);
* ``clients_share`` and ``idle_share``: those over the reference total, fractions rounded
  to 9 decimals like every ratio of the JSON (``null`` on a zero reference total). Since
  both are lines of one cascade, ``clients_share + idle_share <= 1``; the rest is the other
  lines (unattributed, overhead, reserve, exclusions).

Which run a month shows is :func:`tenantcost.service.figures.month_source`'s, as on every
month route: a closed month's latest issued revision (``issued`` / ``restated``), a draft for
finance and admin on an open month; months without a figure the viewer may see are left
out. The window is the ``months`` calendar months ending at ``M``, oldest first.

Cost: one query for the months with a run, one :func:`month_source` per such month (at most
:data:`MAX_MONTHS`), and two grouped queries over the chosen runs; nothing per client, so it
is as fast at 10,000 clients as at 10.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Engine, select

from tenantcost.economics import RATIO_PLACES
from tenantcost.kinds import CascadeKind, CostClass
from tenantcost.service.figures import month_source
from tenantcost.service.permissions import Principal
from tenantcost.store.models import Run, RunFigure, table

MAX_MONTHS = 36
DEFAULT_MONTHS = 12
AMOUNTS = ["reference_total", "clients", "idle"]
"""The CSV's amount columns (exact decimals)."""
COLUMNS = ["month", "status", "revision", *AMOUNTS, "clients_share", "idle_share"]


@dataclass(frozen=True)
class MonthTrend:
    """The months shown (``frame``: :data:`COLUMNS`, oldest first) and their currency."""

    month: str
    currency: str
    frame: pd.DataFrame

    def document(self) -> dict[str, Any]:
        from tenantcost.money import money_header

        rows = self.frame.astype(object).where(self.frame.notna(), None).to_dict("records")
        for row in rows:  # at most 36 months
            for name in AMOUNTS:
                row[name] = int(row[name])
            row["revision"] = None if row["revision"] is None else int(row["revision"])
        return {"month": self.month, "money": money_header(self.currency), "months": rows}


def month_window(last: str, count: int) -> list[str]:
    """The ``count`` calendar months ending at ``last``, oldest first."""
    end = pd.Period(last, freq="M")
    return [(end - i).strftime("%Y-%m") for i in range(count - 1, -1, -1)]


def month_trend(engine: Engine, principal: Principal, month: str, months: int) -> MonthTrend | None:
    """The trend ending at ``month`` as ``principal`` sees it (None: no month to show)."""
    window = month_window(month, months)
    r, f = table(Run).c, table(RunFigure).c
    with engine.connect() as conn:
        ran = conn.execute(select(r.month).where(r.month.in_(window)).distinct()).scalars().all()
        sources = [s for s in (month_source(conn, principal, m) for m in sorted(ran)) if s]
        if not sources:
            return None
        runs = [s.run_id for s in sources]
        totals = conn.execute(
            select(r.id, r.currency, r.reference_total, r.clients_total).where(r.id.in_(runs))
        ).all()
        idle = conn.execute(
            select(f.run_id, f.amount).where(
                f.run_id.in_(runs),
                f.section == "cascade",
                f.kind == str(CascadeKind.RESIDUAL),
                f.name == str(CostClass.IDLE),
            )
        ).all()
    chosen = pd.DataFrame(
        [(s.month, s.run_id, str(s.status), s.revision) for s in sources],
        columns=["month", "run_id", "status", "revision"],
    )
    run = pd.DataFrame([tuple(t) for t in totals],
                       columns=["run_id", "currency", "reference_total", "clients"])  # fmt: skip
    idle_by_run = pd.DataFrame([tuple(i) for i in idle], columns=["run_id", "idle"])
    idle_by_run = idle_by_run.groupby("run_id", as_index=False)["idle"].sum()
    frame = chosen.merge(run, on="run_id").merge(idle_by_run, on="run_id", how="left")
    frame["idle"] = frame["idle"].fillna(0)
    frame = frame.astype({"reference_total": "int64", "clients": "int64", "idle": "int64",
                          "revision": "Int64"})  # fmt: skip
    reference = frame["reference_total"].where(frame["reference_total"] != 0)
    for name in ("clients", "idle"):
        frame[f"{name}_share"] = (frame[name] / reference).round(RATIO_PLACES)
    frame = frame.sort_values("month", kind="stable").reset_index(drop=True)
    return MonthTrend(month, str(frame["currency"].iloc[0]), frame[COLUMNS])


OTHER_LINES = "other lines"
"""The chart's third part: reference total - clients - idle (unattributed, overhead, reserve,
exclusions)."""


@dataclass(frozen=True)
class MonthTrendRow:
    month: str
    status: str
    reference_total: str
    clients: str
    idle: str
    clients_share: str
    idle_share: str


@dataclass(frozen=True)
class MonthTrendSection:
    """The month page's "Trend" (``_month_trend.html``): the chart, its table, the CSV."""

    svg: Any
    rows: list[MonthTrendRow]
    currency: str
    csv_href: str


def month_trend_section(found: MonthTrend | None) -> MonthTrendSection | None:
    """The section of ``found``, or None (nothing to draw)."""
    from tenantcost.report.display import format_share
    from tenantcost.service.trend_view import columns_chart, decimal_text

    if found is None or found.frame.empty:
        return None
    records = found.frame.to_dict("records")  # at most 36 months
    months = [str(r["month"]) for r in records]
    stacks = [{"clients": int(r["clients"]), "idle": int(r["idle"]),
               OTHER_LINES: int(r["reference_total"]) - int(r["clients"]) - int(r["idle"])}
              for r in records]  # fmt: skip
    drafts = {i for i, r in enumerate(records) if r["status"] == "draft"}
    title = f"Reference total per month to {found.month}: clients, idle and other lines"
    svg = columns_chart("month-trend-chart", title, months, stacks, found.currency, drafts)

    def share(value: Any) -> str:
        return "–" if pd.isna(value) else format_share(float(value))

    rows = [MonthTrendRow(str(r["month"]), str(r["status"]),
                          decimal_text(int(r["reference_total"])),
                          decimal_text(int(r["clients"])), decimal_text(int(r["idle"])),
                          share(r["clients_share"]), share(r["idle_share"]))
            for r in records]  # fmt: skip
    href = f"/api/v1/months/{found.month}/trend?months={DEFAULT_MONTHS}&format=csv"
    return MonthTrendSection(svg, rows, found.currency, href)


__all__ = ["AMOUNTS", "COLUMNS", "DEFAULT_MONTHS", "MAX_MONTHS", "MonthTrend", "MonthTrendSection",
           "month_trend", "month_trend_section", "month_window"]  # fmt: skip
