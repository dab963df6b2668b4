"""Rounded figures that agree between the finance summary and the index.

Both pages list every client and total the column, so both round the cascade to the reference
total and each key's client column to its total (the rule's column to the cascade's
``clients`` line) by largest remainder (:func:`tenantcost.money.round_for_display`), once, in
one place: the two pages always agree and every column adds up.

A client's own sheet shows the same figure (its lines are rounded to it, by
:mod:`tenantcost.report.rounding`, the one hierarchy every page reads). Where the column had to
move a client's figure by one unit to add up, :func:`adjusted` says so and the summary marks
the cell, instead of leaving a reader to find the difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from tenantcost.allocate import AllocationResult
from tenantcost.kinds import CascadeKind
from tenantcost.money import round_for_display
from tenantcost.reconcile import cascade
from tenantcost.report.changes import RuleChange
from tenantcost.report.confidence import RULE
from tenantcost.report.rounding import client_column, key_columns


@dataclass(frozen=True)
class ShownFigures:
    """Display units (``10**-places``) of the figures shared between pages."""

    places: int
    cascade: list[int]
    """One per line of :func:`tenantcost.reconcile.cascade`, in its order."""
    reference: int
    by_key: dict[str, dict[str, int]]
    """Key (``rule`` first) -> client -> the client's total."""
    key_totals: dict[str, int]
    clients_line: int
    unattributed_line: int
    changes: list[list[dict[str, int] | None]] = field(default_factory=list)
    """Per change notice, per column: client -> the client's figure (``None``: a column that
    could not be computed); each column rounded within itself like a key's."""


def _change_columns(
    changes: Sequence[RuleChange], places: int, clients_line: int, rule_exact: int
) -> list[list[dict[str, int] | None]]:
    """Each change notice's columns (another split of the clients' money, or last period's)
    rounded within themselves: to the clients line when they hold the same money, so a client
    reads its figure there as everywhere else."""
    out: list[list[dict[str, int] | None]] = []
    for change in changes:
        columns: list[dict[str, int] | None] = []
        for column in change.columns:
            if column.amounts is None:
                columns.append(None)
                continue
            exact = column.amounts.astype("int64")
            same = int(exact.sum()) == rule_exact
            shown = client_column(exact, places, clients_line if same else None)
            columns.append(dict(zip(shown.index.astype(str), shown.tolist(), strict=True)))
        out.append(columns)
    return out


def plan(
    base: AllocationResult,
    amounts: pd.DataFrame,
    places: int,
    changes: Sequence[RuleChange] = (),
) -> ShownFigures:
    """Round the cascade, then every key's client column (the rule's to the clients line;
    :func:`tenantcost.report.rounding.key_columns`)."""
    casc = cascade(base)
    units = round_for_display([line.amount for line in casc.lines], places)
    kinds = [line.kind for line in casc.lines]
    clients_line = units[kinds.index(CascadeKind.CLIENTS)]
    columns = key_columns(amounts, places, clients_line, rule=RULE)
    by_key = {
        str(key): dict(zip(columns.index.astype(str), columns[key].tolist(), strict=True))
        for key in columns.columns
    }
    return ShownFigures(
        places=places,
        cascade=units,
        reference=sum(units),
        by_key=by_key,
        key_totals={k: sum(v.values()) for k, v in by_key.items()},
        clients_line=clients_line,
        unattributed_line=units[kinds.index(CascadeKind.UNATTRIBUTED)],
        changes=_change_columns(
            changes, places, clients_line, int(amounts[RULE].astype("int64").sum())
        ),
    )


def adjusted(shown: ShownFigures, amounts: pd.DataFrame, key: str, client: str) -> bool:
    """Whether the summary shows ``client``'s figure under ``key`` one unit off its own rounding."""
    alone = round_for_display([int(amounts.loc[client, key])], shown.places)[0]
    return shown.by_key[key][client] != alone
