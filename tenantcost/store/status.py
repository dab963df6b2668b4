"""``tenantcost status``: per month, how complete the inputs are and what was run.

Hours covered are the union of the windows of the committed batches' cells that fall in the
month (clipped to it), so overlapping, nested or re-ingested windows count once; a month is
complete when both figures equal the month's hours (``close`` refuses a month that is not,
unless ``--allow-incomplete``: :func:`missing_hours`). ``state`` is ``open`` or ``closed``
(:func:`tenantcost.store.month_state.month_state`), ``revisions`` the latest issued revision (0 when
the month was never closed).

**Billing coverage** (a month with stored billing data, :mod:`tenantcost.store.billing`):
the hours of the month inside the union of the live billing cells' usage spans (what
``ingest billing`` recorded of each cell's usage lines: hourly or daily, they stop where the
export stops), the billing periods and invoices seen, and when the latest live batch came.
``status`` adds a ``billing`` object to such a month only; ``close`` refuses a month whose
billing data does not cover it (:func:`billing_coverage`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, func, select

from tenantcost.store.billing import live_cells
from tenantcost.store.connection import connected
from tenantcost.store.models import Batch, BatchCell, BatchFile, Run, table
from tenantcost.store.month_state import issued_revision, month_state, stored_cycle_months
from tenantcost.windows import Period

HOUR = pd.Timedelta(hours=1)


def stored_months(engine: Engine) -> list[str]:
    """Every month ``YYYY-MM`` with a file of a committed batch, in order."""
    b, f = table(Batch).c, table(BatchFile).c
    query = (
        select(f.day)
        .join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
        .where(b.status == "committed")
        .distinct()
    )
    with engine.connect() as connection:
        days = pd.Series(connection.execute(query).scalars().all(), dtype="object")
    return sorted(days.str[:7].unique().tolist()) if not days.empty else []


def covered_hours(windows: pd.DataFrame, period: Period) -> float:
    """Hours of ``period`` inside the union of ``windows`` (``window_start, window_end``)."""
    if windows.empty:
        return 0.0
    start = windows["window_start"].clip(lower=period.start, upper=period.end)
    end = windows["window_end"].clip(lower=period.start, upper=period.end)
    spans = pd.DataFrame({"start": start, "end": end}).sort_values(["start", "end"])
    reached = spans["end"].cummax().shift(1).fillna(period.start)
    from_ = spans["start"].where(spans["start"] > reached, reached)
    covered = (spans["end"] - from_).clip(lower=pd.Timedelta(0)).sum()
    return float(covered / HOUR)


def uncovered(windows: pd.DataFrame, period: Period) -> pd.DataFrame:
    """The spans ``start, end`` of ``period`` outside the union of ``windows``, in order."""
    if windows.empty:
        return pd.DataFrame({"start": [period.start], "end": [period.end]})
    spans = pd.DataFrame({
        "start": windows["window_start"].clip(lower=period.start, upper=period.end),
        "end": windows["window_end"].clip(lower=period.start, upper=period.end),
    }).sort_values(["start", "end"])  # fmt: skip
    reached = spans["end"].cummax().shift(1).fillna(period.start)
    gaps = pd.DataFrame({"start": reached, "end": spans["start"]})
    tail = pd.DataFrame({"start": [spans["end"].max()], "end": [period.end]})
    gaps = pd.concat([gaps, tail], ignore_index=True)
    return gaps[gaps["end"] > gaps["start"]].reset_index(drop=True)


def _cell_windows(bind: Connection | Engine, kind: str, period: Period) -> pd.DataFrame:
    b, c = table(Batch).c, table(BatchCell).c
    query = (
        select(c.window_start, c.window_end)
        .join_from(table(BatchCell), table(Batch), b.id == c.batch_id)
        .where(b.kind == kind, b.status == "committed")
        .where(c.window_start < period.end.to_pydatetime())
        .where(c.window_end > period.start.to_pydatetime())
        .distinct()
    )
    with connected(bind) as connection:
        rows = connection.execute(query).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=["window_start", "window_end"])
    for column in frame.columns:
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


@dataclass(frozen=True)
class Missing:
    """The hours of a month lacking costs or usage: per source, the spans not covered."""

    month: str
    hours: float
    gaps: dict[str, pd.DataFrame]

    def hours_lacking(self, kind: str) -> float:
        spans = self.gaps[kind]
        return float((spans["end"] - spans["start"]).sum() / HOUR) if not spans.empty else 0.0

    @property
    def complete(self) -> bool:
        return all(spans.empty for spans in self.gaps.values())

    def text(self) -> str:
        """``718 of 720 hours lack costs (from 2026-11-01T00:00:00Z to ...; 2 spans)``."""
        from tenantcost.timefmt import iso_z

        parts = []
        for kind, spans in self.gaps.items():
            if spans.empty:
                continue
            first = spans.iloc[0]
            more = f"; {len(spans)} spans" if len(spans) > 1 else ""
            parts.append(
                f"{_hours(self.hours_lacking(kind))} of {_hours(self.hours)} hours lack {kind} "
                f"(first from {iso_z(first['start'])} to {iso_z(first['end'])}{more})"
            )
        return ", ".join(parts)


def missing_hours(bind: Connection | Engine, month: str) -> Missing:
    """Which hours of ``month`` no committed costs, or no committed usage, cover."""
    period = Period.month(month)
    gaps = {kind: uncovered(_cell_windows(bind, kind, period), period)
            for kind in ("costs", "usage")}  # fmt: skip
    return Missing(month, period.hours, gaps)


@dataclass(frozen=True)
class BillingCoverage:
    """How far a month's live billing cells cover it (``cells``:
    :data:`tenantcost.store.billing.LIVE_COLUMNS`; ``gaps``: the spans ``start, end`` of the
    month no usage line covers, in order)."""

    month: str
    cells: pd.DataFrame
    gaps: pd.DataFrame
    hours: float

    @property
    def stored(self) -> bool:
        return not self.cells.empty

    @property
    def complete(self) -> bool:
        return self.stored and self.gaps.empty

    @property
    def first_uncovered_day(self) -> str | None:
        return None if self.gaps.empty else f"{self.gaps.iloc[0]['start']:%Y-%m-%d}"

    def text(self) -> str:
        """``billing data covers 480 of 720 hours, first uncovered day 2026-11-21``."""
        if not self.stored:
            return f"no billing data stored, first uncovered day {self.month}-01"
        total = _hours(Period.month(self.month).hours)
        return (f"billing data covers {_hours(self.hours)} of {total} hours, first uncovered "
                f"day {self.first_uncovered_day}")  # fmt: skip

    def document(self) -> dict[str, Any]:
        """``status``'s ``billing`` object of the month."""
        from tenantcost.timefmt import iso_z

        periods = [
            {"billing_period_start": iso_z(r.window_start),
             "billing_period_end": iso_z(r.window_end), "billing_account_id": r.key,
             "rows": int(r.rows), "invoices": json.loads(r.invoices),
             "covered_to": _reach(r.coverage), "batch": r.uid}
            for r in self.cells.itertuples()
        ]  # fmt: skip
        return {"hours": _hours(self.hours), "complete": self.complete,
                "first_uncovered_day": self.first_uncovered_day, "periods": periods,
                "invoices": sorted({i for p in periods for i in p["invoices"]}),
                "last_batch_at": iso_z(self.cells["created_at"].max())}  # fmt: skip


def _reach(coverage: str) -> str | None:
    spans = json.loads(coverage)
    return max(str(end) for _, end in spans) if spans else None


def billing_coverage(bind: Connection | Engine, month: str) -> BillingCoverage:
    """Which hours of ``month`` the usage lines of its live billing cells cover."""
    period = Period.month(month)
    cells = live_cells(bind, period)
    spans = [(s, e) for value in cells["coverage"] for s, e in json.loads(value)]
    windows = pd.DataFrame(spans, columns=["window_start", "window_end"])
    for column in windows.columns:
        windows[column] = pd.to_datetime(windows[column], utc=True)
    return BillingCoverage(month, cells, uncovered(windows, period),
                           covered_hours(windows, period))  # fmt: skip


def billing_lines(months: list[dict[str, Any]]) -> list[str]:
    """``status``'s text lines under the table: one per month with billing data."""
    out = []
    for m in months:  # one per month
        billing = m.get("billing")
        if billing is None:
            continue
        periods = ", ".join(f"{p['billing_period_start'][:10]} account {p['billing_account_id']}"
                            for p in billing["periods"])  # fmt: skip
        state = ("complete" if billing["complete"]
                 else f"first uncovered day {billing['first_uncovered_day']}")  # fmt: skip
        out.append(
            f"billing {m['month']}: {billing['hours']} of {m['hours']} hours covered ({state}); "
            f"billing periods {periods}; invoices {', '.join(billing['invoices']) or '-'}; "
            f"last batch {billing['last_batch_at']}"
        )
    return out


def _runs(engine: Engine, month: str) -> tuple[int, str | None]:
    r = table(Run).c
    with engine.connect() as connection:
        count = connection.execute(select(func.count()).where(r.month == month)).scalar() or 0
        latest = connection.execute(
            select(r.id).where(r.month == month).order_by(r.started_at.desc()).limit(1)
        ).scalar()
    return int(count), latest


def _hours(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 6)


def month_status(engine: Engine, month: str | None = None) -> list[dict[str, Any]]:
    """One object per month (``month`` alone, else every month with stored batches)."""
    months = (
        [month]
        if month is not None
        else sorted(set(stored_months(engine)) | set(stored_cycle_months(engine)))
    )
    out = []
    for name in months:  # one entry per month: a handful of queries each
        period = Period.month(name)
        runs, latest = _runs(engine, name)
        billing = billing_coverage(engine, name)
        out.append({
            "month": name,
            "hours": _hours(period.hours),
            "costs_hours": _hours(covered_hours(_cell_windows(engine, "costs", period), period)),
            "usage_hours": _hours(covered_hours(_cell_windows(engine, "usage", period), period)),
            "runs": runs,
            "latest_run": latest,
            "state": str(month_state(engine, name)),
            "revisions": issued_revision(engine, name),
        } | ({"billing": billing.document()} if billing.stored else {}))  # fmt: skip
    return out


def status_table(months: list[dict[str, Any]]) -> str:
    """The status as a text table."""
    from tenantcost.writers.text import render_table

    if not months:
        return "(no stored inputs)"
    header = ["month", "hours", "costs h", "usage h", "runs", "latest run", "state", "revisions"]
    rows = [
        [m["month"], str(m["hours"]), str(m["costs_hours"]), str(m["usage_hours"]),
         str(m["runs"]), m["latest_run"] or "-", m["state"], str(m["revisions"])]
        for m in months
    ]  # fmt: skip
    return "\n".join([render_table(header, rows, {1, 2, 3, 4, 7}), *billing_lines(months)])
