"""An allocation presented in another currency: exact, rounded once, and still closing.

Conversion is a *presentation* of the ledger: it never changes a ledger figure, and the
converted result keeps every ledger amount beside its converted one (``ledger_amount``).

**Exact.** Each row of each result table (a client's line, an unattributed window, an idle or
overhead window, an exclusion, an unclassified row) has a ledger amount per UTC day; its
exact converted value is the sum over its days of ``amount x multiplier(day)``
(:mod:`tenantcost.fx`). The multipliers are fractions, so every exact value is held as an
integer numerator over one common denominator ``L`` (the least common multiple of the
multipliers' denominators): sums of exact values are integer sums, with no float anywhere.

**Rounded once, top down.** The converted reference total is the exact sum rounded half to
even. It is split over the cascade's lines (each client, unattributed, idle, overhead,
reserve, each exclusion, unclassified) by the largest-remainder rule of
:mod:`tenantcost.money`: each line gets the floor of its exact value, and the units left go
one each to the largest remainders, ties broken by the line's label. Each line is then split
over its rows the same way. So every displayed total is the sum of its parts, the cascade
closes with gap 0 and no ``rounding`` line, and a line differs from its own exact value
rounded alone by at most one micro-unit. No figure depends on input order: every tie is
broken by labels.

The idle line is the residual idle *remaining* after distribution: the residual idle rows
(before distribution) share the idle line's amount plus what the clients' idle lines
received, so the residual table keeps adding up as in the ledger.

The reference's parts (OpenCost costs, external costs, billed pools) have no day detail of
their own here: they share the converted reference total in proportion to their ledger
amounts (largest remainder), so they too add up. The invoice cascade stays in the billing
currency, as FOCUS requires (``BillingCurrency``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import date

import numpy as np
import pandas as pd

from tenantcost.economics import div_half_even
from tenantcost.fx import Conversion
from tenantcost.kinds import RESIDUAL_CLASSES, CostClass, LineKind
from tenantcost.result import AllocationResult
from tenantcost.split import DAY_LINE_COLUMNS

LINE_KEYS = DAY_LINE_COLUMNS[:-2]
"""What identifies a period line: rule, client, source, kind and key."""


def _days(starts: pd.Series) -> pd.Series:
    """The UTC date of each window start, as ``datetime64[ns]`` midnight."""
    values = pd.to_datetime(starts, utc=True)
    return values.dt.tz_localize(None).dt.normalize()


def result_days(result: AllocationResult) -> list[date]:
    """Every UTC day the result's tables hold an amount on (the days a conversion needs)."""
    frames = [result.unattributed, result.residual, result.exclusions, result.unclassified]
    days: set[pd.Timestamp] = set()
    for frame in frames:
        if not frame.empty:
            days |= set(_days(frame["window_start"]).unique())
    if result.line_days is not None:
        days |= set(pd.to_datetime(result.line_days["day"]).unique())
    elif not result.lines.empty and "window_start" in result.lines:
        days |= set(_days(result.lines["window_start"]).unique())
    return sorted(pd.Timestamp(d).date() for d in days)


class _Weights:
    """Each day's multiplier as an integer numerator over the common denominator."""

    def __init__(self, conversion: Conversion) -> None:
        values = {pd.Timestamp(d): r.multiplier.value for d, r in conversion.days.items()}
        self.denominator = math.lcm(*(v.denominator for v in values.values())) if values else 1
        self.by_day = {
            d: v.numerator * (self.denominator // v.denominator) for d, v in values.items()
        }

    def exact(self, amounts: pd.Series, days: pd.Series) -> np.ndarray:
        """``amount x multiplier(day) x L`` per row, as Python integers (exact)."""
        weights = days.map(self.by_day)
        if weights.isna().any():  # pragma: no cover - the conversion covers result_days
            raise ValueError(f"no rate for day {days[weights.isna()].iloc[0]}")
        return np.asarray(amounts.astype("int64").tolist(), dtype=object) * np.asarray(
            weights.tolist(), dtype=object
        )


def split_exact(
    exact: np.ndarray,
    groups: np.ndarray,
    targets: dict[int, int],
    labels: pd.Series,
    denominator: int,
) -> np.ndarray:
    """Integer parts of exact values ``exact / denominator`` such that the parts of each
    group add up to ``targets[group]``: floors, then one unit each to the largest remainders
    of the group, ties broken by ``labels`` (ascending). int64 micro-units, in input order."""
    if len(exact) == 0:
        return np.zeros(0, dtype="int64")
    floors = exact // denominator
    frame = pd.DataFrame(
        {
            "group": groups,
            "floor": pd.Series(floors, dtype=object),
            "rest": pd.Series(exact - floors * denominator, dtype=object),
            "label": labels.astype("str").to_numpy(),
        }
    )
    floor_sums = frame.groupby("group", sort=False)["floor"].sum()
    short = {g: int(targets[g]) - int(s) for g, s in floor_sums.items()}
    ordered = frame.sort_values(["group", "rest", "label"], ascending=[True, False, True],
                                kind="mergesort")  # fmt: skip
    rank = ordered.groupby("group", sort=False).cumcount().to_numpy()
    wanted = ordered["group"].map(short).to_numpy()
    if (wanted < 0).any() or (wanted > ordered.groupby("group")["group"].transform("size")).any():
        raise ValueError("a target is not within one unit per part of its exact value")
    bonus = pd.Series((rank < wanted).astype("int64"), index=ordered.index).sort_index()
    return (np.asarray(frame["floor"].tolist(), dtype="int64") + bonus.to_numpy()).astype("int64")


def _line_exact(result: AllocationResult, weights: _Weights) -> np.ndarray:
    """Each of ``result.lines``' rows' exact converted numerator."""
    lines = result.lines
    if lines.empty:
        return np.zeros(0, dtype=object)
    if result.line_days is None and "windows" not in lines:  # window-level lines
        return weights.exact(lines["amount"], _days(lines["window_start"]))
    if result.line_days is None:  # period lines, and one rate for the whole period
        if len(set(weights.by_day.values())) > 1:
            raise ValueError("period lines need their days for more than one rate")
        weight = next(iter(weights.by_day.values()), 0)
        return np.asarray(lines["amount"].astype("int64").tolist(), dtype=object) * weight
    daily = result.line_days
    # Lines x days as one int64 matrix (a day cut by a chunk boundary adds up in it), then
    # one exact dot product per line with the days' integer weights: no Python int per row.
    if "line" in daily:  # the fold's numbering of (rule, client, source, kind, key)
        codes = daily["line"].to_numpy(dtype="int64")
    else:
        codes = daily.groupby(LINE_KEYS, sort=False, observed=True).ngroup().to_numpy()
    day_codes, day_values = pd.factorize(pd.to_datetime(daily["day"]))
    matrix = np.zeros((int(codes.max()) + 1 if len(codes) else 0, len(day_values)), "int64")
    np.add.at(matrix, (codes, day_codes), daily["amount"].to_numpy(dtype="int64"))
    day_weights = np.asarray([weights.by_day[pd.Timestamp(d)] for d in day_values], object)
    exact = matrix.astype(object).dot(day_weights) if len(day_values) else matrix[:, 0]
    # ngroup numbers groups by first appearance: a row starts a group where its code passes
    # every code before it.
    first = np.flatnonzero(np.r_[True, codes[1:] > np.maximum.accumulate(codes)[:-1]])
    keys = daily[LINE_KEYS].iloc[first].astype("str")
    sums = pd.Series(exact, index=pd.MultiIndex.from_frame(keys), dtype=object)
    keyed = lines[LINE_KEYS].assign(key=lines["key"].fillna("")).astype("str")
    found = sums.reindex(pd.MultiIndex.from_frame(keyed))
    if found.isna().any():
        raise ValueError("a period line has no day lines")  # pragma: no cover - fold invariant
    return np.asarray(found.tolist(), dtype=object)


def _window_exact(frame: pd.DataFrame, weights: _Weights) -> np.ndarray:
    if frame.empty:
        return np.zeros(0, dtype=object)
    return weights.exact(frame["amount"], _days(frame["window_start"]))


def _labels(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    """A row's tie-break label: its identifying columns joined (input order never counts)."""
    if frame.empty:
        return pd.Series([], dtype="str")
    parts = [frame[c].astype("str").fillna("") for c in [*columns, "amount"] if c in frame]
    label = parts[0]
    for part in parts[1:]:
        label = label + "\x1f" + part
    return label


def convert_result(result: AllocationResult, conversion: Conversion) -> AllocationResult:
    """``result`` in ``conversion.currency``: every amount column converted exactly and
    rounded top down (module docstring), ``ledger_amount`` beside each, ``fx`` and
    ``ledger`` set. The ledger result is left unchanged."""
    weights = _Weights(conversion)
    den = weights.denominator
    lines = result.lines
    line_x = _line_exact(result, weights)
    unattr_x = _window_exact(result.unattributed, weights)
    resid_x = _window_exact(result.residual, weights)
    excl_x = _window_exact(result.exclusions, weights)
    uncl_x = _window_exact(result.unclassified, weights)

    # The cascade's lines: each client, unattributed, residual remaining, exclusions, unclassified.
    parts: dict[str, int] = {}
    clients = lines["client"].astype("str") if not lines.empty else pd.Series([], dtype="str")
    for client, value in _sum_by(clients, line_x).items():
        parts[f"client\x1f{client}"] = value
    parts["unattributed"] = int(sum(unattr_x.tolist()))
    idle_lines = (
        (lines["kind"] == LineKind.IDLE).to_numpy() if not lines.empty else np.zeros(0, bool)
    )
    idle_given = int(sum(line_x[idle_lines].tolist()))
    classes = result.residual["class"].astype("str") if not result.residual.empty else None
    for cls in RESIDUAL_CLASSES:
        chosen = (classes == str(cls)).to_numpy() if classes is not None else np.zeros(0, bool)
        value = int(sum(resid_x[chosen].tolist()))
        parts[f"residual\x1f{cls}"] = value - (idle_given if cls == CostClass.IDLE else 0)
    exclusion_keys = _labels(result.exclusions, ["name", "reason"])
    for key, value in _sum_by(exclusion_keys, excl_x).items():
        parts[f"excluded\x1f{key}"] = value
    parts["unclassified"] = int(sum(uncl_x.tolist()))

    total = int(div_half_even(sum(parts.values()), den))
    names = list(parts)
    amounts = split_exact(
        np.asarray([parts[n] for n in names], dtype=object),
        np.zeros(len(names), dtype="int64"),
        {0: total},
        pd.Series(names),
        den,
    )
    part_amount = dict(zip(names, amounts.tolist(), strict=True))

    new_lines = lines.copy()
    if not lines.empty:
        codes, uniques = pd.factorize(clients, sort=True)
        targets = {i: part_amount[f"client\x1f{c}"] for i, c in enumerate(uniques)}
        new_lines["amount"] = split_exact(
            line_x,
            codes,
            targets,
            _labels(lines, ["client", "rule_id", "source", "kind", "key"]),
            den,
        )
    new_lines["ledger_amount"] = lines["amount"].astype("int64")
    idle_converted = int(new_lines.loc[idle_lines, "amount"].sum()) if not lines.empty else 0

    def by_group(frame: pd.DataFrame, exact: np.ndarray, keys: pd.Series,
                 target_of: dict[str, int], label_columns: list[str]) -> pd.DataFrame:  # fmt: skip
        out = frame.copy()
        if not frame.empty:
            codes, uniques = pd.factorize(keys, sort=True)
            targets = {i: target_of[k] for i, k in enumerate(uniques)}
            out["amount"] = split_exact(exact, codes, targets, _labels(frame, label_columns), den)
        out["ledger_amount"] = frame["amount"].astype("int64")
        return out

    window = ["window_start", "rule_id"]
    unattributed = by_group(
        result.unattributed, unattr_x, pd.Series(["unattributed"] * len(result.unattributed)),
        {"unattributed": part_amount["unattributed"]}, [*window, "source", "kind", "cause"],
    )  # fmt: skip
    residual_targets = {
        str(cls): part_amount[f"residual\x1f{cls}"]
        + (idle_converted if cls == CostClass.IDLE else 0)
        for cls in RESIDUAL_CLASSES
    }
    residual = by_group(
        result.residual, resid_x,
        classes if classes is not None else pd.Series([], dtype="str"),
        residual_targets, [*window, "class", "name", "namespace", "controller"],
    )  # fmt: skip
    exclusions = by_group(
        result.exclusions, excl_x, exclusion_keys,
        {k: part_amount[f"excluded\x1f{k}"] for k in set(exclusion_keys)},
        [*window, "name", "reason", "namespace", "controller"],
    )  # fmt: skip
    unclassified = by_group(
        result.unclassified, uncl_x, pd.Series(["unclassified"] * len(result.unclassified)),
        {"unclassified": part_amount["unclassified"]},
        [*window, "name", "namespace", "controller", "cluster"],
    )  # fmt: skip
    reference = reference_parts(result, total)
    return replace(
        result,
        currency=conversion.currency,
        reference_total=total,
        cost_total=reference["cost"],
        external_total=reference["external"],
        billed_pool_total=reference["billed"],
        lines=new_lines,
        unattributed=unattributed,
        residual=residual,
        exclusions=exclusions,
        unclassified=unclassified,
        line_days=None,
        fx=conversion.document(),
        ledger=result,
    )


def _sum_by(keys: pd.Series, exact: np.ndarray) -> dict[str, int]:
    if len(keys) == 0:
        return {}
    sums = pd.Series(exact, dtype=object).groupby(keys.to_numpy(), sort=True).sum()
    return {str(k): int(v) for k, v in sums.items()}


def reference_parts(result: AllocationResult, total: int) -> dict[str, int]:
    """The converted reference total shared by its ledger parts (largest remainder)."""
    ledger = {
        "billed": result.billed_pool_total,
        "cost": result.cost_total,
        "external": result.external_total,
    }
    whole = sum(ledger.values())
    if whole == 0:
        return {"billed": 0, "cost": total, "external": 0}
    names = list(ledger)
    exact = np.asarray([ledger[n] * total for n in names], dtype=object)
    amounts = split_exact(exact, np.zeros(3, dtype="int64"), {0: total}, pd.Series(names), whole)
    return dict(zip(names, amounts.tolist(), strict=True))
