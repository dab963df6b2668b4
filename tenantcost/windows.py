"""Time windows: the reporting period, and how usage windows meet cost windows.

Windows are UTC and half-open, ``[start, end)``. Costs come per hour or per day (OpenCost's
CSV export and its ``/allocation`` default are daily), usage usually per hour. A usage window
may therefore

* equal a cost window: the split uses it as it is;
* lie inside one (*nested*: hourly usage, daily costs): the chunk pipeline rolls the usage up
  to the cost window before the split (``tenantcost.engine.chunks.align_chunk_usage``);
* overlap no cost window at all: that usage has nothing to pay for (a warning).

Anything else (a usage window coarser than a cost window, or one that crosses a cost window's
boundary, or two overlapping cost windows) would make a split ambiguous, so it is an error that
names both windows and says what would fix it. Time chunks never cut a cost window
(:func:`chunk_bounds`), so a cost window and all its usage are always split together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tenantcost.duck import quote as _q
from tenantcost.duck import timestamp_literal
from tenantcost.errors import InputError, warn
from tenantcost.instants import parse_instant
from tenantcost.limits import MEASURE_SCALE  # the split's unit: one definition of a row
from tenantcost.month import parse_month
from tenantcost.timefmt import window_text

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Period:
    """A reporting period, ``[start, end)`` in UTC."""

    start: pd.Timestamp
    end: pd.Timestamp

    @classmethod
    def month(cls, text: str, what: str = "--month") -> Period:
        """The calendar month ``YYYY-MM``, 2000-01 .. 2099-12
        (:func:`~tenantcost.month.parse_month`; ``what`` names the option in the error)."""
        start = pd.Timestamp(f"{parse_month(text, what)}-01", tz="UTC")
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
    """One ISO 8601 time as a UTC timestamp (naive times are UTC), within the range and
    offsets of every input (:func:`tenantcost.instants.parse_instant`)."""
    return parse_instant(text, option)


_fmt = window_text


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


# --------------------------------------------------------------------------- nested windows


@dataclass(frozen=True)
class WindowMatch:
    """How a chunk's distinct usage windows meet the cost windows.

    * ``nested``: usage windows strictly inside a cost window, with that window
      (``window_start, window_end, cost_start, cost_end``); their usage is rolled up;
    * ``orphans``: usage windows that overlap no cost window (``window_start, window_end,
      origin``; only the first row's origin is looked up, the warning names one).
    """

    nested: pd.DataFrame
    orphans: pd.DataFrame


def _ns(values: pd.Series) -> np.ndarray:
    """Timestamps as int64 nanoseconds since the epoch (UTC), for vectorised comparisons."""
    return pd.DatetimeIndex(values).tz_convert("UTC").as_unit("ns").asi8


def span_text(length: pd.Timedelta) -> str:
    """``hourly``, ``daily``, ``weekly`` or ``15-minute`` etc.: a window length in advice."""
    names = {
        pd.Timedelta(hours=1): "hourly",
        pd.Timedelta(days=1): "daily",
        pd.Timedelta(weeks=1): "weekly",
    }
    if length in names:
        return names[length]
    for unit, word in (
        (pd.Timedelta(days=1), "day"),
        (pd.Timedelta(hours=1), "hour"),
        (pd.Timedelta(minutes=1), "minute"),
    ):
        if length >= unit and length % unit == pd.Timedelta(0):
            return f"{length // unit}-{word}"
    return f"{length.total_seconds():g}-second"


def match_usage_windows(
    usage_windows: pd.DataFrame,
    cost_windows: pd.DataFrame,
    origins: Callable[[pd.DataFrame], pd.DataFrame],
) -> WindowMatch:
    """Classify every distinct usage window against the (sorted, disjoint) cost windows.

    ``usage_windows`` holds distinct ``window_start, window_end``; ``cost_windows`` also has
    ``origin``. ``origins`` adds an ``origin`` column to a few usage windows (it may re-read
    the input, so it is only called for the windows a message names). A usage window that is
    coarser than a cost window or crosses a cost window's boundary is an :class:`InputError`.
    """
    if usage_windows.empty:
        return WindowMatch(
            _nested_frame(usage_windows, np.array([], dtype="int64"), cost_windows),
            _with_first_origin(usage_windows, origins),
        )
    uw, cw = _sorted_windows(usage_windows, cost_windows)
    if cw.empty:  # nothing to pay for: every usage window is an orphan
        return WindowMatch(
            _nested_frame(uw.iloc[0:0], np.array([], dtype="int64"), cw),
            _with_first_origin(uw, origins),
        )
    m = _meet(uw, cw)
    if m.bad.any():
        i = int(m.bad.argmax())
        _raise_misaligned(origins(uw.iloc[[i]]).iloc[0], cw.iloc[m.cost_of(i)])
    nested_ = m.inside & ~m.equal
    nested = _nested_frame(uw[nested_], m.prev[nested_], cw)
    return WindowMatch(nested, _with_first_origin(uw[~m.in_prev & ~m.reaches_next], origins))


def first_misaligned(
    usage_windows: pd.DataFrame, cost_windows: pd.DataFrame
) -> tuple[pd.Series, pd.Series] | None:
    """The first usage window (in time order) that is coarser than a cost window or crosses
    its boundary, with that cost window; None when every usage window equals a cost window,
    nests in one or overlaps none. The check of :func:`match_usage_windows`, for callers
    that word their own error (``ingest`` against the costs already stored)."""
    uw, cw = _sorted_windows(usage_windows, cost_windows)
    if uw.empty or cw.empty:
        return None
    m = _meet(uw, cw)
    if not m.bad.any():
        return None
    i = int(m.bad.argmax())
    return uw.iloc[i], cw.iloc[m.cost_of(i)]


def _sorted_windows(
    usage_windows: pd.DataFrame, cost_windows: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    uw = usage_windows.sort_values(["window_start", "window_end"], kind="mergesort")
    uw = uw.reset_index(drop=True)[["window_start", "window_end"]]
    cw = cost_windows.sort_values("window_start", kind="mergesort").reset_index(drop=True)
    return uw, cw


@dataclass(frozen=True)
class _Meeting:
    """How each sorted usage window meets the sorted, disjoint cost windows (arrays, one
    entry per usage window): the cost window starting at or before it (``prev``, clipped)
    and the next one (``nxt``); whether it starts inside ``prev``, lies inside it, equals
    it, and reaches into ``nxt``."""

    prev: np.ndarray
    nxt: np.ndarray
    in_prev: np.ndarray
    inside: np.ndarray
    equal: np.ndarray
    reaches_next: np.ndarray

    @property
    def bad(self) -> np.ndarray:
        """Coarser than a cost window, or across its boundary."""
        return (self.in_prev & ~self.inside) | (~self.in_prev & self.reaches_next)

    def cost_of(self, i: int) -> int:
        """The cost window a bad usage window ``i`` is measured against."""
        return int(self.prev[i] if self.in_prev[i] else self.nxt[i])


def _meet(uw: pd.DataFrame, cw: pd.DataFrame) -> _Meeting:
    us, ue = _ns(uw["window_start"]), _ns(uw["window_end"])
    cs, ce = _ns(cw["window_start"]), _ns(cw["window_end"])
    n = len(cw)
    prev = np.searchsorted(cs, us, side="right") - 1  # the cost window starting at or before
    prev_c = prev.clip(0, n - 1)
    in_prev = (prev >= 0) & (us < ce[prev_c])
    inside = in_prev & (ue <= ce[prev_c])
    equal = inside & (us == cs[prev_c]) & (ue == ce[prev_c])
    nxt_c = (prev + 1).clip(0, n - 1)
    reaches_next = (prev + 1 < n) & (cs[nxt_c] < ue)
    return _Meeting(prev_c, nxt_c, in_prev, inside, equal, reaches_next)


def _with_first_origin(
    orphans: pd.DataFrame, origins: Callable[[pd.DataFrame], pd.DataFrame]
) -> pd.DataFrame:
    """Orphan windows with an ``origin`` column: looked up for the first only (the warning
    names one; a lookup may re-read the input)."""
    orphans = orphans.reset_index(drop=True)
    if orphans.empty:
        return orphans.assign(origin=pd.Series([], dtype="str"))
    first = str(origins(orphans.iloc[[0]])["origin"].iloc[0])
    return orphans.assign(origin=[first] + [""] * (len(orphans) - 1))


def _nested_frame(windows: pd.DataFrame, cost_index: np.ndarray, cw: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "window_start": windows["window_start"].to_numpy(),
            "window_end": windows["window_end"].to_numpy(),
            "cost_start": cw["window_start"].to_numpy()[cost_index],
            "cost_end": cw["window_end"].to_numpy()[cost_index],
        }
    ).astype(
        {c: "datetime64[ns, UTC]" for c in ("window_start", "window_end", "cost_start", "cost_end")}
    )


def _raise_misaligned(u: pd.Series, c: pd.Series) -> None:
    """The error for a usage window that neither equals nor nests in cost window ``c``."""
    raise InputError(misalignment(u, c, f" (from {u.origin})", f" (from {c.origin})"))


def misalignment(u: pd.Series, c: pd.Series, u_from: str = "", c_from: str = "") -> str:
    """Why usage window ``u`` cannot be split over cost window ``c`` (coarser, or across its
    boundary) and what would fix it; ``u_from`` and ``c_from`` follow each window's text."""
    usage_len = u.window_end - u.window_start
    cost_len = c.window_end - c.window_start
    shown = (
        f"usage window {_fmt(u.window_start, u.window_end)}{u_from} "
        f"{{}} cost window {_fmt(c.window_start, c.window_end)}{c_from}"
    )
    if u.window_start <= c.window_start and u.window_end >= c.window_end:
        return (
            shown.format("is coarser than")
            + f"; usage cannot be divided over shorter cost windows: give {span_text(cost_len)} "
            f"(or finer) usage, or costs with {span_text(usage_len)} windows"
        )
    finer = span_text(min(cost_len, pd.Timedelta(hours=1)))
    return (
        shown.format("is not aligned with")
        + "; a usage window must equal a cost window or lie inside one, never cross its "
        f"boundary: give usage in windows that nest in the cost windows (for example {finer} "
        "usage starting on the full hour)"
    )


def warn_usage_without_cost(count: int, first: pd.Series | None) -> None:
    """One warning for all usage windows that have no cost rows."""
    if count and first is not None:
        warn(
            f"{count} usage window(s) have no cost rows (first: "
            f"{_fmt(first.window_start, first.window_end)} from {first.origin}); that usage has "
            "nothing to pay for"
        )


def roll_up_usage(
    con: duckdb.DuckDBPyConnection,
    nested: pd.DataFrame,
    metrics: list[str],
    first_row: Callable[[str], str] | None = None,
) -> None:
    """Replace the chunk's usage (``chunk_usage``) by one row per cost window, service and
    client: the rows of nested usage windows are summed into their cost window.

    Every metric is summed in exact integer micro-units (HUGEINT: the per-row value is
    ``round_even(value * 10^6)``, exactly as the split weighs a row) and kept as
    ``DECIMAL(38, 6)``, so the split sees the exact sum and no float rounding changes it. A
    client with usage in any hour of the window is active in it (``even``, contract weights);
    usage without a client id stays under the empty client. Usage windows of one service
    that overlap each other would be counted twice, so they are an error.
    """
    if nested.empty:
        return
    _check_usage_overlap(con, first_row)
    con.register("t_nested_frame", nested)
    con.execute("CREATE OR REPLACE TEMP TABLE t_nested AS SELECT * FROM t_nested_frame")
    con.unregister("t_nested_frame")
    columns = [str(r[0]) for r in con.execute("DESCRIBE chunk_usage").fetchall()]
    sums = ", ".join(
        f"(sum(round_even(u.{_q(m)} * {MEASURE_SCALE}, 0)::HUGEINT)::DECIMAL(38, 0)"
        f" * 0.000001::DECIMAL(38, 6)) AS {_q(m)}"
        for m in metrics
    )
    keys = ("window_start", "window_end", "service", "client", *metrics)
    extra = "".join(f", min(u.{_q(c)}) AS {_q(c)}" for c in columns if c not in keys)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE chunk_usage_rolled AS
        SELECT coalesce(n.cost_start, u.window_start) AS window_start,
               coalesce(n.cost_end, u.window_end) AS window_end,
               u.service, u.client{", " + sums if sums else ""}{extra}
        FROM chunk_usage u LEFT JOIN t_nested n
          ON n.window_start = u.window_start AND n.window_end = u.window_end
        GROUP BY 1, 2, 3, 4
        """
    )
    con.execute("DROP TABLE chunk_usage")
    con.execute("ALTER TABLE chunk_usage_rolled RENAME TO chunk_usage")


def _check_usage_overlap(
    con: duckdb.DuckDBPyConnection, first_row: Callable[[str], str] | None
) -> None:
    """Two usage windows of one service that overlap (a daily row and hourly rows of the same
    day, say) would count the same hours twice: an error naming both."""
    found = con.execute(
        """
        SELECT service, prev_start, prev_end, window_start, window_end FROM (
            SELECT service, window_start, window_end,
                   lag(window_start) OVER w AS prev_start, lag(window_end) OVER w AS prev_end
            FROM (SELECT DISTINCT service, window_start, window_end FROM chunk_usage)
            WINDOW w AS (PARTITION BY service ORDER BY window_start, window_end)
        ) WHERE window_start < prev_end
        ORDER BY window_start, service LIMIT 1
        """
    ).fetchall()
    if not found:
        return
    service, a_start, a_end, b_start, b_end = found[0]
    a = _fmt(pd.Timestamp(a_start), pd.Timestamp(a_end))
    b = _fmt(pd.Timestamp(b_start), pd.Timestamp(b_end))
    where = ""
    if first_row is not None:
        where = first_row(
            f"service = '{str(service).replace(chr(39), chr(39) * 2)}' "
            f"AND window_start = {timestamp_literal(pd.Timestamp(b_start))} "
            f"AND window_end = {timestamp_literal(pd.Timestamp(b_end))}"
        )
    raise InputError(
        f"usage windows of service '{service}' overlap: {a} and {b}"
        + (f" (from {where})" if where else "")
        + "; the same hours would be counted twice: give each service's usage in one window "
        "length"
    )


def uncovered_hours(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    cost_windows: pd.DataFrame,
    period: Period,
    services: list[str],
    metrics: list[str],
) -> pd.Series:
    """Hours per service inside cost windows it has usage in that none of its usage rows
    cover (index: service; only services with such hours).

    With daily costs and hourly usage, a day with 20 hours of usage still has 4 hours
    without usage data: their cost is split by the other hours' usage. These hours add to
    the windows without any usage (whose cost is unattributed), so "hours without usage
    data" means the same with daily cost windows as with hourly ones. Usage windows equal to
    their cost window cover it fully and add nothing. Only windows with some positive usage
    of the service count: a window without any is already counted whole (its cost is
    unattributed). ``relation`` is a SQL query of the usage rows (``window_start,
    window_end, service``, the ``metrics``); DuckDB aggregates it, nothing is held in pandas.
    """
    inside = cost_windows[
        (cost_windows["window_start"] >= period.start) & (cost_windows["window_end"] <= period.end)
    ]
    windows = inside[["window_start", "window_end"]].drop_duplicates()
    if windows.empty or not services:
        return pd.Series(dtype="float64", name="hours")
    active = " OR ".join(f"u.{_q(m)} > 0" for m in metrics) or "true"
    con.register("t_uncovered_costs", windows)
    con.register("t_uncovered_services", pd.DataFrame({"service": services}))
    try:
        found = con.execute(
            f"""
            WITH usage_windows AS (
                SELECT u.service, u.window_start, u.window_end, bool_or({active}) AS active
                FROM ({relation}) u JOIN t_uncovered_services s ON s.service = u.service
                GROUP BY ALL
            ),
            per_window AS (
                SELECT uw.service, c.window_start, c.window_end,
                       sum(epoch(uw.window_end) - epoch(uw.window_start)) AS covered
                FROM usage_windows uw JOIN t_uncovered_costs c
                  ON uw.window_start >= c.window_start AND uw.window_end <= c.window_end
                GROUP BY ALL HAVING bool_or(uw.active)
            )
            SELECT service,
                   sum(epoch(window_end) - epoch(window_start) - covered) / 3600.0 AS hours
            FROM per_window GROUP BY service
            HAVING sum(epoch(window_end) - epoch(window_start) - covered) > 0
            ORDER BY service
            """
        ).fetchall()
    finally:
        con.unregister("t_uncovered_costs")
        con.unregister("t_uncovered_services")
    return pd.Series(
        {str(s): float(h) for s, h in found}, dtype="float64", name="hours"
    ).rename_axis("service")


# --------------------------------------------------------------------------- time chunks


def chunk_bounds(
    period: Period, chunk: pd.Timedelta, cost_windows: pd.DataFrame | None = None
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Consecutive ``[start, end)`` chunks covering the period, so memory stays bounded on
    long periods. Chunks that divide a day are cut on UTC multiples of ``chunk`` (midnight
    for one day); others are counted from the period's start.

    A chunk never cuts a cost window of ``cost_windows``: a cut inside one moves to the
    window's end (a daily cost window with 6-hour chunks: the chunk grows to the day), since
    the usage nested in a cost window is rolled up and split together with it.
    """
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
    if cost_windows is not None and not cost_windows.empty and len(edges) > 2:
        edges = _grow_to_windows(edges, cost_windows)
    return list(pairwise(edges))


def _grow_to_windows(edges: list[pd.Timestamp], cost_windows: pd.DataFrame) -> list[pd.Timestamp]:
    """Move every inner edge that falls strictly inside a cost window to the window's end."""
    cw = cost_windows.sort_values("window_start", kind="mergesort")
    cs, ce = _ns(cw["window_start"]), _ns(cw["window_end"])
    inner = pd.Series(edges[1:-1], dtype="datetime64[ns, UTC]")
    at = _ns(inner)
    i = np.searchsorted(cs, at, side="right") - 1
    ic = i.clip(0, len(cs) - 1)
    cut = (i >= 0) & (cs[ic] < at) & (at < ce[ic])
    moved = np.where(cut, ce[ic], at)
    end = _ns(pd.Series([edges[-1]], dtype="datetime64[ns, UTC]"))[0]
    kept = np.unique(moved[moved < end])
    inner_edges = list(pd.to_datetime(kept, utc=True))
    return [edges[0], *inner_edges, edges[-1]]


CHUNK_ROW_BUDGET = 2_500_000
"""Usage rows read and split at once by default (about 1.5 GB of working memory)."""

LINES_CHUNK_ROW_BUDGET = 1_000_000
"""The same when the run also writes its window-level lines (``allocate --out``'s
``lines.csv``): each chunk's lines, about one per usage row, go through DuckDB's sort whole,
formatted, which took about 1.1 GB more per 3 M lines. Measured on 10,000 clients x 20
services x 744 h: 1.41 GB peak with chunks of about 1 M rows, 2.08 GB with 2.5 M."""


def auto_chunk(
    rows: int,
    period: Period,
    budget: int = CHUNK_ROW_BUDGET,
    window: pd.Timedelta | None = None,
) -> pd.Timedelta:
    """A chunk length that holds about ``budget`` usage rows: whole hours, whole days above
    one day, the whole period when everything fits. With ``window`` (the longest cost
    window) the chunk is a whole number of such windows, at least one, since
    :func:`chunk_bounds` never cuts a cost window anyway."""
    hours = max(period.hours, 1.0)
    if rows <= budget:
        return pd.Timedelta(hours=int(np.ceil(hours)))
    chunk_hours = max(1, int(budget / (rows / hours)))
    if chunk_hours >= 24:
        chunk_hours -= chunk_hours % 24
    chunk = pd.Timedelta(hours=chunk_hours)
    if window is not None and window > pd.Timedelta(0):
        chunk = max(window, window * (chunk // window))
    return chunk


def longest_window(cost_windows: pd.DataFrame) -> pd.Timedelta | None:
    """The longest cost window (for :func:`auto_chunk`), or None without windows."""
    if cost_windows.empty:
        return None
    return pd.Timedelta((cost_windows["window_end"] - cost_windows["window_start"]).max())
