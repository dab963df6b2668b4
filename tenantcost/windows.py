"""Time windows: the reporting period, and the alignment of cost and usage windows.

Windows are UTC and half-open, ``[start, end)``. A cost window and a usage window describe the
same hour (or day) only when their boundaries are identical; anything else (a usage window that
straddles two cost windows, two cost windows that overlap) would make a split ambiguous, so it
is an error that names both windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from tenantcost.errors import InputError, warn


@dataclass(frozen=True)
class Period:
    """A reporting period, ``[start, end)`` in UTC."""

    start: pd.Timestamp
    end: pd.Timestamp

    @classmethod
    def month(cls, text: str) -> Period:
        """The calendar month ``YYYY-MM``."""
        try:
            start = pd.Timestamp(f"{text}-01", tz="UTC")
        except ValueError:
            raise InputError(f"--month: expected YYYY-MM, got '{text}'") from None
        if len(text) != 7:
            raise InputError(f"--month: expected YYYY-MM, got '{text}'")
        return cls(start, start + pd.offsets.MonthBegin(1))

    @classmethod
    def between(cls, start: str, end: str) -> Period:
        """An explicit period from two ISO 8601 times (naive times are UTC)."""
        s, e = parse_utc(start, "--from"), parse_utc(end, "--to")
        if e <= s:
            raise InputError(f"--to ({e.isoformat()}) must be after --from ({s.isoformat()})")
        return cls(s, e)

    @property
    def hours(self) -> float:
        return (self.end - self.start) / pd.Timedelta(hours=1)


def parse_utc(text: str, option: str) -> pd.Timestamp:
    """One ISO 8601 time as a UTC timestamp; naive times are taken as UTC."""
    try:
        ts = pd.Timestamp(text)
    except ValueError:
        raise InputError(f"{option}: not an ISO 8601 time: '{text}'") from None
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _fmt(start: pd.Timestamp, end: pd.Timestamp) -> str:
    return f"[{start.isoformat()}, {end.isoformat()})"


def select_period(frame: pd.DataFrame, period: Period | None, what: str) -> pd.DataFrame:
    """Rows whose window lies inside ``period``; a window that straddles a boundary is an error."""
    if period is None or frame.empty:
        return frame
    start, end = frame["window_start"], frame["window_end"]
    inside = (start >= period.start) & (end <= period.end)
    outside = (end <= period.start) | (start >= period.end)
    straddle = ~(inside | outside)
    if straddle.any():
        row = frame[straddle].iloc[0]
        raise InputError(
            f"{what} window {_fmt(row.window_start, row.window_end)} straddles the period "
            f"{_fmt(period.start, period.end)}; choose a period on window boundaries",
            file=str(row.origin),
        )
    return frame[inside].reset_index(drop=True)


def data_period(costs: pd.DataFrame) -> Period:
    """The span of the cost data, used when no period is given."""
    if costs.empty:
        raise InputError("the cost data has no rows in the period")
    return Period(costs["window_start"].min(), costs["window_end"].max())


def check_cost_windows(costs: pd.DataFrame) -> pd.DataFrame:
    """The distinct cost windows, sorted; overlapping distinct windows are an error."""
    windows = (
        costs.drop_duplicates(["window_start", "window_end"])[
            ["window_start", "window_end", "origin"]
        ]
        .sort_values(["window_start", "window_end"], kind="mergesort")
        .reset_index(drop=True)
    )
    if len(windows) > 1:
        prev_end = windows["window_end"].shift(1)
        bad = windows["window_start"] < prev_end
        if bad.any():
            i = int(bad.to_numpy().argmax())
            a, b = windows.iloc[i - 1], windows.iloc[i]
            raise InputError(
                f"cost windows overlap: {_fmt(a.window_start, a.window_end)} (from {a.origin}) "
                f"and {_fmt(b.window_start, b.window_end)} (from {b.origin})"
            )
    return windows


def check_usage_windows(usage_windows: pd.DataFrame, cost_windows: pd.DataFrame) -> pd.DataFrame:
    """Every usage window must equal a cost window, or lie outside all of them.

    ``usage_windows`` holds distinct ``window_start, window_end, origin``. Returns the usage
    windows that have no cost rows at all: that usage has nothing to pay for, and the caller
    reports it as a warning (usage is never silently ignored).
    """
    if usage_windows.empty:
        return usage_windows
    uw = usage_windows.sort_values(["window_start", "window_end"], kind="mergesort")
    exact = uw.merge(
        cost_windows[["window_start", "window_end"]].assign(_hit=True),
        on=["window_start", "window_end"],
        how="left",
    )
    unmatched = exact[exact["_hit"].isna()].drop(columns="_hit").reset_index(drop=True)
    if unmatched.empty or cost_windows.empty:
        return unmatched
    # Compare each unmatched usage window with its neighbouring cost windows: the one that
    # starts at or before it and the next one. Overlap with either is misalignment.
    cw = cost_windows.sort_values("window_start").reset_index(drop=True)
    cw_start = cw["window_start"].to_numpy()
    cw_end = cw["window_end"].to_numpy()
    u_start = unmatched["window_start"].to_numpy()
    u_end = unmatched["window_end"].to_numpy()
    prev = cw["window_start"].searchsorted(unmatched["window_start"], side="right") - 1
    nxt = prev + 1
    prev_c = prev.clip(0, len(cw) - 1)
    next_c = nxt.clip(0, len(cw) - 1)
    hit_prev = (prev >= 0) & (u_start < cw_end[prev_c])
    hit_next = (nxt < len(cw)) & (cw_start[next_c] < u_end) & ~hit_prev
    bad = hit_prev | hit_next
    if bad.any():
        i = int(bad.argmax())
        c = cw.iloc[int(prev_c[i] if hit_prev[i] else next_c[i])]
        u = unmatched.iloc[i]
        raise InputError(
            f"usage window {_fmt(u.window_start, u.window_end)} (from {u.origin}) is "
            f"not aligned with cost window {_fmt(c.window_start, c.window_end)} "
            f"(from {c.origin}); windows must have identical boundaries"
        )
    return unmatched


def warn_usage_without_cost(count: int, first: pd.Series | None) -> None:
    """One warning for all usage windows that have no cost rows."""
    if count and first is not None:
        warn(
            f"{count} usage window(s) have no cost rows (first: "
            f"{_fmt(first.window_start, first.window_end)} from {first.origin}); that usage has "
            "nothing to pay for"
        )


def chunk_bounds(period: Period, chunk: pd.Timedelta) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Consecutive ``[start, end)`` chunks covering the period, so memory stays bounded on
    long periods. Chunks that divide a day are cut on UTC multiples of ``chunk`` (midnight
    for one day); others are counted from the period's start."""
    step = pd.Timedelta(chunk)
    if step <= pd.Timedelta(0):
        raise InputError(f"chunk size must be positive, got {chunk}")
    day = pd.Timedelta(days=1)
    aligned = step <= day and day % step == pd.Timedelta(0)
    start = period.start.floor(step) if aligned else period.start
    edges = [period.start]
    edge = start + step
    while edge < period.end:
        if edge > period.start:
            edges.append(edge)
        edge += step
    edges.append(period.end)
    return list(pairwise(edges))


CHUNK_ROW_BUDGET = 2_500_000
"""Usage rows read and split at once by default (about 1.5 GB of working memory)."""


def auto_chunk(rows: int, period: Period, budget: int = CHUNK_ROW_BUDGET) -> pd.Timedelta:
    """A chunk length that holds about ``budget`` usage rows: whole hours, whole days above
    one day, the whole period when everything fits."""
    hours = max(period.hours, 1.0)
    if rows <= budget:
        return pd.Timedelta(hours=int(np.ceil(hours)))
    chunk_hours = max(1, int(budget / (rows / hours)))
    if chunk_hours >= 24:
        chunk_hours -= chunk_hours % 24
    return pd.Timedelta(hours=chunk_hours)
