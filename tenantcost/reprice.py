"""Repricing: OpenCost's rows of each billed cluster, at what the cluster was billed.

OpenCost prices nodes at list (or custom) prices; the invoice says what they cost after
Savings Plans, reservations, discounts and credits. Adding the bill's node cost to OpenCost's
total would count the same spend twice (docs/invoice.md). Instead each OpenCost row is repriced:

* a cluster's **repricing periods** are the finest partition of time in which every charge
  period of its billed lines and every OpenCost window of it lies inside one part (hourly
  billing against hourly windows: each hour; daily billing: each day; a monthly line: the
  month). The factor B / O is a price, computed over the whole period even when ``--from`` or
  ``--to`` cut into it, so no figure depends on where the period is cut;
* per period, B = the cluster's billed ``EffectiveCost`` (exact sum, rounded half-even once)
  and O = its OpenCost rows (micro-units). Each row gets its largest-remainder share of B,
  weighted by its own amount, so the rows conserve B exactly; ties go to the row first in
  (window_start, name, cluster, node, namespace, controller_kind, controller, pod) order;
* B <= 0 with O > 0 (a credited period) is not a price: the rows become 0 and B is a residual
  ``overhead`` item ``credited: <cluster>``;
* O = 0 with B != 0: billed, never seen by OpenCost: the invoice line ``unseen``;
* O > 0 with no billed line: billing data lags a day or two, so this is an error naming the
  period, unless ``--allow-unbilled`` keeps OpenCost's figure as an *estimate* (marked on every
  output; the invoice cascade takes it out again as ``estimate``).

Every cost row must belong to a listed cluster (``billing.clusters``; rows without a cluster,
as in OpenCost's CSV export, to the entry ``name: ""``).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from tenantcost.billed import GROUPS, HOUR, micros_sql
from tenantcost.config.rules import RuleSet
from tenantcost.errors import InputError
from tenantcost.money import split_largest_remainder, to_micros
from tenantcost.tables import COST_PROPERTY_COLUMNS
from tenantcost.timefmt import window_text

TIE_BREAK = ["window_start", *COST_PROPERTY_COLUMNS]
"""Repricing's tie-break order: the window, then the cost row's properties."""
REPRICING_COLUMNS = [
    "cluster",
    "period_start",
    "period_end",
    "opencost",
    "billed_effective",
    "estimate",
]


@dataclass(frozen=True)
class Repriced:
    """The cost rows at billed prices and what the invoice cascade needs of them.

    ``costs``: the input rows with an int64 ``amount`` (repriced micro-units) and
    ``opencost_amount`` (OpenCost's own); ``repricing``: one row per cluster and period
    (``REPRICING_COLUMNS``); ``spread``: per-hour amounts of credited and unseen periods
    (``hour, cluster, kind, amount``, kind ``credited`` or ``unseen``); ``billed_effective``:
    Σ B over every period (each rounded once).
    """

    costs: pd.DataFrame
    repricing: pd.DataFrame
    spread: pd.DataFrame
    billed_effective: int


def cost_amounts(costs: pd.DataFrame) -> np.ndarray:
    """OpenCost's amounts in micro-units (the plan's own conversion)."""
    if "amount" in costs:
        return costs["amount"].to_numpy(dtype="int64")
    return to_micros(costs["total_cost"], origins=costs["origin"], column="total_cost")


def check_clusters(costs: pd.DataFrame, ruleset: RuleSet) -> dict[str, int]:
    """Each cost row's cluster must be listed under ``billing.clusters``: name -> index."""
    clusters = ruleset.billing.clusters if ruleset.billing is not None else []
    index = {c.name: i for i, c in enumerate(clusters)}
    unknown = ~costs["cluster"].isin(list(index))
    if unknown.any():
        row = costs[unknown].iloc[0]
        raise InputError(
            f"cluster '{row.cluster}' is in the cost data but not listed under "
            "billing.clusters; list it with the match of its billed lines (rows without a "
            'cluster belong to an entry with name: "")',
            file=str(row.origin),
            column="cluster",
        )
    return index


def merge_periods(intervals: pd.DataFrame) -> pd.DataFrame:
    """``cluster, start, end`` intervals -> the finest partition covering each in one part:
    overlapping intervals of one cluster merged (``cluster, period_start, period_end``)."""
    frame = intervals.drop_duplicates().sort_values(["cluster", "start", "end"], kind="mergesort")
    frame = frame.reset_index(drop=True)
    reach = frame.groupby("cluster", sort=False)["end"].cummax()
    previous = reach.groupby(frame["cluster"], sort=False).shift(1)
    new = previous.isna() | (frame["start"] >= previous)
    frame["part"] = new.cumsum()
    parts = frame.groupby(["part", "cluster"], sort=True).agg(
        period_start=("start", "min"), period_end=("end", "max")
    )
    return parts.reset_index().drop(columns="part")


def _billed_periods(con: duckdb.DuckDBPyConnection, names: list[str]) -> pd.DataFrame:
    """The distinct charge periods of each repriced cluster's billed lines."""
    frame = con.execute(f"SELECT DISTINCT cluster, s, e FROM {GROUPS} WHERE cluster >= 0").df()
    repriced = [i for i, name in enumerate(names) if name != "\0"]
    frame = frame[frame["cluster"].isin(repriced)]
    return pd.DataFrame(
        {
            "cluster": frame["cluster"].map(dict(enumerate(names))).astype(str),
            "start": pd.to_datetime(frame["s"], utc=True).dt.as_unit("ns"),
            "end": pd.to_datetime(frame["e"], utc=True).dt.as_unit("ns"),
        }
    )


def _period_billing(
    con: duckdb.DuckDBPyConnection, periods: pd.DataFrame, names: list[str]
) -> pd.DataFrame:
    """B (rounded once) and whether any billed line falls in each period."""
    keyed = periods.assign(idx=periods["cluster"].map({n: i for i, n in enumerate(names)}))
    con.register("t_periods", keyed[["idx", "period_start", "period_end"]].reset_index())
    try:
        found = con.execute(
            f"""
            SELECT p."index" AS pid, {micros_sql("sum(g.effective)")} AS b, count(*) AS lines
            FROM t_periods p JOIN {GROUPS} g
              ON g.cluster = p.idx AND g.s >= p.period_start AND g.e <= p.period_end
            GROUP BY p."index"
            """
        ).df()
    finally:
        con.unregister("t_periods")
    out = periods.reset_index(drop=True).copy()
    by_pid = found.set_index("pid")
    out["billed_effective"] = by_pid["b"].reindex(out.index).fillna(0).astype("int64").to_numpy()
    out["billed"] = by_pid["lines"].reindex(out.index).notna().to_numpy()
    return out


def _assign_periods(costs: pd.DataFrame, periods: pd.DataFrame) -> np.ndarray:
    """The period index of each cost row (every window lies inside one period)."""
    if costs.empty or periods.empty:
        return np.zeros(len(costs), dtype="int64")
    p = periods.reset_index(drop=True).assign(pid=lambda f: np.arange(len(f)))
    rows = pd.DataFrame(
        {
            "cluster": costs["cluster"].astype(str).to_numpy(),
            "ws": costs["window_start"].dt.as_unit("ns").to_numpy(),
            "pos": np.arange(len(costs)),
        }
    ).sort_values("ws", kind="mergesort")
    found = pd.merge_asof(
        rows,
        p.sort_values("period_start"),
        left_on="ws",
        right_on="period_start",
        by="cluster",
        direction="backward",
    ).sort_values("pos", kind="mergesort")
    return found["pid"].to_numpy(dtype="int64")


def spread_over_hours(amounts: np.ndarray, starts: pd.Series, ends: pd.Series) -> pd.DataFrame:
    """Each amount spread evenly over the whole hours of its period (largest remainder,
    sign kept, leftover units to the earliest hours): ``item, hour, amount``."""
    n = np.asarray((ends - starts) // HOUR, dtype="int64")
    n = np.maximum(n, 1)
    item = np.repeat(np.arange(len(amounts)), n)
    offset = np.arange(item.size) - np.repeat(np.cumsum(n) - n, n)
    a = np.asarray(amounts, dtype="int64")[item]
    size = n[item]
    magnitude = np.abs(a) // size + (offset < np.abs(a) % size)
    start_ns = pd.DatetimeIndex(starts).as_unit("ns").asi8
    hour = start_ns[item] + offset * 3_600_000_000_000
    return pd.DataFrame(
        {
            "item": item,
            "hour": pd.to_datetime(hour, utc=True),
            "amount": (np.sign(a) * magnitude).astype("int64"),
        }
    )


def _raise_unbilled(periods: pd.DataFrame) -> None:
    row = periods.iloc[0]
    raise InputError(
        f"cluster '{row.cluster}' has OpenCost costs but no billed line in "
        f"{window_text(row.period_start, row.period_end)} (billing data usually lags a day or "
        "two: give the later export, or --allow-unbilled to keep OpenCost's estimate there)",
        column="ChargePeriodStart",
    )


def reprice(
    costs: pd.DataFrame,
    con: duckdb.DuckDBPyConnection,
    ruleset: RuleSet,
    *,
    allow_unbilled: bool = False,
) -> Repriced:
    """Reprice every cost row to its cluster's billed effective cost (the module's rules)."""
    index = check_clusters(costs, ruleset)
    names = list(index)  # by cluster index; clusters whose costs come from split rows are
    # not repriced: their names are blanked so no period of theirs forms
    clusters = ruleset.billing.clusters if ruleset.billing is not None else []
    names = [n if clusters[i].costs_from == "opencost" else "\0" for i, n in enumerate(names)]
    costs = costs.copy()
    costs["opencost_amount"] = cost_amounts(costs)
    intervals = pd.concat(
        [
            _billed_periods(con, names),
            pd.DataFrame(
                {
                    "cluster": costs["cluster"].astype(str),
                    "start": costs["window_start"].dt.as_unit("ns"),
                    "end": costs["window_end"].dt.as_unit("ns"),
                }
            ),
        ],
        ignore_index=True,
    )
    periods = _period_billing(con, merge_periods(intervals), names)
    pid = _assign_periods(costs, periods)
    exact = pd.Series(costs["opencost_amount"].to_numpy(dtype="int64")).groupby(pid).sum()
    periods["opencost"] = exact.reindex(periods.index).fillna(0).to_numpy(dtype="int64")
    unbilled = (~periods["billed"]) & (periods["opencost"] > 0)
    if unbilled.any() and not allow_unbilled:
        _raise_unbilled(periods[unbilled])
    periods["estimate"] = unbilled
    costs["amount"] = _repriced_amounts(costs, pid, periods)
    credited = periods["billed"] & (periods["billed_effective"] <= 0) & (periods["opencost"] > 0)
    unseen = (periods["opencost"] == 0) & (periods["billed_effective"] != 0)
    spread = _spread(periods, credited, unseen)
    repricing = periods[REPRICING_COLUMNS].copy()
    repricing.loc[unbilled.to_numpy(), "billed_effective"] = 0
    return Repriced(
        costs=costs,
        repricing=repricing.reset_index(drop=True),
        spread=spread,
        billed_effective=int(periods["billed_effective"].sum()),
    )


def _repriced_amounts(costs: pd.DataFrame, pid: np.ndarray, periods: pd.DataFrame) -> np.ndarray:
    """Each row's share of its period's B (estimates keep OpenCost's amount; credited and
    unbilled-zero periods give 0)."""
    b = periods["billed_effective"].to_numpy(dtype="int64")[pid]
    priced = (periods["billed"] & (periods["billed_effective"] > 0)).to_numpy()[pid]
    estimate = periods["estimate"].to_numpy()[pid]
    order = costs[TIE_BREAK].astype(str).assign(pos=np.arange(len(costs)))
    order["window_start"] = costs["window_start"].astype("int64").astype(str).str.zfill(20)
    ranked = order.sort_values([*TIE_BREAK, "pos"], kind="mergesort")
    label = np.empty(len(costs), dtype=object)
    label[ranked["pos"].to_numpy()] = [f"{i:012d}" for i in range(len(costs))]
    weights = costs["opencost_amount"].to_numpy(dtype="int64")
    parts = split_largest_remainder(
        pd.Series(pid), pd.Series(np.where(priced, b, 0)), pd.Series(weights), pd.Series(label)
    )
    return np.where(estimate, weights, np.where(priced, parts, 0)).astype("int64")


def _spread(periods: pd.DataFrame, credited: pd.Series, unseen: pd.Series) -> pd.DataFrame:
    chosen = (credited | unseen).to_numpy()
    picked = periods[chosen].reset_index(drop=True)
    kinds = np.where(credited.to_numpy()[chosen], "credited", "unseen")
    hours = spread_over_hours(
        picked["billed_effective"].to_numpy(), picked["period_start"], picked["period_end"]
    )
    hours["cluster"] = picked["cluster"].to_numpy()[hours["item"].to_numpy()]
    hours["kind"] = kinds[hours["item"].to_numpy()]
    return hours[["hour", "cluster", "kind", "amount"]]
