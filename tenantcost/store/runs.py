"""``tenantcost run``: allocate a month from the store and record the run.

The inputs are the month's committed costs and usage (:mod:`tenantcost.store.stored`; a
record they hold that the allocation refuses is named with its batch and the command that
withdraws it, :func:`tenantcost.store.batches.name_batches`), the
rules are the store's: every stored rule version (a version id means one thing forever),
with the file-level settings (confidence, privacy...) of the latest stored rule file
(:func:`tenantcost.store.month_inputs.stored_rules`, re-exported here). The allocation runs
without the lock (readers never block writers); only the record is written
under the store's write lock, in one transaction, after checking that no batch of the month
was committed meanwhile (else the figures would not match the inputs the run names).

What is recorded is per period only: per-client totals, lines per client, source, kind, key
and rule version, and the period figures of the cascade, with what the run's sheets need
besides (:func:`tenantcost.store.report_figures.record_run_tables`: pools' client counts, the
unattributed part of each pool per window, workloads, the rule set). Per-window usage stays in
Parquet.

**Billing data.** When the store holds billing batches for the month
(:mod:`tenantcost.store.billing`), the run goes through the same steps as ``allocate
--billing``: the live billing rows are the billing view,
:func:`tenantcost.billing.prepare_billing` reprices the costs and places the billed lines,
the allocation runs on billed money, and the invoice cascade
(:func:`tenantcost.invoice.invoice_cascade`) is recorded with the run (``run.invoice``, the
``invoice`` object of ``allocate --format json``). ``close`` issues that run, so the
revision carries its cascade.

**Currencies.** When the rule file names a ``presentation:`` currency, or the catalog gives
clients their own, the run also records the month converted into each, at the store's rates
(:mod:`tenantcost.store.run_fx`); a close issues those conversions with the run.

The report pack's figures that need the inputs again (a re-run per alternative key) are
recorded by ``close`` for the run it issues, not here: they would make every run several
times slower than ``allocate``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd
from sqlalchemy import Connection, func, insert, literal, select

from tenantcost import __version__
from tenantcost.allocate import allocate_stream
from tenantcost.errors import InputError
from tenantcost.invoice import invoice_cascade
from tenantcost.presentation import needs_days
from tenantcost.reconcile import (
    Cascade,
    cascade,
    exclusion_summary,
    require_closed,
    residual_summary,
    unattributed_summary,
)
from tenantcost.result import AllocationResult
from tenantcost.split import connect
from tenantcost.store.batches import name_batches
from tenantcost.store.billing import stored_billing_run
from tenantcost.store.catalog import catalog_currencies
from tenantcost.store.data import Store
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import (
    Batch,
    Run,
    RunClient,
    RunFigure,
    RunInput,
    RunLine,
    table,
    utcnow,
)
from tenantcost.store.month_inputs import (
    StoredRules,  # re-exported
    inputs_query,
    month_inputs,  # re-exported
    month_signature,
    stored_rules,  # re-exported
)
from tenantcost.store.report_figures import record_run_tables
from tenantcost.store.run_fx import convert_run, record_conversions, run_currencies, store_rates
from tenantcost.store.stored import stored_costs, stored_usage
from tenantcost.windows import Period


@dataclass(frozen=True)
class RecordedRun:
    """A run's id, its allocation, its (closed) cascade and its conversions."""

    run_id: str
    result: AllocationResult
    cascade: Cascade
    conversions: list[AllocationResult] = field(default_factory=list)


def stored_cost_span(connection: Connection) -> str:
    """Where the store's committed costs are, for the refusal of a month without any (the
    span of ``allocate``'s refusal of a period without cost data, from the batches' bounds)."""
    from tenantcost.timefmt import iso_offset, utc

    b = table(Batch).c
    first, last = connection.execute(
        select(func.min(b.window_from), func.max(b.window_to)).where(
            b.kind == "costs", b.status == "committed"
        )
    ).one()
    if first is None:
        return "the store has no costs at all"
    return f"the stored costs cover {iso_offset(utc(first))} to {iso_offset(utc(last))}"


def run_month(
    store: Store,
    month: str,
    *,
    key: str | None,
    actor: str,
    wait: float = 0.0,
    allow_unbilled: bool = False,
) -> RecordedRun:
    """Allocate ``month`` from the store and record it; returns the run and its figures.
    ``allow_unbilled``: cluster periods with costs and no billed line keep OpenCost's
    estimate (marked ``estimate`` in the invoice cascade) instead of being refused."""
    period = Period.month(month)
    started = utcnow()
    with store.engine.connect() as connection:
        batches = month_signature(connection, period)
    if not batches.batches("costs"):
        usage_batches = batches.batches("usage")
        with store.engine.connect() as connection:
            span = stored_cost_span(connection)
        raise InputError(
            f"no costs stored for {month} ({usage_batches} usage batch(es)); {span}: run "
            f"`tenantcost ingest costs --month {month}` first"
        )
    rules = stored_rules(store.engine)
    currencies = run_currencies(rules.ruleset, catalog_currencies(store.engine))
    converting = bool(currencies) and needs_days(rules.ruleset, period.start, period.end)
    con = connect()
    try:
        costs = stored_costs(store, period, tag_batches=True)
        usage = stored_usage(store, period, con)
        billed = stored_billing_run(
            store, period, con, rules.ruleset, costs, allow_unbilled=allow_unbilled
        )
        result = allocate_stream(
            billed.costs if billed is not None else costs, usage, rules.ruleset,
            key=key, period=period, detail="period", rules_origin=rules.origin, con=con,
            billed=billed, days=converting,
        )  # fmt: skip
    except InputError as exc:  # a stored record refused: name its batch and the repair
        raise name_batches(store.engine, exc) from None
    if billed is not None:
        result.invoice = invoice_cascade(result, billed).to_json()
    casc = require_closed(cascade(result))
    with store.engine.connect() as connection:
        rates = store_rates(connection, rules.ruleset) if currencies else None
    converted = convert_run(result, rules.ruleset, currencies, rates) if rates else []
    run_id = str(uuid.uuid4())
    with write_transaction(store.engine, wait) as connection:
        if month_signature(connection, period) != batches:
            raise InputError(
                f"new inputs for {month} were ingested while the run was computing (or a "
                "batch was withdrawn); run again"
            )
        run = _run_row(run_id, month, result, casc, rules, started, actor)
        connection.execute(insert(table(Run)), [run])
        _record_results(connection, run_id, result, casc, period)
        record_run_tables(connection, run_id, result, rules)
        if rates is not None:
            record_conversions(connection, run_id, converted, rates.load_id)
    return RecordedRun(run_id, result, casc, converted)


def _run_row(
    run_id: str,
    month: str,
    result: AllocationResult,
    casc: Cascade,
    rules: StoredRules,
    started: datetime,
    actor: str,
) -> dict[str, object]:
    return {
        "id": run_id, "month": month, "status": "succeeded",
        "period_start": result.period.start.to_pydatetime(),
        "period_end": result.period.end.to_pydatetime(),
        "key_override": result.key_override,
        "rule_ids": json.dumps([r.id for r in result.rules]),
        "rule_file_sha256": rules.file_sha256, "code_version": __version__,
        "currency": result.currency, "reference_total": result.reference_total,
        "clients_total": int(result.lines["amount"].sum()),
        "unattributed": int(result.unattributed["amount"].sum()), "gap": casc.gap,
        "started_at": started, "finished_at": utcnow(), "actor": actor,
        "invoice": json.dumps(result.invoice) if result.invoice is not None else None,
    }  # fmt: skip


def _record_results(
    connection: Connection,
    run_id: str,
    result: AllocationResult,
    casc: Cascade,
    period: Period,
) -> None:
    """Bulk inserts of the run's per-period results (one statement per table). The inputs
    (every batch read, however many) are copied by the database itself, ``INSERT ... SELECT``,
    under the lock that checked they are those the run read."""
    inputs = inputs_query(period).subquery()
    connection.execute(
        insert(table(RunInput)).from_select(
            ["run_id", "batch_id", "kind", "sha256"],
            select(literal(run_id), inputs.c.id, inputs.c.kind, inputs.c.sha256),
        )
    )
    totals = result.client_totals().assign(client=lambda f: f["client"].astype(str))
    if not totals.empty:
        connection.execute(insert(table(RunClient)), _records(totals.assign(run_id=run_id)))
    lines = result.lines  # per rule version: the report's pools and change notices need it
    if not lines.empty:
        lines = lines.astype({"client": str, "source": str, "kind": str, "key": str,
                              "rule_id": str})  # fmt: skip
        lines = lines.astype(object).where(lines.notna(), None)
        columns = ["client", "source", "kind", "key", "measure", "total_measure", "share",
                   "amount", "windows", "rule_id"]  # fmt: skip
        connection.execute(insert(table(RunLine)),
                           _records(lines[columns].assign(run_id=run_id)))  # fmt: skip
    figures = _figures(result, casc).assign(run_id=run_id)
    figures = figures.astype(object).where(figures.notna(), None)
    connection.execute(insert(table(RunFigure)), _records(figures))


def _figures(result: AllocationResult, casc: Cascade) -> pd.DataFrame:
    """Unattributed, residual, exclusions and cascade as one frame of ``run_figure`` rows."""
    unattributed = pd.DataFrame(unattributed_summary(result), columns=["source", "kind", "cause",
                                                                        "amount"])  # fmt: skip
    residual = pd.DataFrame(
        residual_summary(result), columns=["class", "amount", "before_distribution", "distributed"]
    )
    exclusions = pd.DataFrame(exclusion_summary(result), columns=["name", "reason", "amount"])
    cascade_rows = pd.DataFrame(
        [(c.label, str(c.kind), c.detail, c.amount) for c in casc.lines],
        columns=["name", "kind", "detail", "amount"],
    )
    parts = [
        unattributed.rename(columns={"source": "name", "cause": "detail"}).assign(
            section="unattributed"),
        residual.rename(columns={"class": "name"}).assign(section="residual"),
        exclusions.rename(columns={"reason": "detail"}).assign(section="exclusion"),
        cascade_rows.assign(section="cascade"),
    ]  # fmt: skip
    frames = [p.assign(position=range(len(p))) for p in parts if not p.empty]
    columns = ["section", "position", "name", "kind", "detail", "amount", "before_distribution",
               "distributed"]  # fmt: skip
    return pd.concat(frames, ignore_index=True).reindex(columns=columns)


def _records(frame: pd.DataFrame) -> list[dict[str, object]]:
    """Rows as plain Python values for one bulk insert (pandas boxes numpy scalars)."""
    return frame.to_dict("records")


__all__ = ["RecordedRun", "StoredRules", "month_inputs", "run_month", "stored_rules"]
