"""The allocation core: canonical cost and usage tables + a rule set -> result tables.

No I/O besides the in-process DuckDB engine it computes with. The steps:

1. keep the windows of the period and convert costs to integer micro-units;
2. find the rule version in force at each window's start and classify every cost row
   (``tenantcost.classify``);
3. build *pools* (pandas, small): the shared cost of each (window, shared entry) and each
   external cost of each window (``tenantcost.external``); direct rows go to their client;
   idle, overhead and reserve form the residual; excluded rows keep their reason; unmatched
   rows are *unclassified* (or an error);
4. per time chunk, split every pool over the clients' usage of its key and, if the rule shares
   idle, each window's idle over the clients (``tenantcost.split``, DuckDB): a pool with no
   positive measure, and the part of usage without a client id, is *unattributed*;
5. fold the chunks into the result: window-level lines for small runs and tests
   (:func:`allocate`), or lines summed per client and source over the period while streaming
   window-level lines to a file (:func:`allocate_stream`), so memory stays bounded.

Every amount is an ``int64`` of micro-units and every split conserves its parent, so the
reconciliation gap (``tenantcost.reconcile``) is zero by construction.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

import duckdb
import numpy as np
import pandas as pd

from tenantcost.classify import UNMATCHED, classify, raise_unmatched, workload_label
from tenantcost.config.rules import (
    EVEN,
    Key,
    RuleSet,
    RuleVersion,
    WeightsKey,
    check_against_usage,
    describe_key,
)
from tenantcost.errors import InputError, warn
from tenantcost.external import external_pools
from tenantcost.money import to_micros
from tenantcost.split import (
    CAUSE_NO_CLIENT,
    CAUSE_NO_USAGE,
    LINE_COLUMNS,
    MEASURE_SCALE,
    UNATTRIBUTED_COLUMNS,
    SplitTables,
    connect,
    fetch_lines,
    fetch_period_lines,
    fetch_unattributed,
    run_split,
)
from tenantcost.tables import empty_usage
from tenantcost.usage_source import FrameUsage, UsageSource
from tenantcost.windows import (
    Period,
    auto_chunk,
    check_cost_windows,
    check_usage_windows,
    chunk_bounds,
    data_period,
    select_period,
    warn_usage_without_cost,
)

__all__ = [
    "CAUSE_NO_CLIENT",
    "CAUSE_NO_CLIENT_PROPERTY",
    "CAUSE_NO_USAGE",
    "LINE_COLUMNS",
    "MEASURE_SCALE",
    "AllocationResult",
    "allocate",
    "allocate_stream",
]

NO_CLIENT = ""
"""The client value of usage that carried no client id."""

CAUSE_NO_CLIENT_PROPERTY = "direct workload without client property"
WHOLE_PERIOD = pd.Timedelta(days=36_600)
"""A chunk longer than any period: everything in one chunk."""
FOLD_ROWS = 2_000_000
"""Per-chunk period lines are folded into the running totals once they pass this many rows."""
ITEM_COLUMNS = ["window_start", "window_end", "rule_id", "class", "name", "reason", "amount"]


class Engine(Protocol):
    """Runs chunk tasks and yields their outputs in task order."""

    def run(self, source: UsageSource, tasks: list[ChunkTask]) -> Iterator[ChunkOutput]: ...


_LINE_DTYPES = {
    "window_start": "datetime64[ns, UTC]",
    "window_end": "datetime64[ns, UTC]",
    "rule_id": "str",
    "client": "str",
    "source": "str",
    "kind": "str",
    "key": "str",
    "measure": "float64",
    "total_measure": "float64",
    "share": "float64",
    "amount": "int64",
}
_UNATTRIBUTED_DTYPES = {
    "window_start": "datetime64[ns, UTC]",
    "window_end": "datetime64[ns, UTC]",
    "rule_id": "str",
    "source": "str",
    "kind": "str",
    "cause": "str",
    "amount": "int64",
}


@dataclass
class AllocationResult:
    """Everything one allocation produced; all ``amount`` columns are int64 micro-units.

    * ``lines``: client lines (kinds ``shared``, ``external``, ``direct``, ``idle`` for
      distributed idle). With ``detail == "window"`` one row per client, source and window;
      with ``detail == "period"`` one row per client and source over the period, with a
      ``windows`` count (``measure``/``total_measure`` are then sums over the windows);
    * ``unattributed``: cost that no client carries, per window, with its cause;
    * ``residual``: idle, overhead and reserve per window and workload, *before* any idle
      distribution (the distributed part is in ``lines`` with kind ``idle``);
    * ``exclusions``: excluded workloads per window with their reason;
    * ``unclassified``: cost rows no entry matched (with ``unmatched: unattributed``).
    """

    currency: str
    period: Period
    rules: list[RuleVersion]
    key_override: str | None
    reference_total: int
    cost_total: int
    external_total: int
    lines: pd.DataFrame
    unattributed: pd.DataFrame
    residual: pd.DataFrame
    exclusions: pd.DataFrame
    unclassified: pd.DataFrame
    windows: int
    hours: float
    detail: str = "window"
    usage_rows: int = 0
    chunks: int = 1
    warnings: list[str] = field(default_factory=list)

    def client_totals(self) -> pd.DataFrame:
        """One row per client: ``client, amount`` (sorted by amount desc, then client)."""
        totals = (
            self.lines.groupby("client", sort=True, observed=True)["amount"]
            .sum()
            .reset_index()
            .sort_values(["amount", "client"], ascending=[False, True], kind="mergesort")
            .reset_index(drop=True)
        )
        return totals

    def pool_total(self) -> int:
        """Shared + external cost split by keys (identical for every key)."""
        keyed = self.lines["kind"].isin(["shared", "external"])
        pool_unattr = self.unattributed["kind"].isin(["shared", "external"])
        return int(self.lines.loc[keyed, "amount"].sum()) + int(
            self.unattributed.loc[pool_unattr, "amount"].sum()
        )


@dataclass
class Plan:
    """Everything derived from costs and rules before any usage is read (small, pandas)."""

    ruleset: RuleSet
    period: Period
    key_label: str | None
    rules_used: list[RuleVersion]
    cost_windows: pd.DataFrame
    tables: SplitTables
    direct_lines: pd.DataFrame
    unattributed_direct: pd.DataFrame
    residual: pd.DataFrame
    exclusions: pd.DataFrame
    unclassified: pd.DataFrame
    cost_total: int
    external_total: int

    def tables_for(self, start: pd.Timestamp, end: pd.Timestamp) -> SplitTables:
        """The split tables of the windows that start in ``[start, end)``."""

        def within(frame: pd.DataFrame) -> pd.DataFrame:
            ws = frame["window_start"]
            return frame[(ws >= start) & (ws < end)]

        t = self.tables
        return SplitTables(
            pools=within(t.pools),
            specs=t.specs,
            spec_services=t.spec_services,
            spec_weights=t.spec_weights,
            direct=within(t.direct),
            idle_pools=within(t.idle_pools),
        )


def _key_label(key: Key | None) -> str:
    return "" if key is None else describe_key(key)


def _items(frame: pd.DataFrame, cls: pd.Series, name: pd.Series, reason: pd.Series) -> pd.DataFrame:
    """Residual / exclusion / unclassified items grouped per window, rule, class and name."""
    items = pd.DataFrame(
        {
            "window_start": frame["window_start"],
            "window_end": frame["window_end"],
            "rule_id": frame["rule_id"],
            "class": cls,
            "name": name,
            "reason": reason,
            "amount": frame["amount"],
        }
    )
    keys = ["window_start", "window_end", "rule_id", "class", "name", "reason"]
    return items.groupby(keys, sort=True, observed=True)["amount"].sum().reset_index()[ITEM_COLUMNS]


def _spec_tables(ruleset: RuleSet) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Describe every keyed pool type once: (version, kind, entry, external) -> spec.

    Returns (lookup, specs, spec_services, spec_weights).
    """
    lookup_rows: list[tuple[object, ...]] = []
    specs: list[tuple[object, ...]] = []
    services: list[tuple[int, str]] = []
    weights: list[tuple[int, str, int]] = []

    def add(
        v: int, kind: str, entry: int, ext: int, rule_id: str, source: str, key: Key, svc: list[str]
    ) -> None:
        spec = len(specs)
        lookup_rows.append((v, kind, entry, ext, spec, rule_id, source, describe_key(key)))
        if isinstance(key, WeightsKey):
            specs.append((spec, "weights", "", "max"))
            weights.extend(
                (spec, client, int(np.rint(w * MEASURE_SCALE))) for client, w in key.weights.items()
            )
        elif key == EVEN:
            specs.append((spec, "even", "", "max"))
        else:
            specs.append((spec, "column", key, "sum"))
        services.extend((spec, s) for s in svc)

    for v, version in enumerate(ruleset.rules):
        for j, w in enumerate(version.workloads):
            if w.class_ == "shared" and w.key is not None and w.service:
                add(v, "shared", j, -1, version.id, version.source_name(j), w.key, [w.service])
        for x, e in enumerate(version.external):
            add(
                v,
                "external",
                -1,
                x,
                version.id,
                e.name,
                e.key,
                list(e.services or version.shared_services),
            )
    lookup = pd.DataFrame(
        lookup_rows,
        columns=["version", "kind", "entry", "external", "spec", "rule_id", "source", "key"],
    )
    spec_frame = pd.DataFrame(specs, columns=["spec", "key_kind", "key_column", "agg"])
    service_frame = pd.DataFrame(services, columns=["spec", "service"])
    weight_frame = pd.DataFrame(weights, columns=["spec", "client", "weight"])
    lookup = lookup.astype(
        {
            "version": "int64",
            "kind": "str",
            "entry": "int64",
            "external": "int64",
            "spec": "int64",
            "rule_id": "str",
            "source": "str",
            "key": "str",
        }
    )
    spec_frame = spec_frame.astype(
        {"spec": "int64", "key_kind": "str", "key_column": "str", "agg": "str"}
    )
    service_frame = service_frame.astype({"spec": "int64", "service": "str"})
    weight_frame = weight_frame.astype({"spec": "int64", "client": "str", "weight": "int64"})
    return lookup, spec_frame, service_frame, weight_frame


def plan_allocation(
    costs: pd.DataFrame,
    ruleset: RuleSet,
    *,
    key: Key | None,
    period: Period | None,
) -> Plan:
    """Classify the period's costs and build every pool; no usage is needed yet."""
    if key is not None:
        ruleset = ruleset.with_key(key)
    costs = select_period(costs, period, "cost")
    period = period or data_period(costs)
    cost_windows = check_cost_windows(costs)

    costs = costs.copy()
    costs["amount"] = to_micros(costs["total_cost"])
    costs["version"] = ruleset.version_index(costs["window_start"]).to_numpy()
    if (costs["version"] < 0).any():
        row = costs[costs["version"] < 0].iloc[0]
        first = ruleset.rules[0]
        raise InputError(
            f"window starting {row.window_start.isoformat()} is before the first rule version "
            f"'{first.id}' (effective_from {first.effective_from.date()})",
            file=str(row.origin),
        )
    costs["entry"] = classify(costs, ruleset).to_numpy()
    unmatched = costs["entry"] == UNMATCHED
    if unmatched.any():
        in_error = unmatched & costs["version"].map(
            {v: r.unmatched == "error" for v, r in enumerate(ruleset.rules)}
        ).astype(bool)
        if in_error.any():
            raise_unmatched(costs, in_error, ruleset)

    # Attach the entry's class and details to every row via a small lookup table.
    entry_rows: list[tuple[object, ...]] = []
    for v, version in enumerate(ruleset.rules):
        for j, w in enumerate(version.workloads):
            entry_rows.append(
                (
                    v,
                    j,
                    version.id,
                    w.class_,
                    w.name or "",
                    w.client or "",
                    w.client_from or "",
                    w.reason or "",
                )
            )
        entry_rows.append((v, UNMATCHED, version.id, "unclassified", "", "", "", ""))
    entries = pd.DataFrame(
        entry_rows,
        columns=[
            "version",
            "entry",
            "rule_id",
            "class",
            "entry_name",
            "client",
            "client_from",
            "reason",
        ],
    )
    costs = costs.merge(entries, on=["version", "entry"], how="left", validate="many_to_one")
    costs["workload"] = workload_label(costs)

    win = ["window_start", "window_end"]
    win_versions = costs.drop_duplicates(win)[[*win, "version"]]
    ext = external_pools(win_versions, ruleset)
    lookup, specs, spec_services, spec_weights = _spec_tables(ruleset)

    shared = costs[costs["class"] == "shared"]
    shared_pools = (
        shared.groupby([*win, "version", "entry"], sort=True, observed=True)["amount"]
        .sum()
        .reset_index()
        .assign(kind="shared", external=-1)
    )
    ext_pools = ext.assign(kind="external", entry=-1)[
        [*win, "version", "entry", "amount", "kind", "external"]
    ]
    pools = pd.concat(
        [shared_pools[[*win, "version", "entry", "amount", "kind", "external"]], ext_pools],
        ignore_index=True,
    ).astype({"version": "int64", "entry": "int64", "external": "int64", "amount": "int64"})
    pools = pools.merge(lookup, on=["version", "kind", "entry", "external"], how="left")
    pools = pools.sort_values([*win, "spec"], kind="mergesort").reset_index(drop=True)
    pools["pool"] = np.arange(len(pools), dtype="int64")
    pools = pools[["pool", *win, "spec", "amount", "rule_id", "source", "kind", "key"]]

    direct = costs[costs["class"] == "direct"].copy()
    if not direct.empty:
        from_prop = direct["client_from"] != ""
        for prop in direct.loc[from_prop, "client_from"].unique():  # one pass per property
            rows = from_prop & (direct["client_from"] == prop)
            values = direct[prop] if prop in direct else pd.Series("", index=direct.index)
            direct.loc[rows, "client"] = values[rows].fillna("").astype(str)
    direct_lines = _direct_lines(direct)
    no_client = direct[direct["client"] == NO_CLIENT] if not direct.empty else direct
    unattributed_direct = (
        pd.DataFrame(
            {
                "window_start": no_client["window_start"],
                "window_end": no_client["window_end"],
                "rule_id": no_client["rule_id"],
                "source": no_client["workload"],
                "kind": "direct",
                "cause": CAUSE_NO_CLIENT_PROPERTY,
                "amount": no_client["amount"],
            }
        )
        if not no_client.empty
        else _empty(UNATTRIBUTED_COLUMNS, _UNATTRIBUTED_DTYPES)
    )

    methods = {v: r.idle for v, r in enumerate(ruleset.rules)}
    idle_rows = costs[(costs["class"] == "idle") & (costs["version"].map(methods) != "keep")]
    idle_pools = (
        idle_rows.groupby([*win, "version"], sort=True, observed=True)["amount"].sum().reset_index()
    )
    idle_pools["pool"] = np.arange(len(idle_pools), dtype="int64")
    idle_pools["rule_id"] = idle_pools["version"].map(
        {v: r.id for v, r in enumerate(ruleset.rules)}
    )
    idle_pools["method"] = idle_pools["version"].map(methods)
    idle_pools = idle_pools[["pool", *win, "amount", "rule_id", "method"]].astype(
        {"rule_id": "str", "method": "str", "amount": "int64"}
    )

    label = costs["entry_name"].where(costs["entry_name"] != "", costs["workload"])
    residual_rows = costs["class"].isin(["idle", "overhead", "reserve"])
    residual = _items(
        costs[residual_rows],
        costs.loc[residual_rows, "class"],
        label[residual_rows],
        costs.loc[residual_rows, "reason"],
    )
    excl = costs["class"] == "excluded"
    exclusions = _items(
        costs[excl], costs.loc[excl, "class"], label[excl], costs.loc[excl, "reason"]
    )
    uncl = costs["class"] == "unclassified"
    unclassified = _items(
        costs[uncl],
        costs.loc[uncl, "class"],
        costs.loc[uncl, "workload"],
        pd.Series("matches no workload entry", index=costs.index)[uncl],
    )
    direct_attr = direct_lines[[*win, "client", "amount"]]
    tables = SplitTables(
        pools=pools,
        specs=specs,
        spec_services=spec_services,
        spec_weights=spec_weights,
        direct=direct_attr,
        idle_pools=idle_pools,
    )
    used = sorted(costs["version"].unique().tolist())
    return Plan(
        ruleset=ruleset,
        period=period,
        key_label=_key_label(key) or None,
        rules_used=[ruleset.rules[v] for v in used],
        cost_windows=cost_windows,
        tables=tables,
        direct_lines=direct_lines,
        unattributed_direct=unattributed_direct,
        residual=residual,
        exclusions=exclusions,
        unclassified=unclassified,
        cost_total=int(costs["amount"].sum()),
        external_total=int(ext["amount"].sum()),
    )


def _empty(columns: list[str], dtypes: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=dtypes[c]) for c in columns})


def _direct_lines(direct: pd.DataFrame) -> pd.DataFrame:
    """Direct rows, summed per window, client and workload: one line each, share 1."""
    if direct.empty:
        return _empty(LINE_COLUMNS, _LINE_DTYPES)
    attributed = direct[direct["client"] != NO_CLIENT]
    grouped = (
        attributed.groupby(
            ["window_start", "window_end", "rule_id", "client", "workload"],
            sort=True,
            observed=True,
        )["amount"]
        .sum()
        .reset_index()
    )
    return pd.DataFrame(
        {
            "window_start": grouped["window_start"],
            "window_end": grouped["window_end"],
            "rule_id": grouped["rule_id"],
            "client": grouped["client"],
            "source": grouped["workload"],
            "kind": "direct",
            "key": "",
            "measure": np.nan,
            "total_measure": np.nan,
            "share": 1.0,
            "amount": grouped["amount"],
        }
    )[LINE_COLUMNS].astype(_LINE_DTYPES)


def _check_usage(
    plan: Plan,
    source: UsageSource,
    con: duckdb.DuckDBPyConnection,
    usage_given: bool,
    rules_origin: str,
) -> None:
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


def _fold_period_lines(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Sum per-chunk period lines into one row per rule, client, source, kind and key."""
    frames = [p for p in parts if not p.empty]
    if not frames:
        return _empty(LINE_COLUMNS, _LINE_DTYPES).assign(windows=pd.Series([], dtype="int64"))
    lines = pd.concat(frames, ignore_index=True)
    lines["key"] = lines["key"].fillna("")
    grouped = (
        lines.groupby(["rule_id", "client", "source", "kind", "key"], sort=True, observed=True)
        .agg(
            window_start=("window_start", "min"),
            window_end=("window_end", "max"),
            measure=("measure", "sum"),
            total_measure=("total_measure", "sum"),
            amount=("amount", "sum"),
            windows=("windows", "sum"),
        )
        .reset_index()
    )
    direct = grouped["kind"] == "direct"
    grouped.loc[direct, ["measure", "total_measure"]] = np.nan  # no key, no measure
    grouped["share"] = np.where(direct, 1.0, grouped["measure"] / grouped["total_measure"])
    out = grouped[[*LINE_COLUMNS, "windows"]].astype({**_LINE_DTYPES, "windows": "int64"})
    return out.sort_values(["client", "kind", "source"], kind="mergesort").reset_index(drop=True)


LINES_CSV_SQL = """
    COPY (
        SELECT strftime(window_start, '%Y-%m-%dT%H:%M:%SZ') AS window_start,
               strftime(window_end, '%Y-%m-%dT%H:%M:%SZ') AS window_end,
               rule_id, client, source, kind, key, measure, total_measure, share,
               printf('%d.%06d', amount // 1000000, amount % 1000000) AS amount,
               amount AS amount_micros
        FROM (SELECT * FROM lines UNION ALL
              SELECT window_start, window_end, rule_id, client, source, kind, key,
                     measure, total_measure, share, amount FROM t_direct_lines)
        ORDER BY window_start, client, kind, source
    ) TO '{target}' (HEADER true)
"""


def _append_part(handle: BinaryIO, part: Path, with_header: bool) -> None:
    """Append a chunk's CSV part to the lines file (its header only once), then delete it."""
    with part.open("rb") as src:
        header = src.readline()
        if with_header:
            handle.write(header)
        shutil.copyfileobj(src, handle)
    part.unlink()


@dataclass
class ChunkTask:
    """One time chunk of an allocation: everything a worker needs besides the usage."""

    index: int
    start: pd.Timestamp
    end: pd.Timestamp
    tables: SplitTables
    direct_lines: pd.DataFrame
    cost_windows: pd.DataFrame
    detail: str
    lines_part: str | None = None


@dataclass
class ChunkOutput:
    """What one chunk gives back to be folded (small: per-client sums, not usage rows)."""

    index: int
    lines: pd.DataFrame
    unattributed: pd.DataFrame
    usage_rows: int
    orphans: pd.DataFrame


def process_chunk(
    con: duckdb.DuckDBPyConnection, source: UsageSource, task: ChunkTask
) -> ChunkOutput:
    """Read, validate and split one chunk's usage; return its lines and unattributed cost.

    Runs in the calling process (local engine) or on a Dask worker (the same code, so both
    engines give identical results to the unit).
    """
    usage_rows = source.materialise(con, task.start, task.end)
    windows = source.windows(con)
    known = (
        windows.merge(
            task.cost_windows[["window_start", "window_end"]], how="left", indicator=True
        )["_merge"]
        .eq("both")
        .to_numpy()
    )
    # Origins are looked up only for windows that match no cost window (rare; errors name them).
    orphans = check_usage_windows(
        source.with_origins(con, windows[~known].reset_index(drop=True)), task.cost_windows
    )
    run_split(con, task.tables, "SELECT * FROM chunk_usage", source.metrics)
    lines = fetch_lines(con) if task.detail == "window" else fetch_period_lines(con)
    if task.lines_part is not None:
        con.register("t_direct_lines", task.direct_lines)
        con.execute(LINES_CSV_SQL.format(target=task.lines_part.replace("'", "''")))
        con.unregister("t_direct_lines")
    return ChunkOutput(task.index, lines, fetch_unattributed(con), usage_rows, orphans)


class LocalEngine:
    """Chunks one after the other in this process, on one DuckDB connection."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def run(self, source: UsageSource, tasks: list[ChunkTask]) -> Iterator[ChunkOutput]:
        for task in tasks:
            yield process_chunk(self.con, source.for_chunk(task.start, task.end), task)


def allocate_stream(
    costs: pd.DataFrame,
    usage: UsageSource | None,
    ruleset: RuleSet,
    *,
    key: Key | None = None,
    period: Period | None = None,
    detail: str = "period",
    chunk: pd.Timedelta | None = None,
    lines_out: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    rules_origin: str = "<rules>",
    con: duckdb.DuckDBPyConnection | None = None,
    engine: Engine | None = None,
) -> AllocationResult:
    """Allocate chunk by chunk (``chunk``-long time slices of the period).

    Each chunk's usage is read, validated, split and folded before the next one is read, so
    memory depends on the chunk, not on the period. ``detail="period"`` keeps one line per
    client and source over the period (``lines_out`` then receives the window-level lines as
    CSV); ``detail="window"`` keeps every window-level line in memory. ``engine`` runs the
    chunks (default: :class:`LocalEngine`, in this process; see ``tenantcost.engine_dask``).
    Chunks must come back in order (engines yield them so).
    """
    if detail not in ("window", "period"):
        raise ValueError(f"detail must be 'window' or 'period', not {detail!r}")
    con = con or connect()
    plan = plan_allocation(costs, ruleset, key=key, period=period)
    usage_given = usage is not None
    source = usage if usage is not None else FrameUsage(empty_usage(), origin="usage")
    _check_usage(plan, source, con, usage_given, rules_origin)
    if period is None and usage_given:
        outside = source.count_outside(con, plan.period.start, plan.period.end)
        if outside:
            warn(
                f"{outside} usage row(s) lie outside the cost data's period "
                f"{plan.period.start.isoformat()} to {plan.period.end.isoformat()}; they have "
                "no cost to split (give --from/--to or --month to choose the period)"
            )

    if chunk is None:  # about CHUNK_ROW_BUDGET usage rows at a time
        chunk = auto_chunk(source.estimated_rows(con), plan.period)
    bounds = chunk_bounds(plan.period, chunk)
    tasks = []
    for i, (start, end) in enumerate(bounds):
        direct = plan.direct_lines
        ws = direct["window_start"]
        part = None
        if lines_out is not None:
            part = str(lines_out.with_name(f".{lines_out.name}.part-{i:05d}.csv"))
        tasks.append(
            ChunkTask(
                i,
                start,
                end,
                plan.tables_for(start, end),
                direct[(ws >= start) & (ws < end)],
                plan.cost_windows,
                detail,
                part,
            )
        )
    line_parts: list[pd.DataFrame] = []
    running = _fold_period_lines([])
    unattributed_parts: list[pd.DataFrame] = [plan.unattributed_direct]
    orphan_count, orphan_first, usage_rows = 0, None, 0
    handle = lines_out.open("wb") if lines_out is not None else None
    try:
        for done, out in enumerate((engine or LocalEngine(con)).run(source, tasks), start=1):
            usage_rows += out.usage_rows
            if not out.orphans.empty:
                orphan_first = orphan_first if orphan_count else out.orphans.iloc[0]
                orphan_count += len(out.orphans)
            line_parts.append(out.lines)
            if detail == "period" and sum(len(p) for p in line_parts) > FOLD_ROWS:
                # Fold in batches: bounded memory without a pandas group-by per chunk.
                running = _fold_period_lines([running, *line_parts])
                line_parts = []
            unattributed_parts.append(out.unattributed)
            part = tasks[out.index].lines_part
            if handle is not None and part is not None:
                _append_part(handle, Path(part), with_header=done == 1)
            if progress is not None:
                progress(done, len(tasks))
    finally:
        if handle is not None:
            handle.close()
    warn_usage_without_cost(orphan_count, orphan_first)

    if detail == "window":
        lines = pd.concat(
            [*(p.astype(_LINE_DTYPES) for p in line_parts if not p.empty), plan.direct_lines],
            ignore_index=True,
        ).astype(_LINE_DTYPES)
        lines = lines.sort_values(
            ["window_start", "client", "kind", "source"], kind="mergesort"
        ).reset_index(drop=True)
    else:
        lines = _fold_period_lines([running, *line_parts, plan.direct_lines.assign(windows=1)])
    unattributed = (
        pd.concat(
            [p for p in unattributed_parts if not p.empty] or [plan.unattributed_direct],
            ignore_index=True,
        )
        .astype(_UNATTRIBUTED_DTYPES)
        .sort_values(["window_start", "source", "cause"], kind="mergesort")
        .reset_index(drop=True)
    )
    hours = (plan.cost_windows["window_end"] - plan.cost_windows["window_start"]).sum()
    return AllocationResult(
        currency=plan.ruleset.currency,
        period=plan.period,
        rules=plan.rules_used,
        key_override=plan.key_label,
        reference_total=plan.cost_total + plan.external_total,
        cost_total=plan.cost_total,
        external_total=plan.external_total,
        lines=lines,
        unattributed=unattributed,
        residual=plan.residual,
        exclusions=plan.exclusions,
        unclassified=plan.unclassified,
        windows=len(plan.cost_windows),
        hours=float(hours / pd.Timedelta(hours=1)),
        detail=detail,
        usage_rows=usage_rows,
        chunks=len(bounds),
    )


def allocate(
    costs: pd.DataFrame,
    usage: pd.DataFrame | None,
    ruleset: RuleSet,
    *,
    key: Key | None = None,
    period: Period | None = None,
    rules_origin: str = "<rules>",
    usage_origin: str = "usage",
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
        detail="window",
        chunk=WHOLE_PERIOD,  # the usage is already in memory: one chunk
        rules_origin=rules_origin,
    )
