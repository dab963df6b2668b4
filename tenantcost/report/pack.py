"""Everything a report pack needs, computed once: the allocation, its re-runs and their grades.

The pack takes the main run (the rule as written, made by the command's run sequence like
``allocate``'s), re-runs the core under every alternative key (each usage column and ``even``),
grades each client's confidence, detects rule changes and fingerprints the inputs. Every
re-run reads the same usage source chunk by chunk (all of them in one pass, with the main
run when the command computes them together: ``tenantcost.allocate.allocate_keys``), and what
the grades need from the usage beyond the allocations (no-client shares, the services each
client used, client ids) is aggregated by DuckDB over that source: a Parquet month is never
loaded into pandas. Sheets and the finance summary are then only views of this one object, so
every page of a pack shows the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pandas as pd

from tenantcost.allocate import NO_CLIENT, AllocationResult
from tenantcost.config.keys import EVEN, WeightsKey
from tenantcost.config.rules import RuleSet
from tenantcost.engine import Engine
from tenantcost.errors import InputError
from tenantcost.inputs import Inputs
from tenantcost.report.changes import (
    PackBridges,
    RuleChange,
    against_previous,
    pack_bridges,
    previous_allocation,
    quiet_allocate_keys,
    within_period,
)
from tenantcost.report.confidence import (
    RULE,
    ClientConfidence,
    UsageFigures,
    assess,
    key_amounts,
    usage_figures,
)
from tenantcost.report.display import auto_places
from tenantcost.report.figures import ShownFigures, plan
from tenantcost.report.provenance import Provenance, collect

if TYPE_CHECKING:
    from tenantcost.report.statement import StatementNote

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
    command: list[str] | None = None
    """The command that reproduces the pack, without ``--out`` (``report --from-db``);
    ``None``: the file command of ``inputs``."""
    statement: StatementNote | None = None
    """A draft or a restated revision (``report --from-db``): what its sheets say about it."""
    bridges: PackBridges | None = None
    """Every client's bridge from the previous period (``explain``'s figures), if its data is
    in the inputs; ``None`` otherwise."""


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


@dataclass(frozen=True)
class PackFigures:
    """What a pack computes beyond its main run: the re-runs under every alternative key, the
    change notices and the usage aggregates of the grades. Kept apart from the pack so that
    the store records them for the run a close issues (:mod:`tenantcost.store.report_figures`)
    and its sheets render later from the store alone (:mod:`tenantcost.store.stored_run`), as
    issued."""

    keys: list[str]
    """Alternative keys, in order: the usage columns, then ``even``."""
    amounts: pd.DataFrame
    """Client x (``rule``, *keys): each client's total in micro-units."""
    changes: list[RuleChange]
    usage: UsageFigures
    other_clients: list[str]
    """Client ids named by the rules or seen in the usage but in no amount (redaction)."""
    bridges: PackBridges | None = None
    """Every client's bridge from the previous period (:func:`pack_bridges`), or ``None``."""


def pack_figures(
    inputs: Inputs,
    base: AllocationResult,
    engine: Engine | None = None,
    alternatives: Mapping[str, AllocationResult] | None = None,
) -> PackFigures:
    """Re-run under every alternative key, detect rule changes, aggregate the usage; every
    re-run on ``engine``, the main run's (``report --engine dask``)."""
    ruleset = inputs.ruleset
    keys = alternative_keys(inputs)
    runs: dict[str, AllocationResult] = {RULE: base}
    if alternatives is None:  # one pass over the usage for every key, chunked like the main run
        alternatives = dict(
            zip(keys, quiet_allocate_keys(inputs, ruleset, base.period, keys, engine), strict=True)
        )
    runs.update({key: alternatives[key] for key in keys})
    amounts = key_amounts(runs)
    earlier = previous_allocation(base, inputs, ruleset, engine)  # once per pack
    changes = within_period(base, inputs, ruleset, engine) + against_previous(
        base, inputs, ruleset, earlier, engine
    )
    named = (_rule_clients(ruleset) | usage_clients(inputs)) - set(amounts.index.astype(str))
    return PackFigures(
        keys=keys,
        amounts=amounts,
        changes=changes,
        usage=usage_figures(inputs.usage, inputs.con, ruleset, base.period, inputs.costs),
        other_clients=sorted(named),
        bridges=pack_bridges(base, inputs, ruleset, earlier, engine),
    )


def build_pack(
    inputs: Inputs,
    base: AllocationResult,
    clients: list[str] | None = None,
    places: int | None = None,
    generated_at: datetime | None = None,
    engine: Engine | None = None,
    alternatives: Mapping[str, AllocationResult] | None = None,
) -> ReportPack:
    """Gather the pack around the main run ``base``: re-run under every alternative key
    (unless ``alternatives`` holds those runs already, computed in the main run's pass),
    grade, detect rule changes and fingerprint the inputs. ``generated_at`` pins the time the
    pages show (``--generated-at``), before ``SOURCE_DATE_EPOCH`` and the clock; the re-runs
    go to ``engine`` (``None``: in this process)."""
    provenance = collect(
        inputs.config, inputs.cost_paths, inputs.usage_paths, base.rules, at=generated_at
    )
    figures = pack_figures(inputs, base, engine, alternatives)
    return assemble_pack(inputs, base, figures, provenance, clients, places)


def assemble_pack(
    inputs: Inputs,
    base: AllocationResult,
    figures: PackFigures,
    provenance: Provenance,
    clients: list[str] | None = None,
    places: int | None = None,
    command: list[str] | None = None,
    statement: StatementNote | None = None,
) -> ReportPack:
    """The pack of ``base`` from its :class:`PackFigures` (computed now, or stored by a run):
    grades, report order, the chosen clients, the ids to redact, the rounded figures."""
    ruleset = inputs.ruleset
    amounts = figures.amounts
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
    known = set(amounts.index.astype(str)) | set(figures.other_clients)
    for change in figures.changes:
        for column in change.columns:
            if column.amounts is not None:
                known |= set(column.amounts.index.astype(str))
    known.discard(NO_CLIENT)
    chosen = places if places is not None else auto_places(base.currency, amounts[RULE].tolist())
    return ReportPack(
        inputs=inputs,
        base=base,
        keys=figures.keys,
        amounts=amounts,
        confidence=assess(base, amounts, figures.usage, ruleset, ruleset.confidence),
        changes=figures.changes,
        provenance=provenance,
        places=chosen,
        shown=plan(base, amounts, chosen, figures.changes),
        all_clients=order,
        clients=chosen_clients,
        known_clients=sorted(known),
        command=command,
        statement=statement,
        bridges=figures.bridges,
    )
