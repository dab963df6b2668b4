"""One time chunk of an allocation: its task, its output and the code that runs it.

A chunk is the unit of work of every engine: the local engine runs the chunks one after the
other in this process, the Dask engine ships each to a worker. Both run exactly
:func:`process_chunk`, so they give identical results to the unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import duckdb
import pandas as pd

from tenantcost.kinds import Detail
from tenantcost.plan import Plan
from tenantcost.split import (
    DayLines,
    SplitTables,
    fetch_lines,
    fetch_period_and_day_lines,
    fetch_period_lines,
    fetch_pool_clients,
    fetch_unattributed,
    run_split,
)
from tenantcost.usage_source import UsageSource
from tenantcost.windows import match_usage_windows, roll_up_usage


def align_chunk_usage(
    con: duckdb.DuckDBPyConnection, source: UsageSource, cost_windows: pd.DataFrame
) -> pd.DataFrame:
    """Meet the chunk's usage (``chunk_usage``) with the cost windows before the split.

    Usage windows equal to a cost window stay; nested ones are rolled up to their cost window
    (``tenantcost.windows.roll_up_usage``); coarser or boundary-crossing ones are an error.
    Returns the usage windows without any cost window (``window_start, window_end, origin``;
    the caller warns).
    """
    match = match_usage_windows(
        source.windows(con), cost_windows, lambda w: source.with_origins(con, w)
    )
    roll_up_usage(con, match.nested, source.metrics, lambda c: source.first_row(con, c))
    return match.orphans


class LinePartWriter(Protocol):
    """Writes one chunk's window-level lines where the chunk runs (possibly a Dask worker,
    so implementations must pickle). ``con`` holds the split's ``lines`` view
    (``tenantcost.split.run_split``); ``direct_lines`` are the chunk's direct lines, which
    the split does not see."""

    def __call__(self, con: duckdb.DuckDBPyConnection, direct_lines: pd.DataFrame) -> None: ...


class LinesSink(Protocol):
    """Receives a run's window-level lines chunk by chunk, in time order.

    The core never opens a file: it asks the sink for each chunk's part writer when it
    builds the tasks, and tells it when a chunk is done (in chunk order), so a sink can
    assemble the parts (``tenantcost.engine.lines_csv`` writes them to one CSV file).
    """

    def part(self, index: int) -> LinePartWriter:
        """The writer chunk ``index`` carries to wherever it runs."""
        ...

    def chunk_done(self, index: int) -> None:
        """Chunk ``index`` has run and written its part (called in chunk order)."""
        ...


@dataclass
class ChunkTask:
    """One time chunk of an allocation: everything a worker needs besides the usage."""

    index: int
    start: pd.Timestamp
    end: pd.Timestamp
    tables: SplitTables
    direct_lines: pd.DataFrame
    cost_windows: pd.DataFrame
    detail: Detail
    lines_part: LinePartWriter | None = None
    days: bool = False
    """Also sum the lines per UTC day (``ChunkOutput.day_lines``): a conversion at daily
    exchange rates needs them when the lines are kept per period."""
    also: tuple[ChunkTask, ...] = ()
    """The same chunk under other plans (other keys): split from the same read and validated
    usage, so a report pack's alternative keys do not read the usage again."""


@dataclass
class ChunkOutput:
    """What one chunk gives back to be folded (small: per-client sums, not usage rows)."""

    index: int
    lines: pd.DataFrame
    unattributed: pd.DataFrame
    usage_rows: int
    orphans: pd.DataFrame
    pool_clients: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Per pool source, the fewest clients a window split it among (``fetch_pool_clients``)."""
    also: tuple[ChunkOutput, ...] = ()
    """The outputs of the task's ``also`` plans, in their order."""
    day_lines: DayLines | None = None
    """With ``ChunkTask.days``: the chunk's lines per client, source and UTC day."""


def chunk_tasks(
    plan: Plan,
    bounds: list[tuple[pd.Timestamp, pd.Timestamp]],
    detail: Detail,
    sink: LinesSink | None,
    others: Sequence[Plan] = (),
    days: bool = False,
) -> list[ChunkTask]:
    """One task per ``[start, end)`` of ``bounds``, with the plan's tables of its windows,
    and the same chunk of each of the ``others`` plans (same costs, other keys) as ``also``."""

    def task(of: Plan, i: int, start: pd.Timestamp, end: pd.Timestamp) -> ChunkTask:
        return ChunkTask(
            index=i,
            start=start,
            end=end,
            tables=of.tables_for(start, end),
            direct_lines=of.direct_lines_for(start, end),
            cost_windows=of.cost_windows,
            detail=detail,
            days=days,
        )

    tasks = []
    for i, (start, end) in enumerate(bounds):
        main = task(plan, i, start, end)
        main.lines_part = sink.part(i) if sink is not None else None
        main.also = tuple(task(other, i, start, end) for other in others)
        tasks.append(main)
    return tasks


def process_chunk(
    con: duckdb.DuckDBPyConnection, source: UsageSource, task: ChunkTask
) -> ChunkOutput:
    """Read, validate and split one chunk's usage; return its lines and unattributed cost
    (and those of each plan of ``task.also``, from the same usage).

    Runs in the calling process (local engine) or on a Dask worker (the same code, so both
    engines give identical results to the unit).
    """
    usage_rows = source.materialise(con, task.start, task.end)
    # Usage finer than the costs (hourly usage, daily costs) is rolled up to its cost window;
    # misaligned usage is an error; usage without any cost window comes back as orphans.
    # Every plan of a run has the cost windows of the same costs, so this is done once.
    orphans = align_chunk_usage(con, source, task.cost_windows)
    main = _split_chunk(con, source, task, usage_rows, orphans)
    main.also = tuple(_split_chunk(con, source, t, usage_rows, orphans) for t in task.also)
    return main


def _split_chunk(
    con: duckdb.DuckDBPyConnection,
    source: UsageSource,
    task: ChunkTask,
    usage_rows: int,
    orphans: pd.DataFrame,
) -> ChunkOutput:
    """Split the materialised chunk (``chunk_usage``) under one plan's tables."""
    run_split(con, task.tables, "SELECT * FROM chunk_usage", source.metrics)
    day_lines = None
    if task.detail == Detail.WINDOW:
        lines = fetch_lines(con)
    elif task.days:
        lines, day_lines = fetch_period_and_day_lines(con)
    else:
        lines = fetch_period_lines(con)
    if task.lines_part is not None:
        task.lines_part(con, task.direct_lines)
    return ChunkOutput(
        task.index,
        lines,
        fetch_unattributed(con),
        usage_rows,
        orphans,
        fetch_pool_clients(con),
        day_lines=day_lines,
    )
