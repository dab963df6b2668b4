"""Change notices: when a client's figure moved because the rule moved, say so, with figures.

DOMAIN.md: when the rule changes, history keeps the old figures and the report says that the
denominator changed, otherwise a client's cost seems to fall when only the rule moved. Two
cases are detected:

* the period spans two rule versions: the figure is a mix; we show the part charged under each
  version and the whole period under each version alone, so the two can be compared;
* the previous period (its data is in the inputs) was allocated under another rule: we show
  last period as issued, last period restated under this period's rule, and this period.

All re-runs use the same inputs and core; a re-run that cannot be done (for example the old
rule does not classify a workload that appeared later) is reported with its reason, not hidden.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pandas as pd

from tenantcost.allocate import AllocationResult, allocate_stream
from tenantcost.config.rules import RuleSet, RuleVersion
from tenantcost.errors import InputError, InputWarning
from tenantcost.inputs import Inputs
from tenantcost.reconcile import cascade, require_closed
from tenantcost.report.display import period_label
from tenantcost.windows import Period


@dataclass(frozen=True)
class Column:
    """Per-client amounts of one re-run (or why it could not be done)."""

    label: str
    amounts: pd.Series | None
    reason: str = ""


@dataclass(frozen=True)
class RuleChange:
    """One change of rule that concerns the report's period."""

    kind: str
    """``within`` (the period spans versions) or ``previous`` (last period had another rule)."""
    title: str
    text: str
    columns: list[Column] = field(default_factory=list)


def quiet_allocate(
    inputs: Inputs, ruleset: RuleSet, period: Period, key: str | None = None
) -> AllocationResult:
    """A re-run (another key, rule version or period) through the same usage source and
    chunked core as the main run, on the usage of ``period`` only; its warnings were already
    shown by the main run. A re-run whose cascade does not close is an internal error."""
    usage = inputs.usage.within(period) if inputs.usage is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        result = allocate_stream(
            inputs.costs,
            usage,
            ruleset,
            key=key,
            period=period,
            detail="period",
            con=inputs.con,
        )
    require_closed(cascade(result))
    return result


def only_version(ruleset: RuleSet, version: RuleVersion, start: pd.Timestamp) -> RuleSet:
    """The rule set reduced to ``version``, in force from ``start`` at the latest."""
    effective = min(version.effective_from, start.to_pydatetime())
    return ruleset.model_copy(
        update={"rules": [version.model_copy(update={"effective_from": effective})]}
    )


def _totals(result: AllocationResult) -> pd.Series:
    return result.client_totals().set_index("client")["amount"].astype("int64")


def _column(label: str, inputs: Inputs, ruleset: RuleSet, period: Period) -> Column:
    try:
        return Column(label, _totals(quiet_allocate(inputs, ruleset, period)))
    except InputError as exc:
        return Column(label, None, exc.one_line())


def previous_period(period: Period) -> Period:
    """The calendar month before a month; otherwise the same length just before."""
    start = period.start
    if (
        start == start.normalize()
        and start.day == 1
        and period.end == start + pd.offsets.MonthBegin(1)
    ):
        return Period(start - pd.offsets.MonthBegin(1), start)
    return Period(start - (period.end - start), start)


def within_period(base: AllocationResult, inputs: Inputs, ruleset: RuleSet) -> list[RuleChange]:
    """A notice per rule change inside the period (the period spans several versions)."""
    if len(base.rules) < 2:
        return []
    parts = base.lines.groupby(["rule_id", "client"], sort=True, observed=True)["amount"].sum()
    changes = []
    for old, new in zip(base.rules, base.rules[1:], strict=False):
        columns = [
            Column(
                f"Charged under {old.id} (until {new.effective_from.date()})",
                parts.get(old.id, pd.Series(dtype="int64")).astype("int64"),
            ),
            Column(
                f"Charged under {new.id} (from {new.effective_from.date()})",
                parts.get(new.id, pd.Series(dtype="int64")).astype("int64"),
            ),
            _column(
                f"Whole period under {old.id}",
                inputs,
                only_version(ruleset, old, base.period.start),
                base.period,
            ),
            _column(
                f"Whole period under {new.id}",
                inputs,
                only_version(ruleset, new, base.period.start),
                base.period,
            ),
        ]
        changes.append(
            RuleChange(
                kind="within",
                title=f"The rule changed on {new.effective_from.date()}: the denominator changed",
                text=(
                    f"This period spans two rule versions: {old.id} until "
                    f"{new.effective_from.date()}, then {new.id}. The same usage is divided "
                    "differently from that date, so part of any change in this figure comes "
                    "from the rule, not from usage. Below: what was charged under each version, "
                    "and the whole period under each version alone."
                ),
                columns=columns,
            )
        )
    return changes


def against_previous(base: AllocationResult, inputs: Inputs, ruleset: RuleSet) -> list[RuleChange]:
    """A notice when the previous period's data is present and was under another rule."""
    prev = previous_period(base.period)
    costs = inputs.costs
    inside = (costs["window_start"] >= prev.start) & (costs["window_end"] <= prev.end)
    if not inside.any():
        return []
    try:
        earlier = quiet_allocate(inputs, ruleset, prev)
    except InputError:
        return []  # the previous period cannot be allocated at all: nothing to compare
    old_ids = [r.id for r in earlier.rules]
    new_ids = [r.id for r in base.rules]
    if old_ids == new_ids:
        return []
    current = base.rules[-1]
    prev_label = period_label(prev.start, prev.end)
    this_label = period_label(base.period.start, base.period.end)
    return [
        RuleChange(
            kind="previous",
            title="Another rule than last period: the denominator changed",
            text=(
                f"Last period ({prev_label}) was allocated under {', '.join(old_ids)}; this "
                f"period ({this_label}) under {', '.join(new_ids)}. Comparing the two figures "
                "directly mixes a change of usage with a change of rule; last period restated "
                f"under {current.id} compares like with like."
            ),
            columns=[
                Column(f"{prev_label} as issued ({', '.join(old_ids)})", _totals(earlier)),
                _column(
                    f"{prev_label} restated under {current.id}",
                    inputs,
                    only_version(ruleset, current, prev.start),
                    prev,
                ),
                Column(f"{this_label} ({', '.join(new_ids)})", _totals(base)),
            ],
        )
    ]
