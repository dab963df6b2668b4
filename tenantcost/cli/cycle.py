"""The monthly cycle's commands on the store: ``run``, ``status``, ``close``, ``reopen`` and
``history``.

``run`` prints what ``allocate`` prints for the same inputs (the JSON document with a
``run_id`` added; the table with the run id below it), so a script moving from files to the
store changes its command line, not its parsing. Heavy modules load inside the commands.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from tenantcost.cli.shell import KeyOpt, app
from tenantcost.cli.store import DataOpt, DbOpt, SettingsOpt, WaitOpt, _register
from tenantcost.errors import InputError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from tenantcost.store.cycle import Closed
    from tenantcost.store.history import HistoryEntry
    from tenantcost.store.runs import RecordedRun
    from tenantcost.store.settings import StoreSettings

FormatOpt = Annotated[str, typer.Option("--format", help="table (default) or json.")]


def _month(month: str) -> str:
    """``--month`` as ``YYYY-MM`` (validated by :meth:`Period.month`)."""
    from tenantcost.windows import Period

    Period.month(month)
    return month


@_register(app, "run")
def run_command(
    month: Annotated[str, typer.Option("--month", help="The calendar month YYYY-MM to run.")],
    key: KeyOpt = None,
    fmt: FormatOpt = "table",
    allow_unbilled: Annotated[
        bool,
        typer.Option(
            "--allow-unbilled",
            help="With stored billing data: keep OpenCost's estimate for cluster periods "
            "with costs and no billed line yet (marked as estimates) instead of refusing.",
        ),
    ] = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Allocate a month from the store (its inputs, billing data and rules) and record the
    run (with its invoice cascade when billing data is stored)."""
    from tenantcost.cli.run import check_format
    from tenantcost.store.actor import os_actor
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.month_bridge import cache_after_run
    from tenantcost.store.runs import run_month
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    check_format(fmt, ("table", "json"))
    _month(month)
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        store = Store(engine, DataDir(resolved.require_data()))
        done = run_month(store, month, key=key, actor=os_actor(), wait=wait,
                         allow_unbilled=allow_unbilled)  # fmt: skip
        try:  # a cache: the run is recorded; the first reader computes what is not cached
            cache_after_run(engine, month, done.run_id, store.data)  # the draft's movers
        except Exception as exc:  # said, never fatal to the recorded run
            typer.echo(f"warning: the month's bridge was not cached ({exc}); the first "
                       "reader of its movers computes it", err=True)  # fmt: skip
    _print_run(done, fmt)


def _print_run(done: RecordedRun, fmt: str) -> None:
    from tenantcost.cli.run import allocation_text
    from tenantcost.writers.json_output import result_document
    from tenantcost.writers.text import money

    result = done.result
    conversions = [
        {"currency": c.currency, "reference_total": c.reference_total,
         "ledger_reference_total": result.reference_total, "fx": c.fx}
        for c in done.conversions
    ]  # fmt: skip
    if fmt == "json":
        document = {"run_id": done.run_id, **result_document(result)}
        if conversions:  # presentation: or a client's own currency: what the run recorded
            document["conversions"] = conversions
        typer.echo(json.dumps(document, indent=2))
        return
    typer.echo(allocation_text(result, done.cascade))
    typer.echo("")
    for c in done.conversions:
        fx = c.fx or {}
        provisional = "; provisional: a day has no published rate yet"
        typer.echo(f"converted into {c.currency}: reference total {money(c.reference_total)} "
                   f"{c.currency} ({fx.get('policy')} rates, {fx.get('source')}"
                   f"{provisional if fx.get('provisional') else ''})")  # fmt: skip
    typer.echo(f"run {done.run_id} recorded")


@_register(app, "status")
def status_command(
    month: Annotated[
        str | None, typer.Option("--month", help="Only this month YYYY-MM (default: all).")
    ] = None,
    fmt: FormatOpt = "table",
    usage: Annotated[
        bool,
        typer.Option(
            "--usage",
            help="Instead: the stored usage totals per month, service and client (the live "
            'rows `run` reads; client "" = no client), one column per metric.',
        ),
    ] = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
) -> None:
    """Per month: hours covered by costs and by usage, runs, state, revisions; and the
    billing coverage of a month with billing data (hours, billing periods, invoices, last
    batch). With --usage: each month's usage totals per service and client."""
    from tenantcost.cli.run import check_format
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.status import month_status, status_table

    check_format(fmt, ("table", "json"))
    if month is not None:
        _month(month)
    resolved = resolve_settings(db, data, settings)
    if usage:
        _print_usage_totals(resolved.require_data(), resolved, month, fmt)
        return
    with current_store(resolved) as engine:
        months = month_status(engine, month)
    typer.echo(json.dumps(months, indent=2) if fmt == "json" else status_table(months))


def _print_usage_totals(data: str, resolved: StoreSettings, month: str | None, fmt: str) -> None:
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.schema import current_store
    from tenantcost.store.usage_totals import all_usage_totals, totals_document, totals_table

    with current_store(resolved) as engine:
        totals = all_usage_totals(Store(engine, DataDir(data)), month)
    text = json.dumps(totals_document(totals), indent=2) if fmt == "json" else None
    typer.echo(text if text is not None else totals_table(totals))


@_register(app, "close")
def close_command(
    month: Annotated[
        str,
        typer.Option(
            "--month",
            help="The calendar month YYYY-MM to close, or `previous` (the UTC month before "
            "now: a monthly scheduled close).",
        ),
    ],
    allow_incomplete: Annotated[
        bool,
        typer.Option(
            "--allow-incomplete",
            help="Close even though some hours lack costs or usage, or billing data; the "
            "statements say so (unbilled cluster hours keep OpenCost's estimate).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="After a reopen: issue the next revision even though no client's amount, no "
            "rule and not the month's completeness changed (refused without: 'nothing "
            "changed since revision N').",
        ),
    ] = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Issue the next revision (1 at first) of every client's statement and close the month:
    later ingests and rule loads that would change it are refused until `reopen`. A close
    that would change nothing revision N issued is refused unless --force."""
    from datetime import UTC, datetime

    from tenantcost.month import resolve_month
    from tenantcost.store.actor import os_actor
    from tenantcost.store.cycle import close_month
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.month_bridge import cache_after_close
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    month = resolve_month(month, datetime.now(UTC))
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        store = Store(engine, DataDir(resolved.require_data()))
        closed = close_month(store, month, allow_incomplete=allow_incomplete,
                             actor=os_actor(), wait=wait, force=force)  # fmt: skip
        cache_after_close(engine, month, store.data)  # the bridges its sheets will show
    _print_closed(closed)


def _print_closed(closed: Closed) -> None:
    from tenantcost.report.privacy import RESTATED_NOTE
    from tenantcost.writers.text import money, render_table

    rows = closed.statements
    amounts = rows["amount"].map(money)
    previous = rows["previous_amount"].astype(object).map(money, na_action="ignore").fillna("-")
    changed = rows["difference"].map(money) if closed.revision > 1 else previous.map(lambda _: "-")
    table_rows = list(zip(rows["client"], amounts, previous, changed, strict=True))
    header = ["client", f"revision {closed.revision}", "previous", "difference"]
    typer.echo(render_table(header, table_rows, {1, 2, 3}) if table_rows else "(no clients)")
    typer.echo("")
    source = "latest run, inputs unchanged" if closed.reused_run else "new run"
    typer.echo(f"{closed.month} closed: revision {closed.revision} issued for {len(rows)} "
               f"client(s) in {closed.currency} from run {closed.run_id} ({source})")  # fmt: skip
    if closed.incomplete:
        typer.echo(f"incomplete: {closed.detail}")
    if closed.reason:
        typer.echo(f"reason: {closed.reason}")
        typer.echo(f"clients read: {closed.client_reason or RESTATED_NOTE}")
    if closed.rates_changed:
        typer.echo(f"exchange rates changed since revision {closed.revision - 1} for "
                   f"{', '.join(closed.rates_changed)}: the statements shown in it are "
                   "converted at the rates in force now")  # fmt: skip


@_register(app, "reopen")
def reopen_command(
    month: Annotated[str, typer.Option("--month", help="The closed month YYYY-MM to reopen.")],
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            help="Why (required, non-empty): recorded, and carried by the next revision; "
            "shown to finance and admin only.",
            show_default=False,
        ),
    ] = None,
    client_reason: Annotated[
        str | None,
        typer.Option(
            "--client-reason",
            help="What account managers and client sheets say instead of --reason (each "
            "client's reader gets it with other clients' names redacted); default: \"restated "
            'by finance".',
            show_default=False,
        ),
    ] = None,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Unlock a closed month for corrections; the next `close` issues revision N+1 with this
    reason, and revision N stays exactly as issued. The reason is for finance: clients'
    readers see --client-reason (redacted) or "restated by finance"."""
    from tenantcost.errors import InputError
    from tenantcost.store.actor import os_actor
    from tenantcost.store.cycle import reopen_month
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    _month(month)
    if reason is None:  # one line, like every refusal (not click's usage box)
        raise InputError(f"--reason is required: say why {month} is reopened (it goes on the "
                         "next revision's statements)")  # fmt: skip
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        done = reopen_month(engine, month, reason=reason, actor=os_actor(), wait=wait,
                            client_reason=client_reason)  # fmt: skip
    typer.echo(f"{done.month} reopened after revision {done.revision}: ingest the corrections, "
               f"then `tenantcost close --month {done.month}` issues revision "
               f"{done.revision + 1}")  # fmt: skip


@_register(app, "history")
def history_command(
    client: Annotated[
        str | None, typer.Option("--client", help="Only this client (default: all).")
    ] = None,
    month: Annotated[
        str | None, typer.Option("--month", help="Only this month YYYY-MM (default: all).")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table (default), json or csv.")] = "table",
    currency: Annotated[
        str | None,
        typer.Option(
            "--currency",
            help="Show the amounts in this currency, at the conversion each revision's run "
            "recorded (frozen at close), with the ledger amounts beside. Default: the stored "
            "rule file's presentation:, else the ledger currency.",
        ),
    ] = None,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
) -> None:
    """Every issued revision of the clients' statements (issued or superseded), by month,
    client and revision; without --client, the table then lists the batch withdrawals."""
    from tenantcost.cli.run import check_format
    from tenantcost.store.batches import withdrawals, withdrawals_table
    from tenantcost.store.history import history, history_csv, history_document, history_table
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    check_format(fmt, ("table", "json", "csv"))
    if month is not None:
        _month(month)
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        entries = _shown(engine, history(engine, client=client, month=month), currency)
        # withdrawals concern a whole month, not one client (and their reason is internal)
        withdrawn = withdrawals(engine, month) if client is None and fmt == "table" else []
    if fmt == "json":
        typer.echo(json.dumps(history_document(entries), indent=2))
    elif fmt == "csv":
        typer.echo(history_csv(entries), nl=False)
    else:
        typer.echo(history_table(entries))
        if withdrawn:
            typer.echo("")
            typer.echo(withdrawals_table(withdrawn))


def _shown(engine: Engine, entries: list[HistoryEntry], asked: str | None) -> list[HistoryEntry]:
    """``history``'s entries in the currency asked for, else each client's own (the
    catalog's), else the stored ``presentation:``."""
    from tenantcost.currency import require_currency
    from tenantcost.store.catalog import currencies_of
    from tenantcost.store.history import converted
    from tenantcost.store.month_inputs import presentation_of

    if not entries:
        return entries
    clients = sorted({e.client for e in entries})
    if asked is not None:
        wanted = dict.fromkeys(clients, require_currency(asked.strip().upper(), where="--currency"))
    else:
        default = presentation_of(engine) or ""  # no rules stored: nothing converted
        wanted = {c: default for c in clients} | currencies_of(engine, clients)
    shown: dict[int, HistoryEntry] = {}
    for currency in sorted({c for c in wanted.values() if c}):
        mine = [(i, e) for i, e in enumerate(entries) if wanted[e.client] == currency]
        done = converted(engine, [e for _, e in mine], currency)
        shown |= {i: d for (i, _), d in zip(mine, done, strict=True)}
    out = [shown.get(i, e) for i, e in enumerate(entries)]
    if asked is not None and all(e.currency != wanted[e.client] for e in out):
        raise InputError(
            f"--currency {asked.strip().upper()}: no issued revision here was converted into "
            "it; a run converts into the rule file's presentation: currency and the catalog's "
            "client currencies (docs/currency.md)"
        )
    return out


__all__ = ["close_command", "history_command", "reopen_command", "run_command", "status_command"]
