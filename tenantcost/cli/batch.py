"""``tenantcost batch list`` and ``batch withdraw`` (:mod:`tenantcost.store.batches`): what
the store ingested, and the repair of a month a later ingest made unusable. Heavy modules
load inside the commands."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tenantcost.cli.shell import app
from tenantcost.cli.store import DataOpt, DbOpt, SettingsOpt, WaitOpt, _register

batch_app = typer.Typer(
    help="Ingested batches: `batch list` shows them, `batch withdraw` takes one back from its "
    "open months (nothing is deleted).",
    no_args_is_help=True,
)
app.add_typer(batch_app, name="batch")


@_register(batch_app, "list")
def batch_list_command(
    month: Annotated[
        str | None,
        typer.Option("--month", help="Only batches with windows in this month YYYY-MM."),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table (default) or json.")] = "table",
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
) -> None:
    """List the batches in commit order: uid, kind, mode, rows, cells, windows, ingested at
    and by, status (active, or withdrawn: when, by whom, why)."""
    from tenantcost.cli.run import check_format
    from tenantcost.store.batches import batch_table, batches_document, list_batches
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.windows import Period

    check_format(fmt, ("table", "json"))
    if month is not None:
        Period.month(month)
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        batches = list_batches(engine, month)
    typer.echo(json.dumps(batches_document(batches), indent=2) if fmt == "json"
               else batch_table(batches))  # fmt: skip


@_register(batch_app, "withdraw")
def batch_withdraw_command(
    batch: Annotated[
        str,
        typer.Argument(
            help="The batch's uid, or its first 8 or more hex digits (as `ingest` and `batch "
            "list` print it).",
            metavar="BATCH",
            show_default=False,
        ),
    ],
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            help="Why (required, non-empty): recorded, shown by `history` and `batch list`.",
            show_default=False,
        ),
    ] = None,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Withdraw a batch from its months: it no longer counts (what a `replace` batch had
    replaced counts again); its rows and files stay. Refused if one of its months is closed."""
    from tenantcost.errors import InputError
    from tenantcost.store.actor import os_actor
    from tenantcost.store.batches import withdraw_batch
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    if reason is None:  # one line, like every refusal (not click's usage box)
        raise InputError("--reason is required: say why the batch is withdrawn (it is "
                         "recorded and shown by `tenantcost history`)")  # fmt: skip
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        done = withdraw_batch(engine, batch, reason=reason, actor=os_actor(), wait=wait)
    withdrawn = done.batch
    again = f"; {done.restored} cell(s) it had replaced count again" if done.restored else ""
    typer.echo(f"batch {withdrawn.short} withdrawn ({withdrawn.kind}, {withdrawn.rows} rows): "
               f"{', '.join(withdrawn.months)} no longer read it{again}; `tenantcost run "
               f"--month {withdrawn.months[0]}` recomputes")  # fmt: skip


__all__ = ["batch_list_command", "batch_withdraw_command"]
