"""Everything a report pack needs, computed once: the allocation, its re-runs and their grades.

The pack takes the main run (the rule as written, made by the command's run sequence like
``allocate``'s), re-runs the core under every alternative key (each usage column and ``even``),
grades each client's confidence, detects rule changes and fingerprints the inputs. Every
re-run reads the same usage source chunk by chunk, and what the grades need from the usage
beyond the allocations (no-client shares, the services each client used, client ids) is
aggregated by DuckDB over that source: a Parquet month is never loaded into pandas. Sheets
and the finance summary are then only views of this one object, so every page of a pack shows
the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from tenantcost.allocate import NO_CLIENT, AllocationResult
from tenantcost.config.rules import EVEN, RuleSet, WeightsKey
from tenantcost.errors import InputError
from tenantcost.inputs import Inputs
from tenantcost.report.changes import RuleChange, against_previous, quiet_allocate, within_period
from tenantcost.report.confidence import (
    RULE,
    ClientConfidence,
    assess,
    key_amounts,
    usage_figures,
)
from tenantcost.report.display import auto_places
from tenantcost.report.figures import ShownFigures, plan
from tenantcost.report.provenance import Provenance, collect

ReportInputs = Inputs
"""A report's inputs are those of every command (:func:`tenantcost.inputs.load_inputs`)."""


@dataclass(frozen=True)
class ReportPack:
    """One period's allocation with everything the sheets and the summary show."""

    inputs: Inputs
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


def alternative_keys(inputs: Inputs) -> list[str]:
    """Every usage metric column, then ``even``; none without usage rows."""
    if inputs.usage is None or not _count(inputs, "SELECT count(*)"):
        return []
    return [*inputs.usage.metrics, EVEN]


def _count(inputs: Inputs, select: str) -> int:
    assert inputs.usage is not None
    rows = inputs.con.execute(f"{select} FROM ({inputs.usage.relation(inputs.con)})").fetchall()
    return int(rows[0][0]) if rows else 0


def usage_clients(inputs: Inputs) -> set[str]:
    """Every client id in the usage (all of it, not only the period's): DuckDB, not pandas."""
    if inputs.usage is None:
        return set()
    rows = inputs.con.execute(
        f"SELECT DISTINCT client FROM ({inputs.usage.relation(inputs.con)})"
    ).fetchall()
    return {str(r[0]) for r in rows}


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
    inputs: Inputs,
    base: AllocationResult,
    clients: list[str] | None = None,
    places: int | None = None,
    generated_at: datetime | None = None,
) -> ReportPack:
    """Gather the pack around the main run ``base``: re-run under every alternative key,
    grade, detect rule changes and fingerprint the inputs. ``generated_at`` pins the time the
    pages show (``--generated-at``), before ``SOURCE_DATE_EPOCH`` and the clock."""
    ruleset = inputs.ruleset
    keys = alternative_keys(inputs)
    runs: dict[str, AllocationResult] = {RULE: base}
    for key in keys:  # one re-run per key: the whole period, chunked like the main run
        runs[key] = quiet_allocate(inputs, ruleset, base.period, key=key)
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
    changes = within_period(base, inputs, ruleset) + against_previous(base, inputs, ruleset)
    known = set(amounts.index.astype(str)) | _rule_clients(ruleset) | usage_clients(inputs)
    for change in changes:
        for column in change.columns:
            if column.amounts is not None:
                known |= set(column.amounts.index.astype(str))
    known.discard(NO_CLIENT)
    chosen = places if places is not None else auto_places(base.currency, amounts[RULE].tolist())
    figures = usage_figures(inputs.usage, inputs.con, ruleset, base.period, inputs.costs)
    return ReportPack(
        inputs=inputs,
        base=base,
        keys=keys,
        amounts=amounts,
        confidence=assess(base, amounts, figures, ruleset, ruleset.confidence),
        changes=changes,
        provenance=collect(
            inputs.config, inputs.cost_paths, inputs.usage_paths, base.rules, at=generated_at
        ),
        places=chosen,
        shown=plan(base, amounts, chosen),
        all_clients=order,
        clients=chosen_clients,
        known_clients=sorted(known),
    )
