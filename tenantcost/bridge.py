"""The month-over-month bridge: how much of a client's change comes from what.

``tenantcost explain`` and the client sheet's change notice answer "why did my figure move
from last month?" with a *bridge*: parts that add up **exactly**, in micro-units, to the
change ``to_amount - from_amount``. Each part is one *effect* on one *source* (a shared
workload, an external cost, a direct workload, distributed idle):

* ``volume``: the client's change in measure of a source's key, valued at the mean of the two
  months' unit costs: ``(q2 - q1) * (c1 + c2) / 2``;
* ``rate``: the change in unit cost, applied to the mean of the two measures:
  ``(c2 - c1) * (q1 + q2) / 2``;
* ``rule``: the effect of a rule or key change between the months (below);
* ``residual``: the change of the client's share of idle (idle and residual policy);
* ``direct``: the change of a direct workload's cost;
* ``new_source`` / ``ended_source``: a source the client has in one month only, whole.

**The unit cost** of a source is the client's amount over its measure, ``c = a / q``. It is
the pool's cost over the pool's measure, hour by hour, averaged over the hours weighted by
the client's own measure: in a month where the pool's hourly unit cost does not vary, it *is*
pool cost / pool measure. Taking the month's pool cost over the month's pool measure instead
would leave a third, unnamed term (a client using more in the expensive hours; hours whose
cost no client's usage met), so ``volume + rate`` would not be the change of the line; with
``c = a / q`` it is, exactly: ``(q2-q1)(c1+c2)/2 + (c2-c1)(q1+q2)/2 = q2 c2 - q1 c1``. It also
needs nothing but the client's own lines, so a sheet's bridge reveals no other client.

**Why this decomposition (Shapley).** Taking effects one after another ("first the volume at
last month's price, then the price") gives a different split for every order, and reversing
the months would not negate it. The symmetric forms above are the Shapley value of the
two-factor product ``q * c`` (each factor's effect averaged over both orders), so the bridge
does not depend on an order of effects. A rule change is the same construction one level up:
with ``A(m, R)`` the client's amount for month ``m``'s inputs under rule ``R``,

    rule   = ((A(1,R2) - A(1,R1)) + (A(2,R2) - A(2,R1))) / 2
    inputs = ((A(2,R1) - A(1,R1)) + (A(2,R2) - A(1,R2))) / 2

and the inputs part is the mean of two bridges (one under each rule), each split into the
effects above. ``R1`` and ``R2`` are the rule versions in force at the end of each month;
``A(1,R2)`` is the earlier month restated under ``R2``, ``A(2,R1)`` the later month under
``R1`` (both through the same core). A month that itself spans a rule change is first
restated wholly under its last version, and the difference (what its earlier version
charged) is ``rule`` too; so every half-bridge compares two figures under one version, and
its volume and rate compare like with like. Should a source's keys still differ between the
two sides of a half-bridge, its whole change there is ``rule``.

**Exact parts.** Every part is first computed as an exact fraction (Python integers: amounts
in micro-units, measures in micro-units of their unit), so they add up to the change exactly.
They are then rounded to micro-units by the largest-remainder rule: each part gets its floor,
and the units left over go one each to the largest remainders, ties broken by the canonical
order of the parts (effect as listed above, then source, then key). The bridge is always
computed in calendar order; a request with the months reversed is its exact negation part by
part (negated after rounding), so rounding never breaks the symmetry.

This module is pure: it reads :class:`~tenantcost.result.AllocationResult` objects made by the
one input path and the core, and never allocates itself (a restatement is asked of the
caller's ``restate`` function). Everything is vectorised over clients, so a report pack
computes the bridge of every client at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.config.rules import RuleSet, RuleVersion
from tenantcost.errors import InternalError
from tenantcost.fx import fraction_text
from tenantcost.key_units import key_label, unit_basis
from tenantcost.kinds import KEYED_KINDS, LineKind
from tenantcost.money import MICROS_PER_UNIT, money_header
from tenantcost.result import AllocationResult
from tenantcost.windows import Period


class Effect(StrEnum):
    """What a part of the bridge is due to (the ``effect`` of ``explain --format json``)."""

    VOLUME = "volume"
    RATE = "rate"
    RULE = "rule"
    RESIDUAL = "residual"
    DIRECT = "direct"
    NEW_SOURCE = "new_source"
    ENDED_SOURCE = "ended_source"
    FX = "fx"
    """Only in a bridge shown in another currency than the ledger's (``explain --currency``):
    what the exchange rate's move adds (:func:`converted_bridge`); never stored."""


EFFECT_ORDER = {effect: position for position, effect in enumerate(Effect)}
"""The canonical order of parts (and the tie-break of the rounding): effects as listed."""

PART_LABELS: dict[Effect, str] = {
    Effect.VOLUME: "usage",
    Effect.RATE: "unit cost",
    Effect.RULE: "rule change",
    Effect.RESIDUAL: "share of idle capacity",
    Effect.DIRECT: "own workload",
    Effect.NEW_SOURCE: "new service",
    Effect.ENDED_SOURCE: "ended service",
    Effect.FX: "exchange rate",
}
"""Each effect in plain words, as people read a bridge (the client page, the sheets): the one
map, so ``new_source`` reads "new service" wherever a part is named. ``explain``'s JSON and
table keep the codes (a contract)."""


def part_label(effect: str) -> str:
    """The plain label of an effect code (an unknown code reads as itself, spaced)."""
    try:
        return PART_LABELS[Effect(effect)]
    except ValueError:
        return effect.replace("_", " ")


PART_COLUMNS = ["client", "effect", "source", "key", "amount", "text"]
HALF = Fraction(1, 2)
_to_fraction = np.frompyfunc(Fraction, 2, 1)
_to_int = np.frompyfunc(int, 1, 1)
_to_float = np.frompyfunc(float, 1, 1)
_exactly = np.frompyfunc(Fraction, 1, 1)


@dataclass(frozen=True)
class MonthFigures:
    """One month's allocation as the bridge reads it: the client lines summed per source."""

    label: str
    """``YYYY-MM``."""
    period: Period
    rules: tuple[str, ...]
    """The ids of the rule versions in force, in date order."""
    hours: float
    """Hours covered by cost data."""
    lines: pd.DataFrame
    """``client, kind, source, key, amount`` (int micro-units), ``q`` (the measure in
    micro-units of its unit, a Python int; 0 for direct lines)."""


def month_figures(result: AllocationResult, label: str) -> MonthFigures:
    """The figures of one month's :class:`AllocationResult` (lines at any detail)."""
    lines = result.lines
    grouped = (
        lines.groupby(["client", "kind", "source", "key"], sort=True, observed=True)
        .agg(amount=("amount", "sum"), measure=("measure", "sum"))
        .reset_index()
    )
    micros = np.rint(grouped["measure"].fillna(0.0).to_numpy(dtype="float64") * MICROS_PER_UNIT)
    frame = pd.DataFrame(
        {
            "client": grouped["client"].astype(str),
            "kind": grouped["kind"].astype(str),
            "source": grouped["source"].astype(str),
            "key": grouped["key"].astype(str),
            "amount": grouped["amount"].astype("int64"),
            "q": pd.Series(_to_int(micros), dtype=object) if len(micros) else [],
        }
    )
    return MonthFigures(
        label=label,
        period=result.period,
        rules=tuple(r.id for r in result.rules),
        hours=float(result.hours),
        lines=frame,
    )


def only_version(ruleset: RuleSet, version: RuleVersion, start: pd.Timestamp) -> RuleSet:
    """The rule set reduced to ``version``, in force from ``start`` at the latest."""
    effective = min(version.effective_from, start.to_pydatetime())
    return ruleset.model_copy(
        update={"rules": [version.model_copy(update={"effective_from": effective})]}
    )


Restate = Callable[[RuleSet, Period], AllocationResult]
"""Allocate a period under a rule set through the caller's input path and core."""


@dataclass(frozen=True)
class Comparison:
    """Two months in calendar order and, when their rules differ, their restatements.

    With ``R1``/``R2`` the rule version in force at the end of the early/late month:
    ``early_single``/``late_single`` are the months wholly under ``R1``/``R2`` (``None``: the
    month had that one version only, so it is its actual figure); ``early_cross`` is the
    early month under ``R2`` and ``late_cross`` the late month under ``R1`` (``None`` when
    ``R1 == R2``).
    """

    early: MonthFigures
    late: MonthFigures
    early_single: MonthFigures | None = None
    late_single: MonthFigures | None = None
    early_cross: MonthFigures | None = None
    late_cross: MonthFigures | None = None

    @property
    def rule_changed(self) -> bool:
        return self.early.rules != self.late.rules


def compare_months(
    early: AllocationResult,
    late: AllocationResult,
    labels: tuple[str, str],
    ruleset: RuleSet,
    restate: Restate,
) -> Comparison:
    """The comparison of two months' results (``early`` first), with the restatements
    through ``restate`` that a rule change needs. A month with no rule (no cost data) is
    never restated."""
    one, two = month_figures(early, labels[0]), month_figures(late, labels[1])
    if one.rules == two.rules or not one.rules or not two.rules:
        return Comparison(one, two)
    by_id = {r.id: r for r in ruleset.rules}
    r1, r2 = by_id[one.rules[-1]], by_id[two.rules[-1]]

    def under(month: MonthFigures, version: RuleVersion) -> MonthFigures:
        rules = only_version(ruleset, version, month.period.start)
        return month_figures(restate(rules, month.period), month.label)

    early_single = under(one, r1) if len(one.rules) > 1 else None
    late_single = under(two, r2) if len(two.rules) > 1 else None
    if r1.id == r2.id:
        return Comparison(one, two, early_single, late_single)
    return Comparison(one, two, early_single, late_single, under(one, r2), under(two, r1))


# --------------------------------------------------------------------------- exact parts


def _side_counts(merged: pd.DataFrame) -> pd.DataFrame:
    """Per row: how many keys its (client, kind, source) has on each side and on both."""
    group = merged.groupby(["client", "kind", "source"], sort=False)
    return pd.DataFrame(
        {
            "n_early": group["has_early"].transform("sum"),
            "n_late": group["has_late"].transform("sum"),
            "n_both": group["both"].transform("sum"),
        }
    )


def _merge(early: pd.DataFrame, late: pd.DataFrame) -> pd.DataFrame:
    keys = ["client", "kind", "source", "key"]
    merged = early.merge(late, on=keys, how="outer", suffixes=("_e", "_l"), sort=True)
    merged["has_early"] = merged["amount_e"].notna()
    merged["has_late"] = merged["amount_l"].notna()
    merged["both"] = merged["has_early"] & merged["has_late"]
    for side in ("e", "l"):
        merged[f"amount_{side}"] = merged[f"amount_{side}"].fillna(0).astype("int64")
        merged[f"q_{side}"] = merged[f"q_{side}"].where(merged[f"q_{side}"].notna(), 0)
    return pd.concat([merged, _side_counts(merged)], axis=1)


def _effects(merged: pd.DataFrame) -> pd.Series:
    """The effect of each merged row (volume rows also yield a rate part)."""
    keyed = merged["kind"].isin([str(k) for k in KEYED_KINDS])
    same_keys = (merged["n_both"] == merged["n_early"]) & (merged["n_both"] == merged["n_late"])
    conditions = [
        merged["n_late"] == 0,
        merged["n_early"] == 0,
        ~same_keys,
        keyed,
        merged["kind"] == LineKind.DIRECT,
    ]
    choices = [Effect.ENDED_SOURCE, Effect.NEW_SOURCE, Effect.RULE, Effect.VOLUME, Effect.DIRECT]
    return pd.Series(
        np.select(conditions, [str(c) for c in choices], default=str(Effect.RESIDUAL)),
        index=merged.index,
    )


def half_bridge(early: pd.DataFrame, late: pd.DataFrame, weight: Fraction) -> pd.DataFrame:
    """The parts of one bridge between two line tables under one rule, times ``weight``:
    ``client, effect, kind, source, key, x`` (an exact :class:`Fraction`) and the measures
    ``q_e, q_l`` the texts quote."""
    merged = _merge(early, late)
    if merged.empty:
        columns = ["client", "effect", "kind", "source", "key", "x", "q_e", "q_l"]
        return pd.DataFrame(columns=columns)
    merged["effect"] = _effects(merged)
    a_e = merged["amount_e"].to_numpy().astype(object)
    a_l = merged["amount_l"].to_numpy().astype(object)
    q_e = merged["q_e"].to_numpy().astype(object)
    q_l = merged["q_l"].to_numpy().astype(object)
    change = a_l - a_e
    volume = (merged["effect"] == Effect.VOLUME).to_numpy()
    measured = volume & (merged["q_e"] != 0).to_numpy() & (merged["q_l"] != 0).to_numpy()
    # volume = (q_l - q_e) * (a_e/q_e + a_l/q_l) / 2, as one exact fraction
    num = np.where(measured, (q_l - q_e) * (a_e * q_l + a_l * q_e), change)
    den = np.where(measured, 2 * q_e * q_l, 1)
    x = _to_fraction(num, den) * weight
    rate = merged.loc[volume].copy()
    rate["effect"] = str(Effect.RATE)
    rate_x = (_to_fraction(change[volume], 1) * weight) - x[volume]
    columns = ["client", "effect", "kind", "source", "key", "q_e", "q_l"]
    parts = pd.concat(
        [merged[columns].assign(x=x), rate[columns].assign(x=rate_x)], ignore_index=True
    )
    ruled = parts["effect"] == Effect.RULE
    parts.loc[ruled, "key"] = ""  # a rule part is the source's, over whatever keys it had
    return parts


def exact_parts(comparison: Comparison) -> pd.DataFrame:
    """All clients' exact parts, summed per ``client, effect, source, key`` (``x``): the
    rule part of a rule change and the bridge of the inputs (see the module text)."""
    c = comparison
    single_1 = c.early_single or c.early
    single_2 = c.late_single or c.late
    if not c.rule_changed:
        raw = half_bridge(c.early.lines, c.late.lines, Fraction(1))
    else:
        # the part of each month charged under another version than its last one
        rule_terms = [(c.late, 2), (single_2, -2), (single_1, 2), (c.early, -2)]
        halves = [half_bridge(single_1.lines, single_2.lines, Fraction(1))]
        if c.early_cross is not None and c.late_cross is not None:
            rule_terms += [(c.early_cross, 1), (single_1, -1), (single_2, 1), (c.late_cross, -1)]
            halves = [
                half_bridge(single_1.lines, c.late_cross.lines, HALF),
                half_bridge(c.early_cross.lines, single_2.lines, HALF),
            ]
        raw = pd.concat([_rule_parts(rule_terms), *halves], ignore_index=True)
    if raw.empty:
        return raw.assign(kind="")
    grouped = raw.groupby(["client", "effect", "source", "key"], sort=False)
    summed = grouped.agg(
        x=("x", "sum"), kind=("kind", "first"), q_e=("q_e", "first"), q_l=("q_l", "first")
    )
    return summed.reset_index()


def _rule_parts(terms: list[tuple[MonthFigures, int]]) -> pd.DataFrame:
    """The sum of ``weight / 2 * amount`` over ``terms`` per client and source (the rule
    effect); sources where it is exactly zero are left out."""
    frames = [
        f.lines.assign(signed=f.lines["amount"].astype("int64") * weight) for f, weight in terms
    ]
    both = pd.concat(frames, ignore_index=True)
    sums = both.groupby(["client", "source"], sort=False).agg(
        signed=("signed", "sum"), kind=("kind", "first")
    )
    sums = sums.loc[sums["signed"] != 0].reset_index()
    return pd.DataFrame(
        {
            "client": sums["client"],
            "effect": str(Effect.RULE),
            "kind": sums["kind"],
            "source": sums["source"],
            "key": "",
            "q_e": 0,
            "q_l": 0,
            "x": _to_fraction(sums["signed"].to_numpy().astype(object), 2),
        }
    )


# --------------------------------------------------------------------------- rounding


def round_parts(parts: pd.DataFrame, changes: pd.Series) -> pd.DataFrame:
    """Round every client's exact parts to micro-units that add up to its change exactly.

    Largest remainder: each part gets ``floor(x)``; a client's units left over go one each to
    its parts with the largest fractional remainder, ties in canonical order. ``changes`` is
    each client's exact change (int micro-units), indexed by client.
    """
    ordered = canonical_order(parts)
    x = ordered["x"].to_numpy()
    floors = np.asarray(x // 1, dtype=object)
    ordered["floor"] = floors
    frac = x - floors
    # Sorting Fractions is slow (Python comparisons); two doubles, the remainder's nearest
    # double and what is left of it, order any two remainders that differ by more than
    # 2**-100 of themselves exactly as the fractions do, and equal remainders as equal.
    high = _to_float(frac).astype("float64")
    ordered["frac"] = high
    ordered["frac_low"] = _to_float(frac - _exactly(high)).astype("float64")
    ordered["position"] = np.arange(len(ordered))
    allotted = ordered.groupby("client", sort=False)["floor"].transform("sum")
    left = ordered["client"].map(changes).to_numpy(dtype=object) - allotted.to_numpy()
    sizes = ordered.groupby("client", sort=False)["x"].transform("size").to_numpy()
    if len(ordered) and ((left < 0).any() or (left > sizes).any()):
        raise InternalError("the bridge's exact parts do not add up to the change")
    ranked = ordered.sort_values(
        ["client", "frac", "frac_low", "position"],
        ascending=[True, False, False, True],
        kind="mergesort",
    )
    rank = ranked.groupby("client", sort=False).cumcount().to_numpy()
    bonus = pd.Series(rank < left[ranked["position"].to_numpy()], index=ranked.index)
    amounts = ordered["floor"] + bonus.reindex(ordered.index).astype(int)
    ordered["amount"] = _integers(amounts)
    return ordered.drop(columns=["floor", "frac", "frac_low", "position"])


INT64_MAX = 2**63 - 1


def _integers(values: pd.Series) -> pd.Series:
    """``int64`` when every value fits, else Python integers: the parts add up to a change
    within ``int64``, but one part may not (an extreme change of unit cost makes volume and
    rate two huge amounts of opposite sign), and no part may wrap."""
    fits = bool((values.astype(object).abs() <= INT64_MAX).all())
    return values.astype("int64") if fits else values.astype(object)


def canonical_order(parts: pd.DataFrame) -> pd.DataFrame:
    """Parts sorted by client, effect (as listed in :class:`Effect`), source, key."""
    rank = parts["effect"].map({str(e): i for e, i in EFFECT_ORDER.items()})
    return (
        parts.assign(_rank=rank)
        .sort_values(["client", "_rank", "source", "key"], kind="mergesort")
        .drop(columns="_rank")
        .reset_index(drop=True)
    )


def totals(figures: MonthFigures) -> pd.Series:
    """Each client's total (int micro-units), indexed by client."""
    return figures.lines.groupby("client", sort=True)["amount"].sum().astype("int64")


@dataclass(frozen=True)
class Bridges:
    """Every client's bridge between two months, in calendar order (rounded parts)."""

    comparison: Comparison
    amounts: pd.DataFrame
    """Per client: ``early, late, change`` (int micro-units), indexed by client."""
    parts: pd.DataFrame
    """``client, effect, kind, source, key, amount, q_e, q_l``, in canonical order."""


def bridges(comparison: Comparison, clients: list[str] | None = None) -> Bridges:
    """The rounded bridge of every client (or only ``clients``) between the two months."""
    amounts = pd.concat(
        {"early": totals(comparison.early), "late": totals(comparison.late)}, axis=1
    ).fillna(0)
    amounts = amounts.astype("int64")
    if clients is not None:
        amounts = amounts.loc[amounts.index.isin(clients)]
    amounts["change"] = amounts["late"] - amounts["early"]
    parts = exact_parts(comparison)
    if clients is not None and not parts.empty:
        parts = parts.loc[parts["client"].isin(clients)]
    if parts.empty:
        empty = pd.DataFrame(columns=["client", "effect", "kind", "source", "key", "amount"])
        return Bridges(comparison, amounts, empty.assign(q_e=[], q_l=[]))
    # a client only in a restatement has no amount in either month: its parts sum to 0
    extra = pd.Index(parts["client"].unique()).difference(amounts.index)
    if len(extra):
        amounts = pd.concat(
            [amounts, pd.DataFrame(0, index=extra, columns=amounts.columns, dtype="int64")]
        ).sort_index()
    rounded = round_parts(parts, amounts["change"])
    return Bridges(comparison, amounts, rounded.drop(columns="x"))


# --------------------------------------------------------------------------- texts


def signed_amounts(micros: pd.Series, currency: str) -> pd.Series:
    """``+0.031 USD``: exact, with at least two decimals, trailing zeros dropped."""
    values = micros.astype(object)  # Python integers: any size (see _integers)
    negative = (values < 0).to_numpy(dtype=bool)
    absolute = values.abs()
    whole = (absolute // MICROS_PER_UNIT).astype(str)
    frac = (absolute % MICROS_PER_UNIT).astype(str).str.zfill(6)
    exact = pd.Series(np.where(negative, "-", ""), index=micros.index) + whole + "." + frac
    trimmed = exact.str.replace(r"(\.\d\d\d*?)0+$", r"\1", regex=True)
    sign = np.where((values > 0).to_numpy(dtype=bool), "+", "")
    return sign + trimmed + f" {currency}"


def _percent(ratio: pd.Series) -> pd.Series:
    """``18 %`` (whole percent from 10 % on, one decimal below), of the absolute ratio."""
    pct = (ratio.astype("float64").abs() * 100).to_numpy()
    whole = np.round(pct).astype("int64").astype(str)
    tenth = np.char.mod("%.1f", np.round(pct, 1))
    return pd.Series(np.where(pct >= 9.95, whole, tenth), index=ratio.index) + " %"


def _basis(keys: pd.Series) -> pd.Series:
    """How a unit cost is quoted for each key (the sheet's unit basis)."""
    labels = {k: (unit_basis(k) or (f"per unit of {key_label(k)}", 1.0))[0] for k in keys.unique()}
    return keys.map(labels)


def _measure_words(keys: pd.Series, sources: pd.Series) -> pd.Series:
    labels = {k: key_label(k) for k in keys.unique()}
    words = "your " + sources + " " + keys.map(labels)
    counted = keys.isin(["even"]) | keys.str.startswith("weights")
    return words.where(~counted, "your active hours on " + sources)


def _rule_words(parts: pd.DataFrame, rule_text: str) -> pd.Series:
    return rule_text + ": " + parts["source"] + " is charged differently"


def part_texts(
    parts: pd.DataFrame, labels: tuple[str, str], rule_text: str, reverse: bool
) -> pd.Series:
    """The plain reason of each part, read from ``labels[0]`` (from) to ``labels[1]`` (to).

    ``parts`` are oriented already (amounts negated when ``reverse``); ``q_e, q_l`` are the
    calendar-order measures, so the ``from`` measure is ``q_l`` when reversed."""
    q_from = parts["q_l" if reverse else "q_e"].astype("float64")
    q_to = parts["q_e" if reverse else "q_l"].astype("float64")
    amount = parts["amount"].to_numpy()
    still = "did not change"
    moved = np.where(q_to > q_from, "rose ", np.where(q_to < q_from, "fell ", ""))
    ratio = ((q_to - q_from) / q_from.where(q_from != 0)).fillna(0)
    pct = pd.Series(np.where(q_to == q_from, still, moved + _percent(ratio)), index=parts.index)
    direction = pd.Series(
        np.where(amount > 0, "rose", np.where(amount < 0, "fell", still)), index=parts.index
    )
    more = pd.Series(
        np.where(amount > 0, "cost more", np.where(amount < 0, "cost less", "cost the same")),
        index=parts.index,
    )
    source, key = parts["source"], parts["key"]
    early, late = (labels[1], labels[0]) if reverse else labels
    started = f" in {early} (started in {late})" if reverse else f" in {late}"
    stopped = f" in {early} (stopped in {late})" if reverse else f" in {late}"
    start_verb = "you did not use " if reverse else "you started using "
    stop_verb = "you still used " if reverse else "you no longer used "
    texts = {
        Effect.VOLUME: _measure_words(key, source) + " " + pct,
        Effect.RATE: "the " + source + "'s cost " + _basis(key) + " " + direction,
        Effect.RULE: _rule_words(parts, rule_text),
        Effect.RESIDUAL: "your share of idle capacity (" + key + ") " + direction,
        Effect.DIRECT: "your own workload " + source + " " + more,
        Effect.NEW_SOURCE: start_verb + source + started,
        Effect.ENDED_SOURCE: stop_verb + source + stopped,
    }
    out = pd.Series("", index=parts.index, dtype=object)
    for effect, text in texts.items():
        chosen = parts["effect"] == effect
        out[chosen] = text[chosen]
    return out


def rule_text(comparison: Comparison, reverse: bool) -> str:
    """``the rule changed from X to Y`` (read from the ``from`` month to the ``to`` month)."""
    ids = [", ".join(comparison.early.rules), ", ".join(comparison.late.rules)]
    if reverse:
        ids.reverse()
    return f"the rule changed from {ids[0]} to {ids[1]}"


def oriented(b: Bridges, to_early: bool, currency: str) -> pd.DataFrame:
    """Every client's parts read towards the early month (``to_early``: negated, part by part)
    or towards the late one, with their ``text``: ``client, effect, source, key, amount,
    text``."""
    parts = b.parts.copy()
    if to_early:
        parts["amount"] = -parts["amount"]
    c = b.comparison
    labels = (c.late.label, c.early.label) if to_early else (c.early.label, c.late.label)
    reasons = part_texts(parts, labels, rule_text(c, to_early), to_early)
    parts["reason"] = reasons
    parts["text"] = signed_amounts(parts["amount"], currency) + ": " + reasons
    return parts[["client", "effect", "source", "key", "amount", "reason", "text"]]


# --------------------------------------------------------------------------- projection


@dataclass(frozen=True)
class Projection:
    """A month in progress, projected to its end at the run rate of the hours covered."""

    month: str
    as_of: pd.Timestamp
    hours_covered: float
    hours_in_month: float
    amount_to_date: int
    projected_amount: int

    @property
    def method(self) -> str:
        return (
            f"run rate: the amount to date over the {self.hours_covered:g} hours covered by "
            f"cost data, times the {self.hours_in_month:g} hours of the month"
        )

    def document(self) -> dict[str, Any]:
        from tenantcost.timefmt import iso_z

        return {
            "month": self.month,
            "as_of": iso_z(self.as_of),
            "hours_covered": self.hours_covered,
            "hours_in_month": self.hours_in_month,
            "amount_to_date": self.amount_to_date,
            "projected_amount": self.projected_amount,
            "method": self.method,
            "label": "projection",
        }


def projection(figures: MonthFigures, amount: int, as_of: datetime) -> Projection | None:
    """The projection of a month still in progress at ``as_of`` (``None`` otherwise, or when
    no hour is covered yet). Rounded half to even to the micro-unit."""
    at = pd.Timestamp(as_of)
    at = at.tz_localize("UTC") if at.tzinfo is None else at.tz_convert("UTC")
    start, end = figures.period.start, figures.period.end
    if not (start <= at < end) or figures.hours <= 0:
        return None
    month_hours = (end - start) / pd.Timedelta(hours=1)
    projected = round(Fraction(int(amount)) * Fraction(month_hours) / Fraction(figures.hours))
    return Projection(figures.label, at, figures.hours, month_hours, int(amount), projected)


# --------------------------------------------------------------------------- one client


@dataclass(frozen=True)
class ClientBridge:
    """One client's bridge from the ``vs`` month to ``month`` (the ``explain`` document)."""

    client: str
    month: str
    vs: str
    currency: str
    from_amount: int
    to_amount: int
    parts: pd.DataFrame
    """``effect, source, key, amount, reason, text`` in canonical order."""
    rules: tuple[tuple[str, ...], tuple[str, ...]]
    """The rule ids in force in ``vs`` and in ``month``."""
    projections: list[Projection]
    ledger: ClientBridge | None = None
    """A bridge shown in another currency: the ledger's bridge it was converted from."""
    fx: dict[str, Any] | None = None
    """A bridge shown in another currency: the ledger and presented currencies, the
    effective rates of both months and each month's rates (``allocate``'s ``fx``)."""

    @property
    def change(self) -> int:
        return self.to_amount - self.from_amount

    def document(self) -> dict[str, Any]:
        """The JSON document: amounts in the minor unit of ``allocate --format json``."""
        parts = [
            {"effect": str(e), "source": str(s), "amount": int(a), "text": str(t)}
            for e, s, a, t in zip(
                self.parts["effect"].tolist(),
                self.parts["source"].tolist(),
                self.parts["amount"].tolist(),
                self.parts["text"].tolist(),
                strict=True,
            )
        ]
        if self.ledger is not None:
            ledger_parts = dict(
                zip(
                    zip(self.ledger.parts["effect"], self.ledger.parts["source"], strict=True),
                    self.ledger.parts["amount"].tolist(),
                    strict=True,
                )
            )
            for part in parts:
                part["ledger_amount"] = int(ledger_parts.get((part["effect"], part["source"]), 0))
        return {
            "money": money_header(self.currency),
            **({"fx": self.fx} if self.fx is not None else {}),
            **(
                {
                    "ledger": {
                        "from_amount": self.ledger.from_amount,
                        "to_amount": self.ledger.to_amount,
                        "change": self.ledger.change,
                    }
                }
                if self.ledger is not None
                else {}
            ),
            "client": self.client,
            "month": self.month,
            "vs": self.vs,
            "from_amount": self.from_amount,
            "to_amount": self.to_amount,
            "change": self.change,
            "parts": parts,
            "rules": {"vs": list(self.rules[0]), "month": list(self.rules[1])},
            "projections": [p.document() for p in self.projections],
        }


def client_bridge(
    b: Bridges, client: str, month: str, currency: str, as_of: datetime | None = None
) -> ClientBridge:
    """``client``'s bridge towards ``month`` (one of the two months of ``b``): read from the
    other month, negated part by part when ``month`` is the earlier one."""
    c = b.comparison
    to_early = month == c.early.label and month != c.late.label
    parts = oriented(b, to_early, currency)
    parts = parts.loc[parts["client"] == client].drop(columns="client").reset_index(drop=True)
    row = b.amounts.loc[client] if client in b.amounts.index else None
    early = int(row["early"]) if row is not None else 0
    late = int(row["late"]) if row is not None else 0
    months = [(c.early, early), (c.late, late)]
    projections = [] if as_of is None else [projection(f, a, as_of) for f, a in months]
    from_to = ((c.late, late), (c.early, early)) if to_early else ((c.early, early), (c.late, late))
    return ClientBridge(
        client=client,
        month=from_to[1][0].label,
        vs=from_to[0][0].label,
        currency=currency,
        from_amount=from_to[0][1],
        to_amount=from_to[1][1],
        parts=parts,
        rules=(from_to[0][0].rules, from_to[1][0].rules),
        projections=[p for p in projections if p is not None],
    )


def converted_bridge(
    ledger: ClientBridge,
    amounts: tuple[int, int],
    currency: str,
    fx: dict[str, Any],
) -> ClientBridge:
    """``ledger``'s bridge shown in ``currency``, with an ``fx`` part (issue 37).

    ``amounts`` are the client's converted amounts in the ``vs`` month and in ``month``.
    Every ledger part is converted at the ``vs`` month's *effective* rate (its converted
    amount / its ledger amount; the later month's when the client had no ledger amount
    before), exactly, and the parts are rounded together by largest remainder
    (:func:`tenantcost.convert.split_exact`) to the later month's ledger amount at that rate
    minus the earlier converted amount. ``fx`` is the rest: what the later month's rates
    made of its ledger amount beyond the earlier rate. So the parts add up exactly to the
    change in ``currency``, and a change of rate alone is one ``fx`` part."""
    from tenantcost.convert import split_exact

    before, after = amounts
    if ledger.from_amount:
        rate = Fraction(before, ledger.from_amount)
    elif ledger.to_amount:
        rate = Fraction(after, ledger.to_amount)
    else:
        rate = Fraction(1)
    now = Fraction(after, ledger.to_amount) if ledger.to_amount else rate
    parts = ledger.parts.copy()
    at_rate = round(ledger.to_amount * rate) - before  # Fraction: half to even
    exact = np.asarray([int(a) * rate.numerator for a in parts["amount"].tolist()], dtype=object)
    labels = parts["effect"].astype("str") + "\x1f" + parts["source"].astype("str")
    parts["amount"] = (
        split_exact(
            exact, np.zeros(len(parts), dtype="int64"), {0: at_rate}, labels, rate.denominator
        )
        if len(parts)
        else parts["amount"]
    )
    fx_amount = (after - before) - int(parts["amount"].sum())
    ledger_code, shown = fx["ledger_currency"], currency
    text = (
        f"the exchange rate moved: 1 {ledger_code} was {float(rate):.6f} {shown} in "
        f"{ledger.vs} and {float(now):.6f} {shown} in {ledger.month} (effective rates)"
    )
    fx_row = pd.DataFrame(
        [{"effect": str(Effect.FX), "source": "", "key": "", "amount": fx_amount,
          "reason": text, "text": text}]
    )  # fmt: skip
    parts = pd.concat([parts, fx_row[parts.columns]], ignore_index=True)
    effective = {"vs": fraction_text(rate), "month": fraction_text(now)}
    return replace(
        ledger,
        currency=currency,
        from_amount=before,
        to_amount=after,
        parts=parts,
        projections=[],
        ledger=ledger,
        fx={**fx, "effective_rates": effective},
    )
