"""The allocation core: canonical cost and usage tables + a rule set -> result tables.

Pure functions, no I/O. The steps, each vectorised over all windows and clients at once:

1. keep the windows of the period and convert costs to integer micro-units;
2. find the rule version in force at each window's start and classify every cost row;
3. build *pools*: the shared cost of each (window, shared entry) and each external cost of
   each window; build *recipients*: each client's measure of the pool's key in that window;
4. split every pool over its recipients by largest remainder (``tenantcost.money``); a pool
   with no positive measure, and the part of usage without a client id, is *unattributed*;
5. direct rows go to their client; idle, overhead and reserve form the residual; excluded rows
   are listed with their reason; unmatched rows are *unclassified* (or an error);
6. if the rule shares idle, split each window's idle over the clients (proportional to their
   attributed cost, or evenly) as lines of their own.

Every amount is an ``int64`` of micro-units and every split conserves its parent, so the
reconciliation gap (``tenantcost.reconcile``) is zero by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tenantcost.classify import UNMATCHED, classify, raise_unmatched, workload_label
from tenantcost.errors import InputError, warn
from tenantcost.external import external_pools
from tenantcost.money import split_largest_remainder, to_micros
from tenantcost.rules import EVEN, Key, RuleSet, RuleVersion, WeightsKey, check_against_usage
from tenantcost.tables import empty_usage, metric_columns
from tenantcost.windows import (
    Period,
    check_cost_windows,
    check_usage_windows,
    data_period,
    select_period,
)

NO_CLIENT = ""
"""The client value of usage that carried no client id."""

LINE_COLUMNS = [
    "window_start",
    "window_end",
    "rule_id",
    "client",
    "source",
    "kind",
    "key",
    "measure",
    "total_measure",
    "share",
    "amount",
]
UNATTRIBUTED_COLUMNS = [
    "window_start",
    "window_end",
    "rule_id",
    "source",
    "kind",
    "cause",
    "amount",
]
ITEM_COLUMNS = ["window_start", "window_end", "rule_id", "class", "name", "reason", "amount"]

CAUSE_NO_USAGE = "no usage in window"
CAUSE_NO_CLIENT = "usage without client id"
CAUSE_NO_CLIENT_PROPERTY = "direct workload without client property"


@dataclass
class AllocationResult:
    """Everything one allocation produced; all ``amount`` columns are int64 micro-units.

    * ``lines``: one row per client, source and window (kinds ``shared``, ``external``,
      ``direct``, ``idle`` for distributed idle);
    * ``unattributed``: cost that no client carries, with its cause;
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


def _key_label(key: Key | None) -> str:
    if key is None:
        return ""
    return "weights" if isinstance(key, WeightsKey) else key


def _weight(usage: pd.DataFrame, key: Key, metrics: list[str]) -> pd.Series:
    """Each usage row's weight under ``key``: the measure in int64 micro-units of the metric.

    Quantising measures to 10^-6 makes every sum of weights an exact integer, so a pool's total
    weight (and with it every share) is the same whatever the order rows are summed in, here,
    in DuckDB or on Dask workers. ``even`` gives each active client (any metric > 0) 10^6.
    """
    if isinstance(key, WeightsKey):
        active = usage[metrics].gt(0).any(axis=1) if metrics else False
        weights = usage["client"].map(key.weights).fillna(0.0).astype("float64")
        return _quantize(weights.where(active, 0.0))
    if key == EVEN:
        if not metrics:
            return pd.Series(0, index=usage.index, dtype="int64")
        return usage[metrics].gt(0).any(axis=1).astype("int64") * MEASURE_SCALE
    return _quantize(usage[key])


MEASURE_SCALE = 1_000_000
"""Measures are held as integers of 10^-6 of their unit (requests, CPU-seconds, ...)."""


def _quantize(values: pd.Series) -> pd.Series:
    return pd.Series(
        np.rint(values.to_numpy(dtype="float64") * MEASURE_SCALE).astype("int64"),
        index=values.index,
    )


def _split_pools(
    pools: pd.DataFrame, recipients: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split pools over recipients; return (client parts, unattributed parts).

    ``pools``: ``pool, window_start, window_end, rule_id, source, kind, key, amount``.
    ``recipients``: ``pool, client, weight`` (int64), at most one row per (pool, client);
    ``measure`` in the lines is the weight in the key's unit (weight / ``MEASURE_SCALE``).
    """
    recipients = recipients[recipients["weight"] > 0]
    merged = recipients.merge(pools, on="pool", how="inner", validate="many_to_one")
    merged = merged.sort_values(["pool", "client"], kind="mergesort").reset_index(drop=True)
    total_weight = merged.groupby("pool", sort=False)["weight"].transform("sum")
    merged["part"] = split_largest_remainder(
        merged["pool"], merged["amount"], merged["weight"], merged["client"]
    )
    merged["measure"] = merged["weight"] / MEASURE_SCALE
    merged["total_measure"] = total_weight / MEASURE_SCALE
    merged["share"] = merged["weight"] / total_weight
    served = set(merged["pool"].unique())
    no_usage = pools[~pools["pool"].isin(served) & (pools["amount"] != 0)].assign(
        cause=CAUSE_NO_USAGE
    )
    no_client = merged[merged["client"] == NO_CLIENT]
    unattributed = pd.concat(
        [
            no_usage[UNATTRIBUTED_COLUMNS],
            no_client.assign(cause=CAUSE_NO_CLIENT, amount=no_client["part"])[UNATTRIBUTED_COLUMNS],
        ],
        ignore_index=True,
    )
    lines = merged[merged["client"] != NO_CLIENT].assign(amount=lambda f: f["part"])
    return lines[LINE_COLUMNS], unattributed


def _empty_lines() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=_LINE_DTYPES[c]) for c in LINE_COLUMNS})


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


def _shared_and_external(
    shared: pd.DataFrame,
    ext: pd.DataFrame,
    usage: pd.DataFrame,
    ruleset: RuleSet,
    metrics: list[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build every keyed pool (shared entries and external costs) and split it."""
    win = ["window_start", "window_end"]
    pool_frames = []
    if not shared.empty:
        sp = shared.groupby([*win, "version", "entry"], sort=True, observed=True)["amount"].sum()
        sp = sp.reset_index()
        sp["kind"] = "shared"
        sp["external"] = -1
        pool_frames.append(sp)
    if not ext.empty:
        ep = ext.assign(kind="external", entry=-1)
        pool_frames.append(ep[[*win, "version", "entry", "amount", "kind", "external"]])
    if not pool_frames:
        return _empty_lines(), pd.DataFrame(columns=UNATTRIBUTED_COLUMNS)
    pools = pd.concat(pool_frames, ignore_index=True)
    pools = pools.sort_values([*win, "version", "kind", "entry", "external"], kind="mergesort")
    pools = pools.reset_index(drop=True)
    pools["pool"] = np.arange(len(pools), dtype="int64")

    # Describe each (version, entry/external) once: its label, key and services.
    spec_rows: list[tuple[object, ...]] = []
    for v, version in enumerate(ruleset.rules):
        for j, w in enumerate(version.workloads):
            if w.class_ == "shared":
                assert w.key is not None and w.service is not None
                spec_rows.append(
                    (v, "shared", j, -1, version.id, version.source_name(j), w.key, (w.service,))
                )
        for x, e in enumerate(version.external):
            services = tuple(e.services or version.shared_services)
            spec_rows.append((v, "external", -1, x, version.id, e.name, e.key, services))
    specs = pd.DataFrame(
        spec_rows,
        columns=[
            "version",
            "kind",
            "entry",
            "external",
            "rule_id",
            "source",
            "key_obj",
            "services",
        ],
    )
    specs["key"] = specs["key_obj"].map(_key_label)
    pools = pools.merge(specs, on=["version", "kind", "entry", "external"], how="left")

    # Recipients: for every distinct (key, services) spec, the measure per window and client.
    recipient_frames = []
    specs["spec"] = np.arange(len(specs))
    pools = pools.merge(
        specs[["version", "kind", "entry", "external", "spec"]],
        on=["version", "kind", "entry", "external"],
    )
    for spec in specs.itertuples(index=False):  # one pass per rule entry, not per row
        in_spec = pools[pools["spec"] == spec.spec]
        if in_spec.empty:
            continue
        used = usage[usage["service"].isin(spec.services)]
        if used.empty:
            continue
        measured = used[[*win, "client"]].assign(weight=_weight(used, spec.key_obj, metrics))
        per_client = (
            measured.groupby([*win, "client"], sort=True, observed=True)["weight"]
            .sum()
            .reset_index()
        )
        recipient_frames.append(
            per_client.merge(in_spec[[*win, "pool"]], on=win, how="inner")[
                ["pool", "client", "weight"]
            ]
        )
    recipients = (
        pd.concat(recipient_frames, ignore_index=True)
        if recipient_frames
        else pd.DataFrame(
            {
                "pool": pd.Series([], dtype="int64"),
                "client": pd.Series([], dtype="str"),
                "weight": pd.Series([], dtype="int64"),
            }
        )
    )
    return _split_pools(pools, recipients)


def _distribute_idle(lines: pd.DataFrame, idle: pd.DataFrame, ruleset: RuleSet) -> pd.DataFrame:
    """Lines of distributed idle, for windows whose rule shares idle (proportional or even)."""
    win = ["window_start", "window_end"]
    methods = {v: r.idle for v, r in enumerate(ruleset.rules)}
    idle = idle[idle["version"].map(methods) != "keep"]
    if idle.empty or lines.empty:
        return _empty_lines()
    pools = idle.groupby([*win, "version"], sort=True, observed=True)["amount"].sum()
    pools = pools.reset_index()
    pools["pool"] = np.arange(len(pools), dtype="int64")
    pools["rule_id"] = pools["version"].map({v: r.id for v, r in enumerate(ruleset.rules)})
    pools["key"] = pools["version"].map(methods)
    pools["source"] = "idle"
    pools["kind"] = "idle"
    attributed = lines.groupby([*win, "client"], sort=True, observed=True)["amount"].sum()
    attributed = attributed.reset_index()
    attributed = attributed[attributed["amount"] > 0]
    recipients = attributed.merge(pools[[*win, "pool", "key"]], on=win, how="inner")
    # Proportional: the weight is the client's attributed amount in micro-units, so the
    # line's measure reads as that amount in currency units. Even: one unit per client.
    recipients["weight"] = np.where(
        recipients["key"] == "even", MEASURE_SCALE, recipients["amount"]
    ).astype("int64")
    idle_lines, _ = _split_pools(pools, recipients[["pool", "client", "weight"]])
    return idle_lines


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
    """Allocate the cost table over clients with the usage table and the rule set.

    ``key`` overrides the key of every shared workload and external cost ("what if we split
    everything by X"). ``period`` selects whole windows (a window straddling a boundary is an
    error); by default the span of the cost data is used.
    """
    if key is not None:
        ruleset = ruleset.with_key(key)
    if usage is None:
        # No usage at all: the keys cannot be checked, and every keyed pool is unattributed.
        services = sorted({s for r in ruleset.rules for s in r.shared_services})
        if services or any(r.external for r in ruleset.rules):
            warn(
                "no usage data given: the cost of shared workloads "
                f"({', '.join(services) or 'none'}) and external costs is reported as "
                "unattributed"
            )
        usage = empty_usage()
    else:
        check_against_usage(
            ruleset,
            metric_columns(usage),
            sorted(usage["service"].unique().tolist()),
            origin=rules_origin,
            usage_origin=usage_origin,
        )
    metrics = metric_columns(usage)
    costs = select_period(costs, period, "cost")
    usage = select_period(usage, period, "usage")
    period = period or data_period(costs)
    cost_windows = check_cost_windows(costs)
    check_usage_windows(usage, cost_windows)

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

    win_versions = costs.drop_duplicates(["window_start", "window_end"])[
        ["window_start", "window_end", "version"]
    ]
    ext = external_pools(win_versions, ruleset)

    shared = costs[costs["class"] == "shared"]
    keyed_lines, unattributed = _shared_and_external(shared, ext, usage, ruleset, metrics)

    direct = costs[costs["class"] == "direct"].copy()
    if not direct.empty:
        from_prop = direct["client_from"] != ""
        for prop in direct.loc[from_prop, "client_from"].unique():  # one pass per property
            rows = from_prop & (direct["client_from"] == prop)
            values = direct[prop] if prop in direct else pd.Series("", index=direct.index)
            direct.loc[rows, "client"] = values[rows].fillna("").astype(str)
    direct_lines = _direct_lines(direct)
    no_client_direct = direct[direct["client"] == NO_CLIENT] if not direct.empty else direct
    if not no_client_direct.empty:
        unattributed = pd.concat(
            [
                unattributed,
                no_client_direct.assign(
                    source=no_client_direct["workload"],
                    kind="direct",
                    cause=CAUSE_NO_CLIENT_PROPERTY,
                )[UNATTRIBUTED_COLUMNS],
            ],
            ignore_index=True,
        )

    lines = pd.concat([keyed_lines, direct_lines], ignore_index=True)
    idle_rows = costs[costs["class"] == "idle"]
    idle_lines = _distribute_idle(lines, idle_rows, ruleset)
    lines = pd.concat([lines, idle_lines], ignore_index=True)
    lines = lines.astype(_LINE_DTYPES)
    lines = lines.sort_values(
        ["window_start", "client", "kind", "source"], kind="mergesort"
    ).reset_index(drop=True)

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

    unattributed = (
        unattributed.astype(
            {"rule_id": "str", "source": "str", "kind": "str", "cause": "str", "amount": "int64"}
        )
        .sort_values(["window_start", "source", "cause"], kind="mergesort")
        .reset_index(drop=True)
    )

    used_versions = sorted(costs["version"].unique().tolist())
    cost_total = int(costs["amount"].sum())
    external_total = int(ext["amount"].sum())
    return AllocationResult(
        currency=ruleset.currency,
        period=period,
        rules=[ruleset.rules[v] for v in used_versions],
        key_override=_key_label(key) or None,
        reference_total=cost_total + external_total,
        cost_total=cost_total,
        external_total=external_total,
        lines=lines,
        unattributed=unattributed,
        residual=residual,
        exclusions=exclusions,
        unclassified=unclassified,
        windows=len(cost_windows),
        hours=float(
            ((cost_windows["window_end"] - cost_windows["window_start"]).sum())
            / pd.Timedelta(hours=1)
        ),
    )


def _direct_lines(direct: pd.DataFrame) -> pd.DataFrame:
    """Direct rows, summed per window, client and workload: one line each, share 1."""
    if direct.empty:
        return _empty_lines()
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
    )[LINE_COLUMNS]
