"""A month's statement from the store, as a report pack: ``report --from-db`` and the service.

What a client was sent must read the same whenever it is rendered again: the pack is built
from what the run recorded (:mod:`tenantcost.store.report_figures`), never from the store's
current inputs, and nothing is allocated again. Which run:

* by default the month's latest issued revision (a month never closed is refused: close it,
  or ask for a draft);
* ``revision=N``: revision N exactly as issued (a restated revision says what changed);
* ``draft=True``: the month's latest run, closed or not; ``run_id``: that run. A run no
  close issued is a draft, and its sheets say so; an issued one is shown as the (latest)
  revision it was issued as.

``run`` records the run's own tables; ``close`` adds, for the run it issues, the pack's figures
that need the inputs (:func:`tenantcost.store.report_figures.pending_figures`). A draft has
not got them: they are computed from the store's inputs (``data``), refused if the month's
inputs changed since the run.

Each client's sheet carries its bridge against the previous month's latest issued revision
(:mod:`tenantcost.store.month_bridge`), which follows that month's restatements.

The provenance names the stored inputs (the rule file's and each batch's sha256), the batches
of the period withdrawn before the run (not read), and the command that renders the same pages
again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine, Row, func, select

from tenantcost.collect import CostInput
from tenantcost.convert import split_exact
from tenantcost.economics import div_half_even
from tenantcost.errors import InputError
from tenantcost.inputs import Inputs
from tenantcost.report.changes import PackBridges
from tenantcost.report.pack import PackFigures, ReportPack, assemble_pack
from tenantcost.report.provenance import InputFile, Provenance, generation_time
from tenantcost.report.statement import ClientRestatement, StatementKind, StatementNote
from tenantcost.result import AllocationResult
from tenantcost.split import connect
from tenantcost.store.batches import withdrawn_before
from tenantcost.store.cycle import statements
from tenantcost.store.data import DataDir, Store
from tenantcost.store.models import Batch, MonthEvent, Run, RunInput, table
from tenantcost.store.month_bridge import month_bridges, previous_issued
from tenantcost.store.month_state import issued_revision
from tenantcost.store.report_figures import (
    StoredResult,
    compute_pack_figures,
    load_converted,
    load_pack_figures,
    load_run,
)
from tenantcost.store.shown import RULE, RunShown, compute_shown, run_shown
from tenantcost.tables import empty_costs
from tenantcost.timefmt import iso_z_seconds
from tenantcost.windows import Period


@dataclass(frozen=True)
class Chosen:
    """The run a pack renders and what the sheets say about it."""

    month: str
    run_id: str
    revision: int | None
    """The issued revision rendered; ``None`` for a draft."""
    note: StatementNote | None
    """``None`` for revision 1 (the sheet as first issued, nothing added)."""


def _not_closed(month: str) -> InputError:
    return InputError(
        f"{month} has no issued statement: close it first (`tenantcost close --month {month}`), "
        "or render the latest run as a draft with --draft"
    )


def _issued_note(
    connection: Connection, month: str, revision: int, event: Row[Any]
) -> StatementNote | None:
    """What the sheets of an issued revision say: nothing for a complete revision 1 (the
    sheet as the files give it); else that it was incomplete, or restated and why."""
    incomplete = str(event.detail or "incomplete") if event.incomplete else ""
    issued_at = iso_z_seconds(event.at)
    if revision == 1:
        if not incomplete:
            return None
        return StatementNote(StatementKind.ISSUED, month, str(event.run_id), 1,
                             issued_at=issued_at, incomplete=incomplete)  # fmt: skip
    rows = statements(connection, month, revision)
    clients = {
        str(c): ClientRestatement(None if pd.isna(p) else int(p), int(a), int(d))
        for c, p, a, d in zip(
            rows["client"], rows["previous_amount"], rows["amount"], rows["difference"], strict=True
        )
    }  # fmt: skip  (three figures per client, read once per pack)
    before = _previous_shown(connection, month, revision - 1)
    return StatementNote(
        StatementKind.RESTATED, month, str(event.run_id), revision, str(event.reason or ""),
        issued_at, incomplete, clients, str(event.client_reason or ""),
        {str(c): int(u) for c, u in before.clients["rule"].items()} if before else {},
        before.places if before else None,
    )  # fmt: skip


def _previous_shown(connection: Connection, month: str, revision: int) -> RunShown | None:
    """The displayed figures of ``revision`` as issued (its run's one rounding, frozen), which
    a restatement quotes as what the clients were sent."""
    e = table(MonthEvent).c
    run_id = connection.execute(
        select(e.run_id).where(e.month == month, e.action == "close", e.revision == revision)
    ).scalar()
    return compute_shown(connection, str(run_id)) if run_id is not None else None


def _close_event(connection: Connection, month: str, revision: int | None) -> Row[Any]:
    """The close that issued ``revision`` of ``month`` (default: the latest)."""
    e = table(MonthEvent).c
    issued = issued_revision(connection, month)
    if not issued:
        raise _not_closed(month)
    wanted = issued if revision is None else revision
    event = connection.execute(
        select(table(MonthEvent)).where(e.month == month, e.action == "close", e.revision == wanted)
    ).first()
    if event is None:
        raise InputError(f"--revision: {month} has revisions 1 to {issued}, not {revision}")
    return event


def _latest_run(connection: Connection, month: str) -> str:
    r = table(Run).c
    run_id = connection.execute(
        select(r.id).where(r.month == month).order_by(r.started_at.desc()).limit(1)
    ).scalar()
    if run_id is None:
        raise InputError(f"{month} has no run: run `tenantcost run --month {month}` first")
    return str(run_id)


def choose_run(
    connection: Connection,
    month: str,
    *,
    revision: int | None = None,
    run_id: str | None = None,
    draft: bool = False,
) -> Chosen:
    """Which run renders ``month`` (see the module's docstring), or one ``error:`` line."""
    if sum([revision is not None, run_id is not None, draft]) > 1:
        raise InputError("give at most one of --revision, --run and --draft")
    if draft or run_id is not None:
        chosen = run_id if run_id is not None else _latest_run(connection, month)
        r = table(Run).c
        of = connection.execute(select(r.month).where(r.id == chosen)).scalar()
        if of is None:
            raise InputError(f"--run: no run '{chosen}' in the store")
        if of != month:
            raise InputError(f"--run: run {chosen} is of {of}, not {month}")
        e = table(MonthEvent).c
        issued_as = connection.execute(
            select(func.max(e.revision)).where(e.run_id == chosen, e.action == "close")
        ).scalar()
        if issued_as is None:
            issued = issued_revision(connection, month)
            draft_note = StatementNote(StatementKind.DRAFT, month, chosen, issued)
            return Chosen(month, chosen, None, draft_note)
        revision = int(issued_as)  # an issued run is shown as the revision it was issued as
    event = _close_event(connection, month, revision)
    note = _issued_note(connection, month, int(event.revision), event)
    return Chosen(month, str(event.run_id), int(event.revision), note)


def stored_provenance(
    connection: Connection, run_id: str, stored: StoredResult, at: datetime | None
) -> Provenance:
    """The run's inputs as stored: its rule file and every batch it read, with their sha256,
    then the batches of its period withdrawn before it (not read; fixed once the run is).
    Finance's pages name them in full; a client's sheet without directories
    (:func:`tenantcost.report.provenance.client_facing`)."""
    run = connection.execute(select(table(Run)).where(table(Run).c.id == run_id)).one()
    i, b = table(RunInput).c, table(Batch).c
    batches = connection.execute(
        select(i.batch_id, i.kind, i.sha256, b.source)
        .join_from(table(RunInput), table(Batch), b.id == i.batch_id)
        .where(i.run_id == run_id)
        .order_by(i.kind, i.batch_id)
    ).all()
    inputs = [InputFile("rules", stored.rules_origin, str(run.rule_file_sha256))]
    inputs += [
        InputFile(str(kind), f"batch {batch_id}: {source}", str(sha256))
        for batch_id, kind, sha256, source in batches
    ]  # one per batch the run read: a handful
    period = Period(pd.Timestamp(run.period_start), pd.Timestamp(run.period_end))
    inputs += [
        InputFile(
            kind,
            f"withdrawn batch {uid[:12]} (not read; withdrawn {iso_z_seconds(at)} "
            f"by {actor}): {source}",
            sha256,
        )
        for kind, uid, sha256, source, at, actor in withdrawn_before(
            connection, period, run.finished_at
        )
    ]  # the reason is internal (`batch list` and `history` show it): never on a sheet
    return Provenance(
        inputs=inputs,
        rules=[(r.id, r.effective_from.date().isoformat()) for r in stored.result.rules],
        version=str(run.code_version),
        generated_at=iso_z_seconds((at or generation_time()).astimezone(UTC)),
    )


def reproduce(chosen: Chosen) -> list[str]:
    """The command rendering the same pack from the store (the database URL left out: it may
    hold a password; ``--db``/``TENANTCOST_DB`` name it)."""
    which = (
        ["--revision", str(chosen.revision)]
        if chosen.revision is not None
        else ["--run", chosen.run_id]
    )
    return ["tenantcost", "report", "--month", chosen.month, "--from-db", *which]


@dataclass(frozen=True)
class StoredStatement:
    """A month's pack from the store and which run and revision it shows."""

    pack: ReportPack
    chosen: Chosen


def _with_early_shown(engine: Engine, bridges: PackBridges | None) -> PackBridges | None:
    """The bridges with the previous month's figures as its own pages show them, so the
    notice's "last period" reads what that month's sheet reads."""
    previous = previous_issued(engine, bridges.month) if bridges is not None else None
    if bridges is None or previous is None:
        return bridges
    shown = run_shown(engine, previous.run_id)
    early = shown.clients[RULE] if RULE in shown.clients else pd.Series(dtype="int64")
    figures = dict(zip(early.index.astype(str), early.astype("int64").tolist(), strict=True))
    return replace(bridges, early_shown=figures, early_places=shown.places)


def load_statement(
    engine: Engine,
    month: str,
    *,
    revision: int | None = None,
    run_id: str | None = None,
    draft: bool = False,
    clients: list[str] | None = None,
    places: int | None = None,
    generated_at: datetime | None = None,
    data: DataDir | None = None,
    currency: str | None = None,
) -> StoredStatement:
    """The report pack of ``month`` from the store: its latest issued revision by default
    (``revision``, ``run_id``, ``draft``: see :func:`choose_run`). Render it with
    :func:`tenantcost.report.write_pack`, or sheet by sheet with
    :func:`tenantcost.report.sheet.build_sheet`.

    An issued run has its pack figures (``close`` records them); a run no close issued has
    not, and they are computed from the store's inputs (``data``), refused if those changed
    since the run (the draft would not be that run's).

    ``currency`` (not the ledger's): the run as its conversion into it split it when it ran
    (:func:`tenantcost.store.report_figures.load_converted`), see :func:`_converted_figures`."""
    with engine.connect() as connection:
        chosen = choose_run(connection, month, revision=revision, run_id=run_id, draft=draft)
        stored = load_run(connection, chosen.run_id)
        figures = load_pack_figures(connection, chosen.run_id)
        provenance = stored_provenance(connection, chosen.run_id, stored, generated_at)
        converting = currency is not None and currency != stored.result.currency
        if places is None and not converting:  # the decimals the close froze, else the rule's
            from tenantcost.store.display import run_places

            places = run_places(connection, chosen.run_id)
        base = stored.result
        if converting and currency is not None:
            base = load_converted(connection, stored, currency)
    if figures is None:
        if data is None:
            raise InputError(
                f"run {chosen.run_id} has no recorded report figures (no close issued it): "
                "give --data so they are computed from its stored inputs"
            )
        figures = compute_pack_figures(Store(engine, data), stored)
    # the bridge against the previous month's latest issued revision (cached per run pair)
    if base is not stored.result:
        figures = _converted_figures(figures, base, _converted_bridges(engine, month, base))
    else:
        bridges = month_bridges(engine, month, chosen.run_id, stored.result.currency, data)
        figures = replace(figures, bridges=_with_early_shown(engine, bridges))
    inputs = Inputs(
        Path(stored.rules_origin),
        stored.ruleset,
        CostInput(empty_costs(), []),
        None,
        [],
        connect(),
    )  # fmt: skip  (the rule set the run used; no input is read again)
    pack = assemble_pack(
        inputs, base, figures, provenance, clients, places,
        command=reproduce(chosen), statement=chosen.note,
    )  # fmt: skip
    return StoredStatement(pack, chosen)


def _converted_figures(
    figures: PackFigures, base: AllocationResult, bridges: PackBridges | None
) -> PackFigures:
    """The pack's figures beside a converted run. Each client's total under the rule is its
    converted lines' sum. Its totals under the other keys and in the change notices were
    recorded in the ledger only, with no days of their own to convert at:

    * a column equal to the rule column in the ledger (a key the rule uses everywhere) is
      the rule column converted;
    * a column whose ledger total is the rule column's (the same pool split another way)
      gets the rule column's converted total, split between its clients in proportion to
      their ledger amounts by largest remainder, so every such column adds up to the same;
    * any other column is converted at the run's rate of the month (its converted reference
      total over its ledger one), rounded once, top down.

    Under a policy with one rate a month, the last two are the month's rate."""
    assert base.ledger is not None
    lines = base.lines.assign(client=base.lines["client"].astype(str))
    sums = lines.groupby("client", sort=True)[["amount", "ledger_amount"]].sum()
    amounts = figures.amounts
    converted = sums["amount"].reindex(amounts.index).fillna(0).astype("int64")
    ledger_total = int(sums["ledger_amount"].sum())
    rate = Fraction(base.reference_total, base.ledger.reference_total or 1)

    rule = sums["ledger_amount"].reindex(amounts.index).fillna(0).astype("int64")

    def convert(values: pd.Series) -> pd.Series:
        if values.astype("int64").equals(rule.reindex(values.index).fillna(0).astype("int64")):
            return converted.reindex(values.index).fillna(0).astype("int64").rename(values.name)
        ledger = values.astype("int64").astype(object).to_numpy()
        total = int(values.sum())
        if total == ledger_total and total != 0:  # the rule's total: split in its proportions
            target = int(converted.sum())
            share = Fraction(target, total)
            num, den = share.numerator, share.denominator
        else:
            num, den = rate.numerator, rate.denominator
            target = int(div_half_even(total * num, den))
        parts = split_exact(ledger * num, np.zeros(len(values), dtype="int64"), {0: target},
                            pd.Series(values.index.astype(str)), den)  # fmt: skip
        return pd.Series(parts, index=values.index, dtype="int64", name=values.name)

    out = amounts.apply(convert).astype("int64")
    out[RULE] = converted
    changes = [
        replace(
            change,
            columns=[
                replace(c, amounts=None if c.amounts is None else convert(c.amounts))
                for c in change.columns
            ],
        )
        for change in figures.changes
    ]  # fmt: skip  (a few notices of a few columns)
    return replace(figures, amounts=out, changes=changes, bridges=bridges)


def _converted_bridges(engine: Engine, month: str, base: AllocationResult) -> PackBridges | None:
    """Every client's bridge from the previous month's latest issued revision, both months
    as their runs converted them into ``base``'s currency (as ``report --currency`` bridges
    two converted periods from the files); ``None`` when that revision has no such
    conversion. A rule change between them is not restated: its part is ``rule``."""
    from tenantcost.report.changes import bridges_between

    previous = previous_issued(engine, month)
    if previous is None:
        return None
    with engine.connect() as connection:
        earlier = load_run(connection, previous.run_id)
        try:
            converted = load_converted(connection, earlier, base.currency)
        except InputError:
            return None
    return bridges_between(converted, base, earlier.ruleset, None, previous.revision)


def stored_pack(engine: Engine, month: str, **options: Any) -> ReportPack:
    """:func:`load_statement`'s pack (same options)."""
    return load_statement(engine, month, **options).pack


__all__ = [
    "Chosen",
    "StoredStatement",
    "choose_run",
    "load_statement",
    "reproduce",
    "stored_pack",
    "stored_provenance",
]
