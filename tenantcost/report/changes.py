"""Change notices: when a client's figure moved because the rule moved, say so, with figures.

When the rule changes, history keeps the old figures and the report says that the
denominator changed (docs/report.md, "A client's sheet"), otherwise a client's cost seems to
fall when only the rule moved. Two
cases are detected:

* the period spans two rule versions: the figure is a mix; we show the part charged under each
  version and the whole period under each version alone, so the two can be compared;
* the previous period (its data is in the inputs) was allocated under another rule: we show
  last period as issued, last period restated under this period's rule, and this period.

All re-runs use the same inputs and core; a re-run that cannot be done (for example the old
rule does not classify a workload that appeared later) is reported with its reason, not hidden.

When the previous period's data is in the inputs, every client present in both periods also
gets the **bridge** from last period's amount to this one (:mod:`tenantcost.bridge`, the
figures of ``tenantcost explain``): one short table of causes in plain sentences that add up
to the change. The previous period is allocated once per pack, and the bridge of every client
is computed at once from the two allocations (:class:`PackBridges`), so a pack stays linear in
clients.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tenantcost.allocate import AllocationResult, allocate_keys
from tenantcost.bridge import (
    Comparison,
    Restate,
    bridges,
    compare_months,
    month_figures,
    only_version,
    oriented,
    part_label,
)
from tenantcost.config.rules import RuleSet
from tenantcost.engine import Engine
from tenantcost.errors import InputError, InputWarning
from tenantcost.inputs import Inputs
from tenantcost.money import MINOR_UNIT_EXPONENT, round_for_display
from tenantcost.presentation import needs_days, present
from tenantcost.reconcile import cascade, require_closed
from tenantcost.report.display import format_units, period_label
from tenantcost.windows import Period

__all__ = [
    "Column",
    "PackBridges",
    "RuleChange",
    "ShownBridge",
    "against_previous",
    "bridge_notice",
    "bridges_between",
    "client_spans",
    "effect_labels",
    "only_version",
    "pack_bridges",
    "previous_allocation",
    "previous_period",
    "quiet_allocate",
    "shown_bridge",
    "within_period",
]


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
    inputs: Inputs,
    ruleset: RuleSet,
    period: Period,
    key: str | None = None,
    engine: Engine | None = None,
    like: AllocationResult | None = None,
) -> AllocationResult:
    """A re-run (another key, rule version or period) through the same usage source and
    chunked core (and ``engine``) as the main run, on the usage of ``period`` only; its
    warnings were already shown by the main run. A re-run whose cascade does not close is an
    internal error. ``like``: the pack's main run; a re-run is shown in its currency, each
    period at its own rates (a converted pack compares periods and rules in the currency it
    shows, never a ledger figure beside a converted one)."""
    converting = like is not None and like.fx is not None
    days = converting and needs_days(inputs.ruleset, period.start, period.end)
    result = quiet_allocate_keys(inputs, ruleset, period, [key], engine, days)[0]
    if not converting or like is None:
        return result
    return present(result, inputs.ruleset, like.currency)


def quiet_allocate_keys(
    inputs: Inputs,
    ruleset: RuleSet,
    period: Period,
    keys: Sequence[str | None],
    engine: Engine | None = None,
    days: bool = False,
) -> list[AllocationResult]:
    """:func:`quiet_allocate` under each of ``keys``, in one pass over the usage
    (:func:`tenantcost.allocate.allocate_keys`: each chunk is read once, split once per
    key); results in the order of ``keys``."""
    if not keys:
        return []
    usage = inputs.usage.within(period) if inputs.usage is not None else None
    billing = inputs.billing
    # A run on billing data re-runs on the same billed money when it is the same rule set and
    # period (another key: the pack's alternatives); billed pools are placed for that rule
    # set and period only, so any other re-run keeps the costs as read.
    same = billing is not None and ruleset is inputs.ruleset and period == billing.period
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        results = allocate_keys(
            inputs.allocation_costs if same else inputs.costs,
            usage,
            ruleset,
            keys=keys,
            period=period,
            detail="period",
            con=inputs.con,
            engine=engine,
            billed=billing if same else None,
            days=days,
        )
    for result in results:
        require_closed(cascade(result))
    return results


def _totals(result: AllocationResult) -> pd.Series:
    return result.client_totals().set_index("client")["amount"].astype("int64")


def _column(
    label: str,
    inputs: Inputs,
    ruleset: RuleSet,
    period: Period,
    engine: Engine | None = None,
    like: AllocationResult | None = None,
) -> Column:
    try:
        rerun = quiet_allocate(inputs, ruleset, period, engine=engine, like=like)
        return Column(label, _totals(rerun))
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


def within_period(
    base: AllocationResult, inputs: Inputs, ruleset: RuleSet, engine: Engine | None = None
) -> list[RuleChange]:
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
                engine,
                base,
            ),
            _column(
                f"Whole period under {new.id}",
                inputs,
                only_version(ruleset, new, base.period.start),
                base.period,
                engine,
                base,
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


def previous_allocation(
    base: AllocationResult, inputs: Inputs, ruleset: RuleSet, engine: Engine | None = None
) -> AllocationResult | None:
    """The previous period allocated under the rule as dated, once per pack; ``None`` when
    its data is not in the inputs or it cannot be allocated at all."""
    prev = previous_period(base.period)
    costs = inputs.costs
    inside = (costs["window_start"] >= prev.start) & (costs["window_end"] <= prev.end)
    if not inside.any():
        return None
    try:
        return quiet_allocate(inputs, ruleset, prev, engine=engine, like=base)
    except InputError:
        return None  # the previous period cannot be allocated at all: nothing to compare


def against_previous(
    base: AllocationResult,
    inputs: Inputs,
    ruleset: RuleSet,
    earlier: AllocationResult | None = None,
    engine: Engine | None = None,
) -> list[RuleChange]:
    """A notice when the previous period's data is present and was under another rule
    (``earlier``: that period's allocation, when the caller has it already)."""
    if earlier is None:
        earlier = previous_allocation(base, inputs, ruleset, engine)
    if earlier is None:
        return []
    prev = earlier.period
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
                    engine,
                    base,
                ),
                Column(f"{this_label} ({', '.join(new_ids)})", _totals(base)),
            ],
        )
    ]


# --------------------------------------------------------------------------- the bridge

BRIDGE_ROWS = 6
"""The largest parts a sheet's bridge lists; the others are summed on one row."""
ROUNDING = "rounding"
"""The effect of a bridge row that is no part of ``explain``: the two ends' display rounding,
when one was shown further than a display unit from its exact amount (a month frozen at fewer
decimals), so that the rows still add up to the change as shown."""


@dataclass(frozen=True)
class PackBridges:
    """Every client's bridge from the previous period to the pack's (``explain``'s figures),
    computed once per pack; only clients with figures in both periods have one."""

    vs: str
    month: str
    currency: str
    amounts: pd.DataFrame
    """Per client (index): ``early`` (previous period), ``late`` (this one), ``change``."""
    parts: pd.DataFrame
    """``client, effect, source, key, amount, reason, text``, grouped by client."""
    spans: dict[str, tuple[int, int]]
    """Each client's rows of ``parts`` (start, end)."""
    vs_revision: int | None = None
    """The issued revision of the previous period compared with (the store's bridges; ``None``
    from files, where there are no revisions)."""
    early_shown: dict[str, int] | None = None
    """Each client's previous-period figure as that period's own pages show it (its run's one
    rounding, :mod:`tenantcost.report.rounding`), in units of ``10**-early_places``; ``None``
    from files, where the previous period's pages are another pack's."""
    early_places: int | None = None

    def client_parts(self, client: str) -> pd.DataFrame:
        start, end = self.spans.get(client, (0, 0))
        return self.parts.iloc[start:end]


def pack_bridges(
    base: AllocationResult,
    inputs: Inputs,
    ruleset: RuleSet,
    earlier: AllocationResult | None,
    engine: Engine | None = None,
) -> PackBridges | None:
    """The bridge of every client present in both ``earlier`` and ``base``; ``None`` without
    a previous period, or when a rule change cannot be restated (the previous-rule notice
    then says why)."""
    return bridges_between(
        earlier,
        base,
        ruleset,
        lambda rules, p: quiet_allocate(inputs, rules, p, engine=engine, like=base),
    )


def bridges_between(
    earlier: AllocationResult | None,
    base: AllocationResult,
    ruleset: RuleSet,
    restate: Restate | None,
    vs_revision: int | None = None,
) -> PackBridges | None:
    """:func:`pack_bridges` for any caller: a rule change is restated through ``restate``
    (``None``: it cannot be, and the two months are bridged as they are, so a source whose
    keys differ is ``rule`` and the parts still add up exactly). The store's bridges
    (:mod:`tenantcost.store.month_bridge`) come this way from two recorded runs."""
    if earlier is None or earlier.lines.empty or base.lines.empty:
        return None
    labels = (
        period_label(earlier.period.start, earlier.period.end),
        period_label(base.period.start, base.period.end),
    )
    try:
        if restate is None:
            comparison = Comparison(
                month_figures(earlier, labels[0]), month_figures(base, labels[1])
            )
        else:
            comparison = compare_months(earlier, base, labels, ruleset, restate)
    except InputError:
        return None
    both = sorted(set(earlier.lines["client"].astype(str)) & set(base.lines["client"].astype(str)))
    b = bridges(comparison, both)
    parts = oriented(b, False, base.currency).reset_index(drop=True)
    return PackBridges(labels[0], labels[1], base.currency, b.amounts, parts,
                       client_spans(parts["client"]), vs_revision)  # fmt: skip


def client_spans(clients: pd.Series) -> dict[str, tuple[int, int]]:
    """Each client's rows (start, end) in parts grouped by client."""
    values = clients.astype(str).to_numpy()
    starts: list[int] = []
    if len(values):
        starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]).tolist()
    ends = [*starts[1:], len(values)] if starts else []
    return {str(values[s]): (int(s), int(e)) for s, e in zip(starts, ends, strict=True)}


def _signed(units: int, places: int) -> str:
    return ("+" if units > 0 else "") + format_units(units, places)


@dataclass(frozen=True)
class ShownBridge:
    """A client's bridge as people read it: both ends as their own months' pages show them
    (each month's frozen string, at its own decimals), and the parts rounded at ``places``
    (the finer of the two ends' decimals) so that they add up to the change between the two
    ends as shown, exactly."""

    vs: str
    vs_revision: int | None
    month: str
    currency: str
    places: int
    """Decimals of the parts and of the change."""
    early: int
    """The previous month's shown figure, in units of ``10**-places``."""
    late: int
    early_text: str
    """The previous month's frozen string (its own decimals)."""
    late_text: str
    labels: list[str]
    """Each part's reason in plain words (a last one for the smaller changes)."""
    effects: list[str]
    """Each part's effect code (the smaller changes': their codes, comma-separated)."""
    units: list[int]
    """Each part in units of ``10**-places``; none is zero."""

    @property
    def change(self) -> int:
        return self.late - self.early


def _shown_end(
    shown: dict[str, int] | None, shown_places: int | None, client: str, exact: int, places: int
) -> tuple[int, int]:
    """A period's figure as its pages show it (units, decimals) when known, else its exact
    amount rounded alone at ``places``."""
    if shown is not None and shown_places is not None and client in shown:
        return int(shown[client]), int(shown_places)
    return round_for_display([exact], places)[0], places


def shown_bridge(
    pb: PackBridges, client: str, places: int, late_shown: int | None = None
) -> ShownBridge | None:
    """The client's bridge rounded for display (``None`` when the client is not in both
    periods): the largest parts first, at most :data:`BRIDGE_ROWS` and one row for the rest.

    Its two ends read as the two periods' pages show them: ``late_shown`` (this period's
    displayed figure at ``places``, the sheet's total) and the previous period's from
    :attr:`PackBridges.early_shown`; an end not given is its exact amount rounded alone. When
    the two ends were frozen at different decimals (``0.116`` then ``0.1234``), the change
    and the parts use the finer ones, so nothing is rounded twice; should an end then lie more
    than a unit from its exact amount, a last :data:`ROUNDING` row says by how much the ends'
    rounding moved the change."""
    if client not in pb.amounts.index or client not in pb.spans:
        return None
    row = pb.amounts.loc[client]
    early, late = int(row["early"]), int(row["late"])
    parts = pb.client_parts(client)
    parts = parts.loc[parts["amount"] != 0]
    parts = parts.iloc[np.argsort(-parts["amount"].abs().to_numpy(), kind="stable")]
    shown, rest = parts.iloc[:BRIDGE_ROWS], parts.iloc[BRIDGE_ROWS:]
    amounts = [int(v) for v in shown["amount"].tolist()]
    if len(rest):
        amounts.append(int(rest["amount"].sum()))
    first = _shown_end(pb.early_shown, pb.early_places, client, early, places)
    last = (round_for_display([late], places)[0] if late_shown is None else late_shown, places)
    finest = max(first[1], last[1])
    ends = [first[0] * 10 ** (finest - first[1]), last[0] * 10 ** (finest - last[1])]
    labels = [*shown["reason"].astype(str).tolist()]
    effects = [*shown["effect"].astype(str).tolist()]
    if len(rest):
        labels.append(f"{len(rest)} smaller changes")
        effects.append(", ".join(dict.fromkeys(rest["effect"].astype(str))))
    try:  # the parts add up to the change between the two ends as shown
        units = round_for_display(amounts, finest, total=ends[1] - ends[0])
    except ValueError:  # an end shown further than a unit from its exact amount: say so
        units = round_for_display(amounts, finest)
        units.append(ends[1] - ends[0] - sum(units))
        labels.append(
            f"the figures as shown ({format_units(*first)} and {format_units(*last)}) are "
            f"rounded from {format_units(early, MINOR_UNIT_EXPONENT)} and "
            f"{format_units(late, MINOR_UNIT_EXPONENT)}"
        )
        effects.append(ROUNDING)
    kept = [i for i, u in enumerate(units) if u != 0]  # a part shown as zero adds nothing
    return ShownBridge(
        pb.vs, pb.vs_revision, pb.month, pb.currency, finest, ends[0], ends[1],
        format_units(*first), format_units(*last), [labels[i] for i in kept],
        [effects[i] for i in kept], [int(units[i]) for i in kept],
    )  # fmt: skip


def effect_labels(effects: str) -> str:
    """A row's effect codes (comma-separated) in plain words (:data:`PART_LABELS`)."""
    return ", ".join(part_label(e.strip()) for e in effects.split(",") if e.strip())


def bridge_notice(
    pb: PackBridges, client: str, places: int, late_shown: int | None = None
) -> tuple[str, str, list[tuple[str, str, str]]] | None:
    """A sheet's bridge: (title, text, rows of label, amount, part in plain words), from
    :func:`shown_bridge`; ``None`` when the client is not in both periods."""
    b = shown_bridge(pb, client, places, late_shown)
    if b is None:
        return None
    vs = f"{b.vs}, revision {b.vs_revision}" if b.vs_revision else b.vs
    rows = [(f"{vs} (last period)", b.early_text, "")]
    rows += [
        (lab, _signed(u, b.places), effect_labels(eff))
        for lab, u, eff in zip(b.labels, b.units, b.effects, strict=True)
    ]
    rows.append((f"{b.month} (this period)", b.late_text, ""))
    change = _signed(b.change, b.places)
    compared = f"Compared with {b.vs}, revision {b.vs_revision}. " if b.vs_revision else ""
    text = compared + (
        f"Your amount went from {b.early_text} {b.currency} in {b.vs} to "
        f"{b.late_text} {b.currency} in {b.month} ({change}). Each row "
        "is one cause, largest first; together they make up the change exactly (usage: your "
        "usage at the mean unit cost of the two periods; unit cost: the change in unit cost at "
        "your mean usage; rule change: a change of rule or key)."
    )
    return f"What changed since {b.vs}: {change} {b.currency}", text, rows
