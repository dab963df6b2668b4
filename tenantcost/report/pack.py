"""Everything a report pack needs, computed once: the allocation, its re-runs and their grades.

The pack runs the core under the rule, then under every alternative key (each usage column
and ``even``), grades each client's confidence, detects rule changes and fingerprints the
inputs. Sheets and the finance summary are then only views of this one object, so every page
of a pack shows the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tenantcost.allocate import NO_CLIENT, AllocationResult, allocate
from tenantcost.config.rules import EVEN, RuleSet, WeightsKey
from tenantcost.errors import InputError
from tenantcost.report.changes import RuleChange, against_previous, quiet_allocate, within_period
from tenantcost.report.confidence import RULE, ClientConfidence, assess, key_amounts
from tenantcost.report.display import auto_places
from tenantcost.report.figures import ShownFigures, plan
from tenantcost.report.provenance import Provenance, collect
from tenantcost.tables import metric_columns
from tenantcost.windows import Period


@dataclass(frozen=True)
class ReportInputs:
    """The loaded inputs and where they came from (for fingerprints and error messages)."""

    config: Path
    ruleset: RuleSet
    costs: pd.DataFrame
    usage: pd.DataFrame | None
    cost_paths: list[Path]
    usage_paths: list[Path | str]
    usage_origin: str = "usage"


@dataclass(frozen=True)
class ReportPack:
    """One period's allocation with everything the sheets and the summary show."""

    inputs: ReportInputs
    base: AllocationResult
    keys: list[str]
    """Alternative keys, in order: the usage columns, then ``even``."""
    amounts: pd.DataFrame
    """Client x (``rule``, *keys): each client's total in micro-units."""
    confidence: dict[str, ClientConfidence]
    changes: list[RuleChange]
    provenance: Provenance
    places: int
    shown: ShownFigures
    """The rounded figures every page agrees on."""
    all_clients: list[str]
    """Every client of the period, in report order (amount under the rule desc, then id)."""
    clients: list[str]
    """The clients whose sheets are rendered (``--client``), in report order."""
    known_clients: list[str]
    """Every client id seen anywhere in the inputs and rules (for redaction)."""


def alternative_keys(usage: pd.DataFrame | None) -> list[str]:
    """Every numeric usage column, then ``even``; none without usage data."""
    if usage is None or usage.empty:
        return []
    return [*metric_columns(usage), EVEN]


def _rule_clients(ruleset: RuleSet) -> set[str]:
    named: set[str] = set()
    for version in ruleset.rules:
        for w in version.workloads:
            if w.client:
                named.add(w.client)
            if isinstance(w.key, WeightsKey):
                named.update(w.key.weights)
        for e in version.external:
            if isinstance(e.key, WeightsKey):
                named.update(e.key.weights)
    return named


def build_pack(
    inputs: ReportInputs,
    period: Period | None,
    clients: list[str] | None = None,
    places: int | None = None,
) -> ReportPack:
    """Run the core under the rule and every alternative key and gather the pack."""
    ruleset = inputs.ruleset
    base = allocate(
        inputs.costs,
        inputs.usage,
        ruleset,
        period=period,
        rules_origin=str(inputs.config),
        usage_origin=inputs.usage_origin,
    )
    keys = alternative_keys(inputs.usage)
    runs: dict[str, AllocationResult] = {RULE: base}
    for key in keys:  # one re-run per key: the whole period, vectorised inside
        runs[key] = quiet_allocate(inputs.costs, inputs.usage, ruleset, base.period, key=key)
    amounts = key_amounts(runs)
    order = (
        amounts.assign(_client=amounts.index)
        .sort_values([RULE, "_client"], ascending=[False, True], kind="mergesort")
        .index.astype(str)
        .tolist()
    )
    if clients:
        unknown = [c for c in clients if c not in amounts.index]
        if unknown:
            raise InputError(
                f"--client: no client '{unknown[0]}' in the period; clients are "
                f"{', '.join(sorted(order)) or '(none)'}"
            )
    chosen_clients = [c for c in order if not clients or c in set(clients)]
    changes = within_period(base, inputs.costs, inputs.usage, ruleset) + against_previous(
        base, inputs.costs, inputs.usage, ruleset
    )
    known = set(amounts.index.astype(str)) | _rule_clients(ruleset)
    if inputs.usage is not None:
        known |= set(inputs.usage["client"].astype(str).unique())
    for change in changes:
        for column in change.columns:
            if column.amounts is not None:
                known |= set(column.amounts.index.astype(str))
    known.discard(NO_CLIENT)
    chosen = places if places is not None else auto_places(base.currency, amounts[RULE].tolist())
    return ReportPack(
        inputs=inputs,
        base=base,
        keys=keys,
        amounts=amounts,
        confidence=assess(base, amounts, inputs.usage, ruleset, ruleset.confidence),
        changes=changes,
        provenance=collect(inputs.config, inputs.cost_paths, inputs.usage_paths, base.rules),
        places=chosen,
        shown=plan(base, amounts, chosen),
        all_clients=order,
        clients=chosen_clients,
        known_clients=sorted(known),
    )
