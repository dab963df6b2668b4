"""``tenantcost status``: per month, how complete the inputs are and what was run.

Hours covered are the union of the windows of the committed batches' cells that fall in the
month (clipped to it), so overlapping, nested or re-ingested windows count once; a month is
complete when both figures equal the month's hours (``close`` refuses a month that is not,
unless ``--allow-incomplete``: :func:`missing_hours`). ``state`` is ``open`` or ``closed``
(:func:`tenantcost.store.cycle.month_state`), ``revisions`` the latest issued revision (0 when
the month was never closed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, func, select

from tenantcost.store.models import Batch, BatchCell, BatchFile, Run, table
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
    from tenantcost.store.cycle import connected

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
    from tenantcost.store.cycle import issued_revision, month_state, stored_cycle_months

    months = (
        [month]
        if month is not None
        else sorted(set(stored_months(engine)) | set(stored_cycle_months(engine)))
    )
    out = []
    for name in months:  # one entry per month: a handful of queries each
        period = Period.month(name)
        runs, latest = _runs(engine, name)
        out.append({
            "month": name,
            "hours": _hours(period.hours),
            "costs_hours": _hours(covered_hours(_cell_windows(engine, "costs", period), period)),
            "usage_hours": _hours(covered_hours(_cell_windows(engine, "usage", period), period)),
            "runs": runs,
            "latest_run": latest,
            "state": str(month_state(engine, name)),
            "revisions": issued_revision(engine, name),
        })  # fmt: skip
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
    return render_table(header, rows, {1, 2, 3, 4, 7})
