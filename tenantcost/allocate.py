"""Allocate: canonical cost and usage tables + a rule set -> an allocation result.

The public entry points, :func:`allocate` (in-memory usage, window-level lines) and
:func:`allocate_stream` (any usage source, chunk by chunk), run the pipeline:

1. **plan** (``tenantcost.plan``): keep the windows of the period, convert costs to integer
   micro-units, find the rule version of each window, classify every cost row
   (``tenantcost.classify``) and build the *pools*: the shared cost of each (window, shared
   entry), each external cost of each window (``tenantcost.external``), direct lines, idle
   pools, and the residual, exclusions and unclassified items;
2. **check the usage** against the rules (``tenantcost.config.rules``) and the period;
3. **run the chunks** (``tenantcost.engine``): per time chunk, read and validate the usage
   and split every pool over the clients' usage of its key and, if the rule shares idle, each
   window's idle over the clients (``tenantcost.split``, DuckDB); a pool with no positive
   measure, and the part of usage without a client id, is *unattributed*. The local engine
   runs the chunks in this process, the Dask engine on a cluster;
4. **fold** (``tenantcost.engine.fold``) the chunks, in time order, into an
   :class:`~tenantcost.result.AllocationResult`: window-level lines, or lines summed per
   client and source over the period while a sink (``tenantcost.engine.lines_csv`` for
   ``lines_out``) receives the window-level lines, so memory stays bounded.

Every amount is an ``int64`` of micro-units and every split conserves its parent, so the
reconciliation gap (``tenantcost.reconcile``) is zero by construction. The vocabularies
(classes, line kinds, causes, detail levels) are in ``tenantcost.kinds``; the table shapes in
``tenantcost.tables``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import duckdb
import pandas as pd

from tenantcost.config.keys import Key
from tenantcost.config.rules import RuleSet, check_against_usage
from tenantcost.engine import Engine, LinesSink, LocalEngine
from tenantcost.engine.chunks import chunk_tasks
from tenantcost.engine.fold import fold_chunks
from tenantcost.engine.lines_csv import LinesCsvFile
from tenantcost.errors import InputWarning, warn
from tenantcost.kinds import Detail
from tenantcost.plan import NO_CLIENT, BilledInputs, Plan, plan_allocation
from tenantcost.result import AllocationResult
from tenantcost.split import connect
from tenantcost.tables import empty_usage
from tenantcost.usage_source import FrameUsage, UsageSource
from tenantcost.windows import (
    CHUNK_ROW_BUDGET,
    LINES_CHUNK_ROW_BUDGET,
    Period,
    auto_chunk,
    chunk_bounds,
    longest_window,
    select_period,
)

__all__ = [
    "NO_CLIENT",
    "AllocationResult",
    "Detail",
    "allocate",
    "allocate_keys",
    "allocate_stream",
]

WHOLE_PERIOD = pd.Timedelta(days=36_600)
"""A chunk longer than any period: everything in one chunk."""


def _check_usage(
    plan: Plan,
    source: UsageSource,
    con: duckdb.DuckDBPyConnection,
    usage_given: bool,
    rules_origin: str,
) -> None:
    """Check the rules' services and keys against the usage, or warn that there is none."""
    if not usage_given:
        services = sorted({s for r in plan.ruleset.rules for s in r.shared_services})
        if services or any(r.external for r in plan.ruleset.rules):
            warn(
                "no usage data given: the cost of shared workloads "
                f"({', '.join(services) or 'none'}) and external costs is reported as "
                "unattributed"
            )
        return
    check_against_usage(
        plan.ruleset,
        source.metrics,
        source.services(con),
        origin=rules_origin,
        usage_origin=source.origin,
    )


def _warn_usage_outside(plan: Plan, source: UsageSource, con: duckdb.DuckDBPyConnection) -> None:
    """Usage outside the cost data's period has no cost to split: say so, once."""
    outside = source.count_outside(con, plan.period.start, plan.period.end)
    if outside:
        warn(
            f"{outside} usage row(s) lie outside the cost data's period "
            f"{plan.period.start.isoformat()} to {plan.period.end.isoformat()}; they have "
            "no cost to split (give --from/--to or --month to choose the period)"
        )


def _detail(detail: Detail | str) -> Detail:
    if detail not in (Detail.WINDOW, Detail.PERIOD):
        raise ValueError(f"detail must be 'window' or 'period', not {detail!r}")
    return Detail(detail)


def allocate_stream(
    costs: pd.DataFrame,
    usage: UsageSource | None,
    ruleset: RuleSet,
    *,
    key: Key | None = None,
    period: Period | None = None,
    detail: Detail | str = Detail.PERIOD,
    chunk: pd.Timedelta | None = None,
    lines_out: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    rules_origin: str = "<rules>",
    con: duckdb.DuckDBPyConnection | None = None,
    engine: Engine | None = None,
    lines_sink: LinesSink | None = None,
    billed: BilledInputs | None = None,
    days: bool = False,
) -> AllocationResult:
    """Allocate chunk by chunk (``chunk``-long time slices of the period).

    Each chunk's usage is read, validated, split and folded before the next one is read, so
    memory depends on the chunk, not on the period. ``detail="period"`` keeps one line per
    client and source over the period (``lines_out`` then receives the window-level lines as
    CSV, or ``lines_sink`` receives them chunk by chunk); ``detail="window"`` keeps every
    window-level line in memory. ``engine`` runs the chunks (default:
    :class:`~tenantcost.engine.LocalEngine`, in this process; see
    ``tenantcost.engine.dask``). Chunks must come back in order (engines yield them so).
    """
    return allocate_keys(
        costs,
        usage,
        ruleset,
        keys=[key],
        period=period,
        detail=detail,
        chunk=chunk,
        lines_out=lines_out,
        progress=progress,
        rules_origin=rules_origin,
        con=con,
        engine=engine,
        lines_sink=lines_sink,
        billed=billed,
        days=days,
    )[0]


def allocate_keys(
    costs: pd.DataFrame,
    usage: UsageSource | None,
    ruleset: RuleSet,
    *,
    keys: Sequence[Key | None],
    period: Period | None = None,
    detail: Detail | str = Detail.PERIOD,
    chunk: pd.Timedelta | None = None,
    lines_out: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    rules_origin: str = "<rules>",
    con: duckdb.DuckDBPyConnection | None = None,
    engine: Engine | None = None,
    lines_sink: LinesSink | None = None,
    billed: BilledInputs | None = None,
    days: bool = False,
) -> list[AllocationResult]:
    """:func:`allocate_stream` under each of ``keys`` (``None``: the rules' own keys) in one
    pass: every chunk's usage is read and validated once and split once per key, so a report
    pack's alternative keys cost a split each, not a whole run each. Results come in the
    order of ``keys``; each equals :func:`allocate_stream` with that key to the unit. The
    lines file or sink receives the first key's window-level lines. ``billed`` adds the
    billed lines outside the clusters (``tenantcost.billing``; ``costs`` are then the
    repriced rows). ``days`` keeps period lines per UTC day too (``line_days``), for a
    conversion at daily exchange rates."""
    if not keys:
        raise ValueError("allocate_keys needs at least one key (None: the rules' keys)")
    level = _detail(detail)
    con = con or connect()
    plans = [plan_allocation(costs, ruleset, key=k, period=period, billed=billed) for k in keys]
    plan, others = plans[0], plans[1:]
    source = usage if usage is not None else FrameUsage(empty_usage(), origin="usage")
    _check_usage(plan, source, con, usage is not None, rules_origin)
    with warnings.catch_warnings():  # the first key's check has said what there is to say
        warnings.simplefilter("ignore", InputWarning)
        for other in others:
            _check_usage(other, source, con, usage is not None, rules_origin)
    if period is None and usage is not None:
        _warn_usage_outside(plan, source, con)
    if chunk is None:  # about CHUNK_ROW_BUDGET usage rows at a time (fewer for lines.csv)
        window = longest_window(plan.cost_windows)
        # lines.csv sorts each chunk's lines whole; a sink (FOCUS charges) sums them instead.
        budget = LINES_CHUNK_ROW_BUDGET if lines_out is not None else CHUNK_ROW_BUDGET
        chunk = auto_chunk(source.estimated_rows(con), plan.period, budget, window=window)
    bounds = chunk_bounds(plan.period, chunk, plan.cost_windows)  # never cuts a cost window
    opened: AbstractContextManager[LinesSink | None] = (
        LinesCsvFile(lines_out) if lines_out is not None else nullcontext(lines_sink)
    )
    with opened as sink:
        tasks = chunk_tasks(plan, bounds, level, sink, others, days=days)
        outputs = (engine or LocalEngine(con)).run(source, tasks)
        return fold_chunks(plan, level, outputs, len(tasks), sink, progress, others)


def allocate(
    costs: pd.DataFrame,
    usage: pd.DataFrame | None,
    ruleset: RuleSet,
    *,
    key: Key | None = None,
    period: Period | None = None,
    rules_origin: str = "<rules>",
    usage_origin: str = "usage",
    billed: BilledInputs | None = None,
) -> AllocationResult:
    """Allocate the cost table over clients with an in-memory usage table; window-level lines.

    ``key`` overrides the key of every shared workload and external cost ("what if we split
    everything by X"). ``period`` selects whole windows (a window straddling a boundary is an
    error); by default the span of the cost data is used.
    """
    source = None
    if usage is not None:
        source = FrameUsage(select_period(usage, period, "usage"), origin=usage_origin)
    return allocate_stream(
        costs,
        source,
        ruleset,
        key=key,
        period=period,
        detail=Detail.WINDOW,
        chunk=WHOLE_PERIOD,  # the usage is already in memory: one chunk
        rules_origin=rules_origin,
        billed=billed,
    )
