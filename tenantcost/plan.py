"""Plan an allocation: everything derived from costs and rules before any usage is read.

The steps, each a function below, in the order :func:`plan_allocation` runs them:

1. :func:`select_costs`: keep the windows of the period, check that cost windows do not
   overlap, convert costs to integer micro-units;
2. :func:`assign_versions`: the rule version in force at each window's start;
3. :func:`classify_costs`: the workload entry of every cost row (``tenantcost.classify``);
   rows no entry matches are an error or *unclassified*, per the version's ``unmatched:``;
4. :func:`attach_entries`: each row's rule id, class, entry name, client and reason;
5. :func:`keyed_pools`: the shared cost of each (window, shared entry) and each external
   cost of each window (``tenantcost.external``), with the split *spec* of its key;
6. :func:`resolve_direct_clients`, :func:`direct_lines`, :func:`unattributed_direct`: direct
   rows go to their client, or are unattributed when their ``client_from:`` property is empty;
7. :func:`idle_pools`: each window's idle, when the rule distributes it;
8. :func:`cost_items`: residual (idle, overhead, reserve), exclusions and unclassified rows.

Everything here is small pandas work on cost rows and rules; the heavy split over usage runs
later, per time chunk (``tenantcost.engine``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pandas as pd

from tenantcost.classify import classify, raise_unmatched, workload_label
from tenantcost.config.keys import EVEN, Key, WeightsKey, describe_key
from tenantcost.config.rules import RuleSet, RuleVersion
from tenantcost.errors import InputError
from tenantcost.external import external_pools
from tenantcost.kinds import RESIDUAL_CLASSES, Cause, CostClass, KeyKind, LineKind
from tenantcost.money import checked_total, to_micros
from tenantcost.split import MEASURE_SCALE, SplitTables
from tenantcost.tables import (
    ITEM_COLUMNS,
    LINE_COLUMNS,
    LINE_DTYPES,
    UNATTRIBUTED_COLUMNS,
    UNATTRIBUTED_DTYPES,
    empty_table,
)
from tenantcost.windows import Period, check_cost_windows, data_period, select_period

NO_CLIENT = ""
"""The client value of usage that carried no client id (and of direct rows without one)."""

WINDOW = ["window_start", "window_end"]
UNCLASSIFIED_REASON = "matches no workload entry"


def within(frame: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """The rows of ``frame`` whose window starts in ``[start, end)``."""
    ws = frame["window_start"]
    return frame[(ws >= start) & (ws < end)]


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
    billed_pool_total: int = 0

    def tables_for(self, start: pd.Timestamp, end: pd.Timestamp) -> SplitTables:
        """The split tables of the windows that start in ``[start, end)``."""
        t = self.tables
        return SplitTables(
            pools=within(t.pools, start, end),
            specs=t.specs,
            spec_services=t.spec_services,
            spec_weights=t.spec_weights,
            direct=within(t.direct, start, end),
            idle_pools=within(t.idle_pools, start, end),
        )

    def direct_lines_for(self, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
        """The direct lines of the windows that start in ``[start, end)``."""
        return within(self.direct_lines, start, end)


def select_costs(
    costs: pd.DataFrame, period: Period | None
) -> tuple[pd.DataFrame, Period, pd.DataFrame]:
    """The period's cost rows with an int64 ``amount`` in micro-units, the period (by default
    the span of the cost data) and the distinct cost windows (overlaps are an error)."""
    costs = select_period(costs, period, "cost")
    period = period or data_period(costs)
    cost_windows = check_cost_windows(costs)
    costs = costs.copy()
    if "amount" not in costs:  # repriced costs (tenantcost.billing) carry their own
        costs["amount"] = to_micros(
            costs["total_cost"], origins=costs["origin"], column="total_cost"
        )
    return costs, period, cost_windows


def assign_versions(costs: pd.DataFrame, ruleset: RuleSet) -> pd.DataFrame:
    """Add ``version``: the index of the rule version in force at each window's start."""
    costs["version"] = ruleset.version_index(costs["window_start"]).to_numpy()
    before = costs["version"] < 0  # version_index marks "before the first version" as -1
    if before.any():
        row = costs[before].iloc[0]
        first = ruleset.rules[0]
        raise InputError(
            f"window starting {row.window_start.isoformat()} is before the first rule version "
            f"'{first.id}' (effective_from {first.effective_from.date()})",
            file=str(row.origin),
        )
    return costs


def classify_costs(costs: pd.DataFrame, ruleset: RuleSet) -> pd.DataFrame:
    """Add ``entry`` (nullable Int64, ``<NA>`` = no entry matched); unmatched rows are an
    error where their version says ``unmatched: error``."""
    costs["entry"] = classify(costs, ruleset)
    unmatched = costs["entry"].isna()
    if unmatched.any():
        errors = {v: r.unmatched == "error" for v, r in enumerate(ruleset.rules)}
        in_error = unmatched & costs["version"].map(errors).astype(bool)
        if in_error.any():
            raise_unmatched(costs, in_error, ruleset)
    return costs


def attach_entries(costs: pd.DataFrame, ruleset: RuleSet) -> pd.DataFrame:
    """Add each row's ``rule_id``, ``class``, ``entry_name``, ``client``, ``client_from``,
    ``reason`` (from its entry, through a small lookup table) and ``workload`` label.

    Unmatched rows (``entry`` is ``<NA>``) find no entry: their class is ``unclassified``
    and their texts are empty.
    """
    rows = [
        (v, j, w.class_, w.name or "", w.client or "", w.client_from or "", w.reason or "")
        for v, version in enumerate(ruleset.rules)
        for j, w in enumerate(version.workloads)
    ]
    texts = ["entry_name", "client", "client_from", "reason"]
    entries = pd.DataFrame(rows, columns=["version", "entry", "class", *texts]).astype(
        {"version": "int64", "entry": "Int64", "class": "str", **dict.fromkeys(texts, "str")}
    )
    costs = costs.merge(entries, on=["version", "entry"], how="left", validate="many_to_one")
    costs["rule_id"] = costs["version"].map({v: r.id for v, r in enumerate(ruleset.rules)})
    costs["class"] = costs["class"].fillna(CostClass.UNCLASSIFIED)
    costs[texts] = costs[texts].fillna("")
    costs["workload"] = workload_label(costs)
    return costs


@dataclass(frozen=True)
class Specs:
    """Every keyed pool type of a rule set, described once as a split *spec*.

    A shared pool is identified by (version, entry), an external one by (version, external):
    two lookup tables, so neither needs a placeholder value for the index it does not have;
    a billed one by (version, billed). All map to ``spec, rule_id, source, kind, key``.
    """

    shared: pd.DataFrame
    external: pd.DataFrame
    billed: pd.DataFrame
    specs: pd.DataFrame
    services: pd.DataFrame
    weights: pd.DataFrame


_LOOKUP_DTYPES = {"spec": "int64", "rule_id": "str", "source": "str", "kind": "str", "key": "str"}


def _spec_row(spec: int, key: Key) -> tuple[tuple[object, ...], list[tuple[int, str, int]]]:
    """A spec's (spec, key_kind, key_column, agg) row and its contract weight rows."""
    if isinstance(key, WeightsKey):
        weights = [(spec, c, int(np.rint(w * MEASURE_SCALE))) for c, w in key.weights.items()]
        return (spec, KeyKind.WEIGHTS, "", "max"), weights
    if key == EVEN:
        return (spec, KeyKind.EVEN, "", "max"), []
    return (spec, KeyKind.COLUMN, key, "sum"), []


def spec_tables(ruleset: RuleSet) -> Specs:
    """Number every shared workload, external cost and shared billed entry of every version
    as a spec (in rule order: a version's shared workloads, external costs, billed entries)."""
    shared: list[tuple[object, ...]] = []
    external: list[tuple[object, ...]] = []
    billed: list[tuple[object, ...]] = []
    specs: list[tuple[object, ...]] = []
    services: list[tuple[int, str]] = []
    weights: list[tuple[int, str, int]] = []

    def add(key: Key, service_names: list[str]) -> int:
        spec = len(specs)
        row, spec_weights = _spec_row(spec, key)
        specs.append(row)
        weights.extend(spec_weights)
        services.extend((spec, s) for s in service_names)
        return spec

    for v, version in enumerate(ruleset.rules):
        for j, w in enumerate(version.workloads):
            if w.class_ == CostClass.SHARED and w.key is not None and w.service:
                spec = add(w.key, [w.service])
                label = (version.id, version.source_name(j), LineKind.SHARED, describe_key(w.key))
                shared.append((v, j, spec, *label))
        for x, e in enumerate(version.external):
            spec = add(e.key, list(e.services or version.shared_services))
            label = (version.id, e.name, LineKind.EXTERNAL, describe_key(e.key))
            external.append((v, x, spec, *label))
        for b, entry in enumerate(version.billed):
            if entry.class_ == CostClass.SHARED and entry.key is not None:
                spec = add(entry.key, list(entry.services or []))
                label = (version.id, entry.label, LineKind.BILLED, describe_key(entry.key))
                billed.append((v, b, spec, *label))
    labels = list(_LOOKUP_DTYPES)
    return Specs(
        shared=pd.DataFrame(shared, columns=["version", "entry", *labels]).astype(
            {"version": "int64", "entry": "int64", **_LOOKUP_DTYPES}
        ),
        external=pd.DataFrame(external, columns=["version", "external", *labels]).astype(
            {"version": "int64", "external": "int64", **_LOOKUP_DTYPES}
        ),
        billed=pd.DataFrame(billed, columns=["version", "billed", *labels]).astype(
            {"version": "int64", "billed": "int64", **_LOOKUP_DTYPES}
        ),
        specs=pd.DataFrame(specs, columns=["spec", "key_kind", "key_column", "agg"]).astype(
            {"spec": "int64", "key_kind": "str", "key_column": "str", "agg": "str"}
        ),
        services=pd.DataFrame(services, columns=["spec", "service"]).astype(
            {"spec": "int64", "service": "str"}
        ),
        weights=pd.DataFrame(weights, columns=["spec", "client", "weight"]).astype(
            {"spec": "int64", "client": "str", "weight": "int64"}
        ),
    )


def keyed_pools(
    costs: pd.DataFrame,
    external: pd.DataFrame,
    specs: Specs,
    billed: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One pool per (window, shared entry), per (window, external cost) and per (window,
    shared billed entry), numbered in window and spec order: ``pool, window_start,
    window_end, spec, amount, rule_id, source, kind, key``."""
    shared = costs[costs["class"] == CostClass.SHARED]
    shared_pools = (
        shared.groupby([*WINDOW, "version", "entry"], sort=True, observed=True)["amount"]
        .sum()
        .reset_index()
        .astype({"version": "int64", "entry": "int64", "amount": "int64"})
        .merge(specs.shared, on=["version", "entry"], how="left")
    )
    external_pools_ = external[[*WINDOW, "version", "external", "amount"]].merge(
        specs.external, on=["version", "external"], how="left"
    )
    columns = [*WINDOW, "spec", "amount", "rule_id", "source", "kind", "key"]
    parts = [shared_pools[columns], external_pools_[columns]]
    if billed is not None and not billed.empty:
        merged = billed.merge(specs.billed, on=["version", "billed"], how="left")
        parts.append(merged[columns])
    pools = pd.concat(parts, ignore_index=True)
    pools = pools.astype({"amount": "int64", **_LOOKUP_DTYPES})
    pools = pools.sort_values([*WINDOW, "spec"], kind="mergesort").reset_index(drop=True)
    pools["pool"] = np.arange(len(pools), dtype="int64")
    return pools[["pool", *columns]]


def resolve_direct_clients(costs: pd.DataFrame) -> pd.DataFrame:
    """The direct rows, each with its client: the entry's ``client:``, or the value of the
    property its ``client_from:`` names (``NO_CLIENT`` when empty or missing)."""
    direct = costs[costs["class"] == CostClass.DIRECT].copy()
    if direct.empty:
        return direct
    from_prop = direct["client_from"] != ""
    for prop in direct.loc[from_prop, "client_from"].unique():  # one pass per property
        rows = from_prop & (direct["client_from"] == prop)
        values = direct[prop] if prop in direct else pd.Series("", index=direct.index)
        direct.loc[rows, "client"] = values[rows].fillna("").astype(str)
    return direct


def direct_lines(direct: pd.DataFrame) -> pd.DataFrame:
    """Direct rows with a client, summed per window, client and workload: one line each,
    share 1, no key and no measure."""
    if direct.empty:
        return empty_table(LINE_COLUMNS, LINE_DTYPES)
    attributed = direct[direct["client"] != NO_CLIENT]
    keys = [*WINDOW, "rule_id", "client", "workload"]
    grouped = attributed.groupby(keys, sort=True, observed=True)["amount"].sum().reset_index()
    return pd.DataFrame(
        {
            "window_start": grouped["window_start"],
            "window_end": grouped["window_end"],
            "rule_id": grouped["rule_id"],
            "client": grouped["client"],
            "source": grouped["workload"],
            "kind": LineKind.DIRECT,
            "key": "",
            "measure": np.nan,
            "total_measure": np.nan,
            "share": 1.0,
            "amount": grouped["amount"],
        }
    )[LINE_COLUMNS].astype(LINE_DTYPES)


def unattributed_direct(direct: pd.DataFrame) -> pd.DataFrame:
    """Direct rows without a client: unattributed, row by row, with their cause."""
    no_client = direct[direct["client"] == NO_CLIENT] if not direct.empty else direct
    if no_client.empty:
        return empty_table(UNATTRIBUTED_COLUMNS, UNATTRIBUTED_DTYPES)
    return pd.DataFrame(
        {
            "window_start": no_client["window_start"],
            "window_end": no_client["window_end"],
            "rule_id": no_client["rule_id"],
            "source": no_client["workload"],
            "kind": LineKind.DIRECT,
            "cause": Cause.NO_CLIENT_PROPERTY,
            "amount": no_client["amount"],
        }
    )


def idle_pools(costs: pd.DataFrame, ruleset: RuleSet) -> pd.DataFrame:
    """Each window's idle cost, where the rule version distributes idle (``idle:`` other than
    ``keep``): ``pool, window_start, window_end, amount, rule_id, method``."""
    methods = {v: r.idle for v, r in enumerate(ruleset.rules)}
    rows = costs[(costs["class"] == CostClass.IDLE) & (costs["version"].map(methods) != "keep")]
    pools = rows.groupby([*WINDOW, "version"], sort=True, observed=True)["amount"].sum()
    pools = pools.reset_index()
    pools["pool"] = np.arange(len(pools), dtype="int64")
    pools["rule_id"] = pools["version"].map({v: r.id for v, r in enumerate(ruleset.rules)})
    pools["method"] = pools["version"].map(methods)
    return pools[["pool", *WINDOW, "amount", "rule_id", "method"]].astype(
        {"rule_id": "str", "method": "str", "amount": "int64"}
    )


def _items(frame: pd.DataFrame, name: pd.Series, reason: pd.Series) -> pd.DataFrame:
    """Cost rows grouped per window, rule, class, name and reason (``ITEM_COLUMNS``)."""
    items = pd.DataFrame(
        {
            "window_start": frame["window_start"],
            "window_end": frame["window_end"],
            "rule_id": frame["rule_id"],
            "class": frame["class"],
            "name": name,
            "reason": reason,
            "amount": frame["amount"],
        }
    )
    keys = ITEM_COLUMNS[:-1]
    return items.groupby(keys, sort=True, observed=True)["amount"].sum().reset_index()[ITEM_COLUMNS]


def cost_items(costs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(residual, exclusions, unclassified) items. Residual and excluded rows are named by
    their entry's ``name:`` (else their workload); unclassified rows by their workload."""
    label = costs["entry_name"].where(costs["entry_name"] != "", costs["workload"])
    residual = costs["class"].isin(RESIDUAL_CLASSES)
    excluded = costs["class"] == CostClass.EXCLUDED
    unclassified = costs["class"] == CostClass.UNCLASSIFIED
    reason = pd.Series(UNCLASSIFIED_REASON, index=costs.index)
    return (
        _items(costs[residual], label[residual], costs.loc[residual, "reason"]),
        _items(costs[excluded], label[excluded], costs.loc[excluded, "reason"]),
        _items(costs[unclassified], costs.loc[unclassified, "workload"], reason[unclassified]),
    )


def plan_allocation(
    costs: pd.DataFrame,
    ruleset: RuleSet,
    *,
    key: Key | None,
    period: Period | None,
    billed: BilledInputs | None = None,
) -> Plan:
    """Classify the period's costs and build every pool; no usage is needed yet.

    ``billed`` (``tenantcost.billing``) adds the billed lines outside the clusters: its
    shared pools join the keyed pools, its other rows (already classified) the cost rows.
    """
    if key is not None:
        ruleset = ruleset.with_key(key)
    costs, period, cost_windows = select_costs(costs, period)
    costs = assign_versions(costs, ruleset)
    costs = classify_costs(costs, ruleset)
    costs = attach_entries(costs, ruleset)
    billed_pools = None
    if billed is not None:
        costs = _with_billed_rows(costs, billed.rows)
        billed_pools = billed.pools

    external = external_pools(_cost_data_windows(cost_windows, ruleset), ruleset)
    specs = spec_tables(ruleset)
    direct = resolve_direct_clients(costs)
    lines = direct_lines(direct)
    residual, exclusions, unclassified = cost_items(costs)
    tables = SplitTables(
        pools=keyed_pools(costs, external, specs, billed_pools),
        specs=specs.specs,
        spec_services=specs.services,
        spec_weights=specs.weights,
        direct=lines[[*WINDOW, "client", "amount"]],
        idle_pools=idle_pools(costs, ruleset),
    )
    used = sorted(costs["version"].unique().tolist())
    return Plan(
        ruleset=ruleset,
        period=period,
        key_label=(describe_key(key) if key is not None else "") or None,
        rules_used=[ruleset.rules[v] for v in used],
        cost_windows=cost_windows,
        tables=tables,
        direct_lines=lines,
        unattributed_direct=unattributed_direct(direct),
        residual=residual,
        exclusions=exclusions,
        unclassified=unclassified,
        cost_total=checked_total(costs["amount"], "costs"),
        external_total=checked_total(external["amount"], "external costs"),
        billed_pool_total=(
            checked_total(billed_pools["amount"], "billed pools") if billed_pools is not None else 0
        ),
    )


def _cost_data_windows(cost_windows: pd.DataFrame, ruleset: RuleSet) -> pd.DataFrame:
    """The windows that carry external costs: the cost data's own, each with its version.

    Billed lines in an hour without cost data get a one-hour window of their own
    (``tenantcost.billing``), but that window is the billed pools' only: charging the rule
    file's external costs there too would make them depend on whether billing data is given
    (a monthly billed line would charge them for every hour of the month, future hours of an
    open month included). External costs follow the hours with cost data, with or without
    billing data.
    """
    windows = cost_windows[WINDOW].reset_index(drop=True)
    return windows.assign(version=ruleset.version_index(windows["window_start"]).to_numpy())


class BilledInputs(Protocol):
    """What a plan takes of the billing side (``tenantcost.billing.BillingRun``)."""

    @property
    def pools(self) -> pd.DataFrame: ...

    @property
    def rows(self) -> pd.DataFrame: ...


def _with_billed_rows(costs: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The cost rows and the billed rows (classified already), in one table."""
    if rows.empty:
        return costs
    extra = rows.copy()
    extra["origin"] = "billing"
    for column in costs.columns:
        if column not in extra:
            extra[column] = "" if costs[column].dtype == object else np.nan
    extra["entry"] = pd.array([pd.NA] * len(extra), dtype="Int64")
    return pd.concat([costs, extra[costs.columns]], ignore_index=True)
