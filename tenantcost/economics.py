"""Unit economics: what a client costs against what it pays, per plan (or segment) and client.

The allocation says what each client *costs* (its attributed amount). Pricing needs more:

* **all-in cost**: the attributed cost plus the client's share of the residual nobody is
  billed for (idle, overhead, reserve left after the rules' own idle sharing), under the rule
  file's ``pricing.residual`` policy. It is shown *beside* the attributed cost and never
  replaces it, so the allocation's figures do not depend on a pricing decision. The residual
  is split with the largest-remainder rule (:func:`tenantcost.money.split_largest_remainder`),
  so the all-in costs add up to attributed + distributed residual to the micro-unit;
* **revenue** from the client catalog, prorated by the contract's days in the month, the
  **gross margin** (revenue - all-in cost, amount and fraction of revenue) and the clients
  under ``pricing.margin_floor``;
* **distribution** of cost per client per group (mean, p50, p90, max: percentiles by linear
  interpolation between order statistics, numpy's default, each rounded half to even to the
  micro-unit), **unit costs** per source and key (a client's unit cost is its own amount over
  its own measure, a group's is the group's amount over the group's measure), and
  **concentration** (the share of cost carried by the top 1 % and 10 % of clients, at least
  one client each, and the Gini coefficient);
* **price floors** per group for a target margin ``t``: the group's mean all-in cost per
  client / (1 - t), and its all-in cost per 1,000 requests / (1 - t);
* a **projection** when the month is still in progress at ``as_of``: every amount over the
  hours the cost data covers, times the hours of the month (the current run rate).

Everything here is a pure function of frames (no I/O): the command reads the inputs and
writes the outputs. Amounts are int64 micro-units (exact sums in Python integers where a
product could pass int64); ratios are floats rounded to 9 decimals. The work is vectorised
over clients (group-bys, sorted arrays): nothing loops per client in Python.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.config.pricing import Pricing, ResidualPolicy
from tenantcost.errors import InputError
from tenantcost.key_units import unit_basis
from tenantcost.kinds import KEYED_KINDS, RESIDUAL_CLASSES, LineKind
from tenantcost.money import MICROS_PER_UNIT, split_largest_remainder
from tenantcost.result import AllocationResult
from tenantcost.windows import Period

REQUESTS = "requests"
"""The usage column price floors are quoted per 1,000 of."""
RATIO_PLACES = 9
"""Ratios (margins, shares, Gini) are rounded to this many decimals, as the JSON's shares."""
PROJECTION_METHOD = "run rate"


class Basis(StrEnum):
    """What a month's cost figures stand for (the service's unit-economics ``basis``)."""

    MONTH = "month"
    """The month's cost, its data covering the whole month."""
    PROJECTED = "projected"
    """The month's cost at the current run rate (:func:`projected_costs`): the month is open,
    or its cost data covers less than the month."""


class GroupBy(StrEnum):
    """What ``unit-economics`` groups clients by (``--by``): a catalog column."""

    PLAN = "plan"
    SEGMENT = "segment"


@dataclass(frozen=True)
class Policy:
    """The pricing choices of one run (rule file's ``pricing:`` and the command's options)."""

    residual: ResidualPolicy
    target_margin: Fraction
    margin_floor: Fraction | None = None
    by: GroupBy = GroupBy.PLAN


def policy_for(pricing: Pricing, by: GroupBy, target: Fraction | None = None) -> Policy:
    """The rule file's ``pricing:`` as a :class:`Policy` (``target``: a target margin given
    instead of ``pricing.target_margin``, e.g. ``--target-margin``). One place, so the CLI and
    the service's pricing page price a month alike."""
    floor = Fraction(pricing.margin_floor) if pricing.margin_floor is not None else None
    return Policy(
        residual=pricing.residual,
        target_margin=Fraction(pricing.target_margin) if target is None else target,
        margin_floor=floor,
        by=by,
    )


@dataclass(frozen=True)
class MonthCosts:
    """What the economics need from an allocation (see :func:`month_costs`).

    * ``costs``: ``client, cost`` (int64 micro-units; attributed, one row per client);
    * ``lines``: keyed client lines summed over the period: ``client, kind, source, key,
      measure, amount``;
    * ``requests``: ``client, requests`` (float, the client's requests over every service;
      empty when the usage has no ``requests`` column);
    * ``residual``: idle + overhead + reserve left after the rules' idle sharing.
    """

    month: Period
    currency: str
    costs: pd.DataFrame
    lines: pd.DataFrame
    requests: pd.DataFrame
    residual: int
    hours_covered: float


@dataclass
class Economics:
    """The result: per group, per client, unit costs, concentration and the projection."""

    costs: MonthCosts
    policy: Policy
    clients: pd.DataFrame
    groups: pd.DataFrame
    unit_costs: pd.DataFrame
    concentration: dict[str, Any]
    distributed: int
    projection: Projection | None = None
    not_in_catalog: list[str] = field(default_factory=list)

    @property
    def undistributed(self) -> int:
        return self.costs.residual - self.distributed


@dataclass(frozen=True)
class Projection:
    """Month-end figures at the current run rate (amounts x hours_in_month / hours_covered)."""

    as_of: pd.Timestamp
    hours_covered: float
    hours_in_month: float
    clients: pd.DataFrame
    groups: pd.DataFrame
    method: str


# --------------------------------------------------------------------------- integer helpers


def div_half_even(num: Any, den: Any) -> Any:
    """``num / den`` rounded half to even, elementwise, for integers (``den`` > 0).

    Works on int64 and on object arrays of Python integers (exact beyond int64)."""
    q = num // den
    twice = (num - q * den) * 2
    up = (twice > den) | ((twice == den) & (q % 2 == 1))
    return q + up


def ratio(num: Any, den: Any) -> Any:
    """``num / den`` as floats rounded to :data:`RATIO_PLACES` (NaN where ``den`` is 0)."""
    n = np.asarray(num, dtype="float64")
    d = np.asarray(den, dtype="float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d != 0, n / np.where(d != 0, d, 1.0), np.nan)
    return np.round(out, RATIO_PLACES)


# --------------------------------------------------------------------------- inputs


def month_costs(
    result: AllocationResult, month: Period, requests: pd.DataFrame | None = None
) -> MonthCosts:
    """The economics' view of one allocation of ``month``."""
    costs = result.client_totals().rename(columns={"amount": "cost"})
    costs["client"] = costs["client"].astype("str")
    costs["cost"] = costs["cost"].astype("int64")
    lines = result.lines
    keyed = lines[lines["kind"].isin(KEYED_KINDS)]
    grouped = (
        keyed.groupby(["client", "kind", "source", "key"], sort=True, observed=True)
        .agg(measure=("measure", "sum"), amount=("amount", "sum"))
        .reset_index()
    )
    for column in ("client", "kind", "source", "key"):
        grouped[column] = grouped[column].astype("str")
    idle_distributed = int(lines.loc[lines["kind"] == LineKind.IDLE, "amount"].sum())
    before = int(
        result.residual.loc[result.residual["class"].isin(RESIDUAL_CLASSES), "amount"].sum()
    )
    if requests is None:
        requests = pd.DataFrame({"client": pd.Series(dtype="str"), REQUESTS: []})
    return MonthCosts(
        month=month,
        currency=result.currency,
        costs=costs,
        lines=grouped,
        requests=requests,
        residual=before - idle_distributed,
        hours_covered=float(result.hours),
    )


def prorated_revenue(catalog: pd.DataFrame, month: Period) -> pd.DataFrame:
    """Each catalog client's revenue for ``month``: monthly revenue x contract days in the
    month / days of the month, half to even; ``active_days`` (0: no contract that month).

    A catalog with ``fx_num, fx_den`` (:func:`tenantcost.presentation.revenue_rates`: the
    client's currency into the costs' one) gives ``revenue`` converted, rounded once with the
    proration (exact Python integers), and ``own_revenue``, the prorated revenue in the
    client's own currency."""
    start = month.start.tz_localize(None)
    end = month.end.tz_localize(None)
    days = (end - start).days
    first = catalog["start"].fillna(start).clip(lower=start)
    last = (catalog["end"] + pd.Timedelta(days=1)).fillna(end).clip(upper=end)
    active = ((last - first).dt.days).clip(lower=0).to_numpy(dtype="int64")
    monthly = catalog["monthly_revenue"].to_numpy(dtype="int64")
    own = div_half_even(monthly * active, days).astype("int64")
    if "fx_num" not in catalog:
        return catalog.assign(active_days=active, revenue=own, own_revenue=own)
    num = (monthly * active).astype(object) * catalog["fx_num"].to_numpy(dtype=object)
    den = catalog["fx_den"].to_numpy(dtype=object) * days
    revenue = np.asarray(div_half_even(num, den), dtype="int64")
    out = catalog.assign(active_days=active, revenue=revenue, own_revenue=own)
    return out.drop(columns=["fx_num", "fx_den"])


# --------------------------------------------------------------------------- the core


def compute(costs: MonthCosts, catalog: pd.DataFrame, policy: Policy) -> Economics:
    """Unit economics of one month (see the module doc). ``catalog`` is
    :attr:`tenantcost.catalog.Catalog.frame`."""
    if costs.month.end - costs.month.start <= pd.Timedelta(0):
        raise InputError("the month is empty")
    clients = _clients(costs, catalog, policy)
    distributed = int(clients["residual_share"].sum())
    groups = _groups(clients, policy)
    return Economics(
        costs=costs,
        policy=policy,
        clients=clients,
        groups=groups,
        unit_costs=_unit_costs(costs.lines, clients),
        concentration=concentration(clients.loc[clients["cost"] > 0, "cost"].to_numpy()),
        distributed=distributed,
        not_in_catalog=sorted(clients.loc[~clients["in_catalog"], "client"].tolist()),
    )


def _clients(costs: MonthCosts, catalog: pd.DataFrame, policy: Policy) -> pd.DataFrame:
    """One row per client with cost or with a contract in the month."""
    revenue = prorated_revenue(catalog.astype({"client": "str"}), costs.month)
    merged = costs.costs.astype({"client": "str", "cost": "int64"}).merge(
        revenue.drop(columns=["row"], errors="ignore"), on="client", how="outer", indicator=True
    )
    merged["in_catalog"] = merged["_merge"] != "left_only"
    merged["cost"] = merged["cost"].fillna(0).astype("int64")
    keep = (merged["cost"] > 0) | (merged["active_days"].fillna(0) > 0)
    frame = merged.loc[keep].drop(columns="_merge").reset_index(drop=True)
    for column in ("name", "plan", "segment", "account_manager", "currency"):
        frame[column] = frame[column].fillna("").astype("str")
    frame["has_revenue"] = frame["has_revenue"].fillna(False).astype(bool)
    frame["revenue"] = frame["revenue"].fillna(0).astype("int64")
    frame["own_revenue"] = frame["own_revenue"].fillna(0).astype("int64")
    frame["group"] = frame[str(policy.by)]
    frame["residual_share"] = residual_shares(frame, costs.residual, policy.residual)
    frame["all_in_cost"] = frame["cost"] + frame["residual_share"]
    frame["margin"] = frame["revenue"] - frame["all_in_cost"]
    frame["margin_pct"] = ratio(frame["margin"], frame["revenue"])
    frame["under_margin_floor"] = _under_floor(frame, policy.margin_floor)
    frame = frame.merge(costs.requests.astype({"client": "str"}), on="client", how="left")
    frame[REQUESTS] = frame[REQUESTS].astype("float64")
    return frame.sort_values(
        ["in_catalog", "group", "all_in_cost", "client"],
        ascending=[False, True, False, True],
        kind="mergesort",
    ).reset_index(drop=True)


def residual_shares(frame: pd.DataFrame, residual: int, policy: ResidualPolicy) -> np.ndarray:
    """Each client's part of the residual: largest remainder over the clients with cost,
    in proportion to cost (``proportional``) or equal (``even``); zero with ``none``."""
    shares = np.zeros(len(frame), dtype="int64")
    with_cost = (frame["cost"] > 0).to_numpy()
    if policy == ResidualPolicy.NONE or residual == 0 or not with_cost.any():
        return shares
    chosen = frame.loc[with_cost]
    weights = chosen["cost"] if policy == ResidualPolicy.PROPORTIONAL else chosen["cost"] * 0 + 1
    shares[with_cost] = split_largest_remainder(
        pd.Series(0, index=chosen.index),
        pd.Series(residual, index=chosen.index),
        weights.astype("int64"),
        chosen["client"],
    )
    return shares


def _under_floor(frame: pd.DataFrame, floor: Fraction | None) -> np.ndarray:
    """margin / revenue < floor, exactly (margin x q < p x revenue), for clients with revenue."""
    if floor is None:
        return np.zeros(len(frame), dtype=bool)
    margin = frame["margin"].to_numpy().astype(object)
    revenue = frame["revenue"].to_numpy().astype(object)
    below = margin * floor.denominator < revenue * floor.numerator
    return frame["has_revenue"].to_numpy() & below.astype(bool)


def _groups(clients: pd.DataFrame, policy: Policy) -> pd.DataFrame:
    """Per group (plan or segment) of catalog clients: counts, sums, distribution, margin,
    price floors."""
    known = clients.loc[clients["in_catalog"]]
    by = known.groupby("group", sort=True)
    groups = pd.DataFrame(
        {
            "clients": (known["cost"] > 0).groupby(known["group"], sort=True).sum(),
            "catalog_clients": by["client"].size(),
            "clients_without_revenue": (~known["has_revenue"]).groupby(known["group"]).sum(),
            "cost": by["cost"].sum(),
            "all_in_cost": by["all_in_cost"].sum(),
            "revenue": by["revenue"].sum(),
            "has_revenue": by["has_revenue"].any(),
            REQUESTS: by[REQUESTS].sum(min_count=1),
        }
    ).reset_index()
    groups["margin"] = groups["revenue"] - groups["all_in_cost"]
    groups["margin_pct"] = ratio(groups["margin"], groups["revenue"])
    with_cost = known.loc[known["cost"] > 0]
    stats = distribution(with_cost["group"], with_cost["cost"])
    all_in = distribution(with_cost["group"], with_cost["all_in_cost"]).add_prefix("all_in_")
    groups = groups.merge(stats, left_on="group", right_index=True, how="left")
    groups = groups.merge(all_in, left_on="group", right_index=True, how="left")
    return _price_floors(groups, policy.target_margin)


def distribution(groups: pd.Series, values: pd.Series) -> pd.DataFrame:
    """Per group: ``mean, p50, p90, max`` of int64 ``values``, in micro-units.

    Percentiles interpolate linearly between order statistics (position (n - 1) x q, numpy's
    default) and, like the mean, are rounded half to even to the micro-unit; all exact
    (the interpolation in Python integers). Vectorised over every group at once:
    the values are sorted by group, and each group's order statistics are read by offset.
    """
    frame = pd.DataFrame({"g": groups.to_numpy(), "v": values.to_numpy(dtype="int64")})
    if frame.empty:
        empty = pd.Index([], dtype="str", name="g")
        return pd.DataFrame(columns=["mean", "p50", "p90", "max"], index=empty, dtype=object)
    frame = frame.sort_values(["g", "v"], kind="mergesort").reset_index(drop=True)
    sizes = frame.groupby("g", sort=True).size()
    n = sizes.to_numpy(dtype="int64")
    offsets = np.r_[0, np.cumsum(n)[:-1]]
    v = frame["v"].to_numpy().astype(object)
    sums = frame.groupby("g", sort=True)["v"].sum().to_numpy().astype(object)
    out = pd.DataFrame(index=sizes.index)
    out["mean"] = div_half_even(sums, n.astype(object))
    for name, q in (("p50", Fraction(1, 2)), ("p90", Fraction(9, 10))):
        position = (n - 1) * q.numerator
        low = position // q.denominator
        rest = position % q.denominator
        high = np.minimum(low + 1, n - 1)
        base = v[offsets + low]
        step = (v[offsets + high] - base) * rest.astype(object)
        # Round the whole value, not the step: 1 + 1/2 is 2 (to even), 2 + 1/2 is 2.
        out[name] = div_half_even(base * q.denominator + step, q.denominator)
    out["max"] = v[offsets + n - 1]
    return out.astype(object)


def _price_floors(groups: pd.DataFrame, target: Fraction) -> pd.DataFrame:
    """The monthly price per client and per 1,000 requests that reach the target margin:
    all-in cost / (1 - t), half to even (Python integers: exact at any size)."""
    keep = Fraction(1) - target
    n = groups["clients"].to_numpy().astype(object)
    total = groups["all_in_cost"].to_numpy().astype(object)
    has = n > 0
    per_client = np.full(len(groups), None, dtype=object)
    if has.any():
        per_client[has] = div_half_even(total[has] * keep.denominator, n[has] * keep.numerator)
    requests = groups[REQUESTS].to_numpy(dtype="float64")
    per_1000 = np.full(len(groups), None, dtype=object)
    valid = np.isfinite(requests) & (requests > 0)
    if valid.any():
        micro_requests = np.rint(requests[valid] * MICROS_PER_UNIT).astype("int64").astype(object)
        per_1000[valid] = div_half_even(
            total[valid] * 1000 * MICROS_PER_UNIT * keep.denominator,
            micro_requests * keep.numerator,
        )
    return groups.assign(price_per_client=per_client, price_per_1000_requests=per_1000)


def _unit_costs(lines: pd.DataFrame, clients: pd.DataFrame) -> pd.DataFrame:
    """Unit costs per source and key, per group (its amount over its measure) and per client
    (its own amount over its own measure); keys without a unit (``even``, weights) have none.
    """
    columns = ["scope", "group", "client", "kind", "source", "key", "basis", "per",
               "measure", "amount", "unit_cost"]  # fmt: skip
    if lines.empty:
        return pd.DataFrame(columns=columns)
    keys = pd.Series(lines["key"].unique())
    bases = keys.map(lambda k: unit_basis(str(k)))  # one call per distinct key, not per line
    known = bases.notna()
    table = pd.DataFrame(
        {
            "key": keys[known],
            "basis": bases[known].map(lambda b: b[0]),
            "per": bases[known].map(lambda b: b[1]),
        }
    )
    lines = lines.merge(table, on="key", how="inner")
    lines = lines.merge(clients[["client", "group", "in_catalog"]], on="client", how="inner")
    per_client = lines.assign(scope="client")
    in_groups = lines.loc[lines["in_catalog"]]
    per_group = (
        in_groups.groupby(["group", "kind", "source", "key", "basis", "per"], sort=True)
        .agg(measure=("measure", "sum"), amount=("amount", "sum"))
        .reset_index()
        .assign(scope="group", client="")
    )
    both = pd.concat([per_group, per_client], ignore_index=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = (
            both["amount"].to_numpy("float64")
            * both["per"].to_numpy("float64")
            / both["measure"].to_numpy("float64")
        )
    both["unit_cost"] = pd.Series(np.rint(rate), dtype="float64").where(
        both["measure"].to_numpy() > 0
    )
    return both[columns].reset_index(drop=True)


def concentration(costs: np.ndarray) -> dict[str, Any]:
    """Share of cost carried by the top 1 % and 10 % of clients (ceil(n x p), at least one
    client) and the Gini coefficient ``(2 sum(i x_i) - (n + 1) sum(x)) / (n sum(x))`` over
    costs sorted ascending (``i`` from 1): 0 when all pay alike, (n - 1)/n when one pays all.
    Exact in Python integers, rounded once."""
    values = np.sort(np.asarray(costs, dtype="int64")).astype(object)
    n = len(values)
    total = int(values.sum()) if n else 0
    if n == 0 or total == 0:
        return {"clients": n, "top_1pct": None, "top_10pct": None, "gini": None,
                "top_1pct_clients": 0, "top_10pct_clients": 0}  # fmt: skip
    top1, top10 = math.ceil(n / 100), math.ceil(n / 10)
    ranks = np.arange(1, n + 1, dtype="int64").astype(object)
    weighted = int((ranks * values).sum())
    return {
        "clients": n,
        "top_1pct": float(ratio(int(values[n - top1 :].sum()), total)),
        "top_10pct": float(ratio(int(values[n - top10 :].sum()), total)),
        "gini": float(ratio(2 * weighted - (n + 1) * total, n * total)),
        "top_1pct_clients": top1,
        "top_10pct_clients": top10,
    }


# --------------------------------------------------------------------------- projection


def project(economics: Economics, as_of: pd.Timestamp) -> Projection | None:
    """Month-end figures when ``as_of`` falls inside the month (None once it has ended).

    A month that has not started at ``as_of`` is refused. Amounts scale by
    hours_in_month / hours_covered (integers: amount x month seconds / covered seconds, half
    to even); revenue is already the month's, so it is not scaled.
    """
    month = economics.costs.month
    if as_of < month.start:
        raise InputError(
            f"--as-of {as_of.isoformat()} is before the month {month.start:%Y-%m} starts: "
            "there is nothing to project yet"
        )
    if as_of >= month.end:
        return None
    month_seconds = int((month.end - month.start).total_seconds())
    covered = round(economics.costs.hours_covered * 3600)
    if covered <= 0:
        raise InputError(f"no cost data in {month.start:%Y-%m} before --as-of to project from")
    clients = _scaled(economics.clients, month_seconds, covered)
    groups = _scaled(economics.groups, month_seconds, covered)
    hours_in_month = month_seconds / 3600
    return Projection(
        as_of=as_of,
        hours_covered=covered / 3600,
        hours_in_month=hours_in_month,
        clients=clients,
        groups=groups,
        method=(
            f"{PROJECTION_METHOD}: amounts over the {covered / 3600:g} h covered by cost data, "
            f"times the month's {hours_in_month:g} h; revenue is the month's, not projected"
        ),
    )


def run_rate(amounts: Any, month_seconds: int, covered: int) -> np.ndarray:
    """Month-end amounts at the current run rate: amount x month seconds / covered seconds,
    half to even, in Python integers (exact past int64). The one projection formula: the
    projection here and ``tenantcost watch``'s ``projected`` both use it."""
    values = np.asarray(amounts).astype(object) * month_seconds
    return np.asarray(div_half_even(values, covered)).astype("int64")


def coverage(costs: MonthCosts) -> float:
    """Hours with cost data over the hours of the month, a fraction (9 decimals)."""
    month_seconds = (costs.month.end - costs.month.start).total_seconds()
    return float(ratio(costs.hours_covered * 3600, month_seconds))


def projected_costs(costs: MonthCosts) -> MonthCosts:
    """``costs`` at the current run rate to the month's end (:func:`run_rate`, the watch's
    projection): client costs, line amounts and the residual scaled in integers, the lines'
    measures and the requests by the same factor, so unit costs and price floors per 1,000
    requests keep their rate. Revenue is the month's already: comparing it with a month's
    cost, not a partial one, is what this is for. Costs with no hour covered are left as
    they are (nothing to project from)."""
    month_seconds = int((costs.month.end - costs.month.start).total_seconds())
    covered = round(costs.hours_covered * 3600)
    if covered <= 0 or covered >= month_seconds:
        return costs
    factor = month_seconds / covered
    lines = costs.lines.assign(
        amount=run_rate(costs.lines["amount"].to_numpy(), month_seconds, covered),
        measure=costs.lines["measure"].to_numpy(dtype="float64") * factor,
    )
    requests = costs.requests.assign(
        **{REQUESTS: costs.requests[REQUESTS].to_numpy(dtype="float64") * factor}
    )
    return MonthCosts(
        month=costs.month,
        currency=costs.currency,
        costs=costs.costs.assign(
            cost=run_rate(costs.costs["cost"].to_numpy(), month_seconds, covered)
        ),
        lines=lines,
        requests=requests,
        residual=int(run_rate([costs.residual], month_seconds, covered)[0]),
        hours_covered=costs.hours_covered,
    )


def _scaled(frame: pd.DataFrame, month_seconds: int, covered: int) -> pd.DataFrame:
    """``cost`` and ``all_in_cost`` at the run rate, and the margin they leave."""
    keys = [c for c in ("client", "group", "revenue", "has_revenue") if c in frame]
    out = frame[keys].copy()
    for column in ("cost", "all_in_cost"):
        out[column] = run_rate(frame[column].to_numpy(), month_seconds, covered)
    out["margin"] = out["revenue"] - out["all_in_cost"]
    out["margin_pct"] = ratio(out["margin"], out["revenue"])
    return out
