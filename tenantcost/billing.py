"""A run on billed money: the billing data prepared for the plan and for the invoice cascade.

:func:`prepare_billing` is the one step between reading the billing data
(``tenantcost.readers.billing``) and planning the allocation (``tenantcost.plan``):

1. group the billed lines once in DuckDB and check them (``tenantcost.billed``);
2. reprice OpenCost's rows of each cluster to its billed effective cost
   (``tenantcost.reprice``);
3. turn the lines outside the clusters into hourly amounts, placed in the cost windows of
   the allocation period: keyed pools for ``shared`` entries, pre-classified cost rows for
   the others (and for credited cluster periods);
4. keep what the invoice cascade needs that the allocation does not produce
   (``tenantcost.invoice``): billed totals, the bridge, outside lines, unseen and estimated
   amounts, and what lies outside the allocation period.

Everything keeps the allocation core unchanged downstream: keys, idle, exclusions, direct
rows, privacy and the existing cascade now run on billed money.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from tenantcost.billed import (
    BilledTotals,
    billed_hours,
    billing_totals,
    check_classified,
    classified_sql,
    group_billing,
    hours_to_windows,
    needs_check,
    without_cost_window,
)
from tenantcost.config.rules import RuleSet
from tenantcost.errors import InputError
from tenantcost.kinds import CostClass
from tenantcost.reprice import Repriced, reprice, spread_over_hours
from tenantcost.split_cost import split_cost_costs, unsplit_lines
from tenantcost.windows import Period, data_period

WINDOW = ["window_start", "window_end"]
UNCLASSIFIED_REASON = "matches no billed entry"
BILLED_ROW_COLUMNS = [
    *WINDOW,
    "version",
    "rule_id",
    "class",
    "entry_name",
    "client",
    "client_from",
    "reason",
    "workload",
    "amount",
]
POOL_COLUMNS = [*WINDOW, "version", "billed", "amount"]


@dataclass(frozen=True)
class BillingRun:
    """The billing side of one run (all amounts int64 micro-units).

    * ``costs``: the cost rows, repriced (``amount``; ``opencost_amount`` keeps OpenCost's);
    * ``pools``: billed shared pools per (window, version, entry) in the period;
    * ``rows``: pre-classified billed cost rows in the period (``BILLED_ROW_COLUMNS``);
    * ``repricing``: per cluster and period, OpenCost's figure and the billed one;
    * ``totals``: billed total, invoices, bridge and outside lines;
    * ``unseen``, ``estimate``: in the period; ``outside_period``: effective cost billed for
      hours outside the allocation period; ``rounded_effective``: Σ of every rounded group
      (B per period, billed entry groups), for the cascade's ``rounding`` line;
    * ``opencost_estimate``: OpenCost's own total of the period's rows, before repricing.
    """

    costs: pd.DataFrame
    pools: pd.DataFrame
    rows: pd.DataFrame
    repricing: pd.DataFrame
    totals: BilledTotals
    unseen: int
    estimate: int
    outside_period: int
    rounded_effective: int
    opencost_estimate: int
    origin: str
    period: Period | None = None
    """The allocation period the billed lines were placed in."""
    no_cost_data: NoCostData = dataclasses.field(default_factory=lambda: NoCostData.none())
    """The billed amounts placed in hours of the period without cost data."""


@dataclass(frozen=True)
class NoCostData:
    """Billed amounts in hours of the period that no cost window covers (an open month's
    future hours under a monthly line, a day's line around the hours OpenCost saw).

    Each such hour is a one-hour window of its own for the billed amounts (pools, rows), and
    only for them: it carries no external cost and counts in no period header. The invoice
    cascade shows what no client was charged of these amounts on one line, ``billed without
    cost data``, with ``hours`` and ``to_clients`` (the rest, on ``clients``).
    """

    amount: int
    hours: pd.DatetimeIndex
    """The distinct hours (their starts, UTC), sorted."""

    @classmethod
    def none(cls) -> NoCostData:
        return cls(0, pd.DatetimeIndex([], tz="UTC"))


def _no_cost_data(
    placed: pd.DataFrame, credited: pd.DataFrame, cost_windows: pd.DataFrame
) -> NoCostData:
    """The placed billed hours (and credited cluster hours) that lie in no cost window."""
    frames = [f[["hour", "amount"]] for f in (placed, credited) if not f.empty]
    if not frames:
        return NoCostData.none()
    hours = pd.concat(frames, ignore_index=True)
    bare = hours[without_cost_window(hours["hour"], cost_windows)]
    starts = pd.DatetimeIndex(bare["hour"].unique()).as_unit("ns").sort_values()
    return NoCostData(int(bare["amount"].sum()), starts)


def _in(period: Period, times: pd.Series) -> pd.Series:
    return (times >= period.start) & (times < period.end)


def _entry_table(ruleset: RuleSet) -> pd.DataFrame:
    rows = [
        (v, j, str(b.class_), b.label, b.reason or "", r.id)
        for v, r in enumerate(ruleset.rules)
        for j, b in enumerate(r.billed)
    ]
    return pd.DataFrame(
        rows, columns=["version", "entry", "class", "entry_name", "reason", "rule_id"]
    ).astype({"version": "int64", "entry": "int64"})


def _placed(
    hours: pd.DataFrame, ruleset: RuleSet, period: Period, cost_windows: pd.DataFrame
) -> pd.DataFrame:
    """The period's billed hours with their window and entry (class, name, reason)."""
    inside = hours[_in(period, hours["hour"])].copy()
    inside["window_start"], inside["window_end"] = hours_to_windows(inside["hour"], cost_windows)
    inside = inside.merge(_entry_table(ruleset), on=["version", "entry"], how="left")
    unsplit = inside["entry"] == SPLIT_ENTRY
    inside.loc[unsplit, "class"] = str(CostClass.OVERHEAD)
    inside.loc[unsplit, "entry_name"] = inside.loc[unsplit, "service"].astype(str)
    inside.loc[unsplit, "reason"] = ""
    unmatched = inside["class"].isna()
    inside.loc[unmatched, "class"] = str(CostClass.UNCLASSIFIED)
    inside.loc[unmatched, "entry_name"] = "billed: " + inside.loc[unmatched, "service"].astype(str)
    inside.loc[unmatched, "reason"] = UNCLASSIFIED_REASON
    ids = {v: r.id for v, r in enumerate(ruleset.rules)}
    inside["rule_id"] = inside["version"].map(ids)
    return inside


def _pools(placed: pd.DataFrame) -> pd.DataFrame:
    shared = placed[placed["class"] == CostClass.SHARED]
    grouped = shared.groupby([*WINDOW, "version", "entry"], sort=True)["amount"].sum()
    out = grouped.reset_index().rename(columns={"entry": "billed"})
    return out.astype({"version": "int64", "billed": "int64", "amount": "int64"})[POOL_COLUMNS]


def _rows(placed: pd.DataFrame, credited: pd.DataFrame) -> pd.DataFrame:
    others = placed[placed["class"] != CostClass.SHARED]
    keys = [*WINDOW, "version", "rule_id", "class", "entry_name", "client", "reason"]
    grouped = others.groupby(keys, sort=True, dropna=False)["amount"].sum().reset_index()
    frame = pd.concat([grouped, credited], ignore_index=True)
    frame["client"] = frame["client"].where(frame["class"] == CostClass.DIRECT, "")
    frame["client_from"] = ""
    frame["workload"] = frame["entry_name"]
    return frame.astype({"version": "int64", "amount": "int64"})[BILLED_ROW_COLUMNS]


def _credited_hours(repriced: Repriced, period: Period) -> pd.DataFrame:
    """The hours of the period of credited cluster periods (``hour, cluster, amount``)."""
    spread = repriced.spread
    return spread[(spread["kind"] == "credited") & _in(period, spread["hour"])].copy()


def _credited_rows(
    picked: pd.DataFrame, ruleset: RuleSet, cost_windows: pd.DataFrame
) -> pd.DataFrame:
    picked["window_start"], picked["window_end"] = hours_to_windows(picked["hour"], cost_windows)
    picked["version"] = ruleset.version_index(picked["window_start"]).to_numpy()
    picked["rule_id"] = picked["version"].map({v: r.id for v, r in enumerate(ruleset.rules)})
    picked["class"] = str(CostClass.OVERHEAD)
    picked["entry_name"] = "credited: " + picked["cluster"].astype(str)
    picked["client"] = ""
    picked["reason"] = "billed cost of the cluster was credited in this period"
    keys = [*WINDOW, "version", "rule_id", "class", "entry_name", "client", "reason"]
    return picked.groupby(keys, sort=True)["amount"].sum().reset_index()


def prepare_billing(
    costs: pd.DataFrame,
    con: duckdb.DuckDBPyConnection,
    view: str,
    ruleset: RuleSet,
    *,
    period: Period | None,
    allow_unbilled: bool = False,
    origin: str = "billing",
    split_view: str | None = None,
    check: Callable[[], None] | None = None,
) -> BillingRun:
    """Group, check and place the billing data of one run (the module's steps).

    ``split_view`` holds CUR 2.0's EKS split rows, the cost table of the clusters with
    ``costs_from: split_cost_allocation`` (``tenantcost.split_cost``). ``check`` is the
    reader's whole-data check when it was deferred (``view`` then carries ``x_problem``):
    the grouping counts the problems in its own scan and ``check`` runs only when there is
    one, to name it.
    """
    group_billing(con, view, ruleset, checked=check is not None)
    if check is not None and needs_check(con, ruleset.currency):
        check()
    check_classified(con, view, ruleset, origin)
    split = split_cost_tables(costs, con, view, split_view, ruleset, origin)
    period = period or data_period(pd.concat([costs, split.costs], ignore_index=True))
    repriced = reprice(costs, con, ruleset, allow_unbilled=allow_unbilled)
    repriced = dataclasses.replace(
        repriced, costs=pd.concat([repriced.costs, split.costs], ignore_index=True)
    )
    rows_in = _in(period, repriced.costs["window_start"])
    in_costs = repriced.costs[rows_in]
    cost_windows = in_costs.drop_duplicates(WINDOW)[WINDOW]
    hours = billed_hours(con, ruleset)
    hours_all = pd.concat([hours.hours, split.hours], ignore_index=True)
    placed = _placed(hours_all, ruleset, period, cost_windows)
    credited = _credited_hours(repriced, period)
    spread = repriced.spread
    estimate_rows = _estimate_mask(repriced)
    return BillingRun(
        costs=repriced.costs,
        pools=_pools(placed),
        rows=_rows(placed, _credited_rows(credited, ruleset, cost_windows)),
        repricing=repriced.repricing,
        totals=billing_totals(con, ruleset),
        unseen=int(
            spread.loc[(spread["kind"] == "unseen") & _in(period, spread["hour"]), "amount"].sum()
        ),
        estimate=int(repriced.costs.loc[rows_in & estimate_rows, "amount"].sum()),
        outside_period=int(
            hours_all.loc[~_in(period, hours_all["hour"]), "amount"].sum()
            + spread.loc[~_in(period, spread["hour"]), "amount"].sum()
            + repriced.costs.loc[~rows_in & ~estimate_rows, "amount"].sum()
        ),
        rounded_effective=repriced.billed_effective + hours.rounded + split.rounded,
        opencost_estimate=int(in_costs["opencost_amount"].sum()),
        origin=origin,
        period=period,
        no_cost_data=_no_cost_data(placed, credited, cost_windows),
    )


@dataclass(frozen=True)
class SplitTables:
    """The clusters priced by AWS's split rows: their cost rows (``amount`` set,
    ``opencost_amount`` 0: OpenCost saw none of it), their other billed lines as hourly
    ``overhead`` amounts (``hour, version, entry, client, service, amount``, entry -2 with
    ``service`` the line's label), and the sum of every group rounded once."""

    costs: pd.DataFrame
    hours: pd.DataFrame
    rounded: int


SPLIT_ENTRY = -2
"""The ``entry`` of a split cluster's lines outside its split rows (residual overhead)."""


def split_cost_tables(
    costs: pd.DataFrame,
    con: duckdb.DuckDBPyConnection,
    view: str,
    split_view: str | None,
    ruleset: RuleSet,
    origin: str,
) -> SplitTables:
    """Cost rows and residual lines of each ``costs_from: split_cost_allocation`` cluster."""
    clusters = ruleset.billing.clusters if ruleset.billing is not None else []
    frames: list[pd.DataFrame] = []
    hours: list[pd.DataFrame] = []
    rounded = 0
    for i, cluster in enumerate(clusters):  # one pass per listed cluster: a handful
        if cluster.costs_from != "split_cost_allocation":
            continue
        _refuse_opencost_rows(costs, cluster.name)
        if split_view is None:
            raise InputError(
                f"billing.clusters '{cluster.name}' takes its costs from split cost allocation, "
                "but the billing data has no EKS split rows (split_line_item_* columns of CUR "
                "2.0)",
                file=origin,
            )
        table = split_cost_costs(con, split_view, cluster.name, origin=origin)
        table["opencost_amount"] = 0
        lines = f"(SELECT * FROM {classified_sql(view, ruleset)} WHERE cluster = {i})"
        other = unsplit_lines(con, lines, split_view, cluster.name)
        frames.append(table)
        hours.append(_unsplit_hours(other, ruleset))
        rounded += int(table["amount"].sum()) + int(other["amount"].sum())
    empty_hours = pd.DataFrame(
        {
            "hour": pd.Series([], dtype="datetime64[ns, UTC]"),
            "version": [],
            "entry": [],
            "client": [],
            "service": [],
            "amount": [],
        }
    )
    return SplitTables(
        costs=pd.concat(frames, ignore_index=True) if frames else costs.iloc[0:0],
        hours=pd.concat(hours, ignore_index=True) if hours else empty_hours,
        rounded=rounded,
    )


def _refuse_opencost_rows(costs: pd.DataFrame, name: str) -> None:
    rows = costs[costs["cluster"] == name]
    if not rows.empty:
        raise InputError(
            f"cluster '{name}' takes its costs from split cost allocation (billing.clusters), "
            "and the cost data holds OpenCost rows for it too: that would count the cluster "
            "twice; drop its OpenCost costs or set costs_from: opencost",
            file=str(rows.iloc[0].origin),
            column="cluster",
        )


def _unsplit_hours(other: pd.DataFrame, ruleset: RuleSet) -> pd.DataFrame:
    """A split cluster's other lines, spread over the hours of their charge periods, as
    residual overhead named after their service and resource type."""
    spread = spread_over_hours(
        other["amount"].to_numpy(dtype="int64"),
        pd.to_datetime(other["ChargePeriodStart"], utc=True),
        pd.to_datetime(other["ChargePeriodEnd"], utc=True),
    )
    label = (other["ServiceName"].astype(str) + " " + other["ResourceType"].astype(str)).str.strip()
    spread["service"] = label.to_numpy()[spread["item"].to_numpy()]
    spread["version"] = ruleset.version_index(spread["hour"]).to_numpy()
    spread["entry"] = SPLIT_ENTRY
    spread["client"] = ""
    return spread[["hour", "version", "entry", "client", "service", "amount"]]


def _estimate_mask(repriced: Repriced) -> pd.Series:
    """The cost rows kept at OpenCost's estimate (periods without billed lines)."""
    est = repriced.repricing[repriced.repricing["estimate"]]
    costs = repriced.costs
    mask = np.zeros(len(costs), dtype=bool)
    for row in est.itertuples(index=False):  # one pass per unbilled period: few
        mask |= (
            (costs["cluster"] == row.cluster)
            & (costs["window_start"] >= row.period_start)
            & (costs["window_start"] < row.period_end)
        ).to_numpy()
    return pd.Series(mask, index=costs.index)
