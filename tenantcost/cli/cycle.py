"""The monthly cycle's commands on the store: ``run`` and ``status`` (close, reopen, history
come next).

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

if TYPE_CHECKING:
    from tenantcost.store.runs import RecordedRun

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
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Allocate a month from the store (its inputs and rules) and record the run."""
    from tenantcost.cli.run import check_format
    from tenantcost.store.actor import os_actor
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.runs import run_month
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    check_format(fmt, ("table", "json"))
    _month(month)
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        store = Store(engine, DataDir(resolved.require_data()))
        done = run_month(store, month, key=key, actor=os_actor(), wait=wait)
    _print_run(done, fmt)


def _print_run(done: RecordedRun, fmt: str) -> None:
    from tenantcost.cli.run import allocation_text
    from tenantcost.writers.json_output import result_document

    result = done.result
    if fmt == "json":
        typer.echo(json.dumps({"run_id": done.run_id, **result_document(result)}, indent=2))
        return
    typer.echo(allocation_text(result, done.cascade))
    typer.echo("")
    typer.echo(f"run {done.run_id} recorded")


@_register(app, "status")
def status_command(
    month: Annotated[
        str | None, typer.Option("--month", help="Only this month YYYY-MM (default: all).")
    ] = None,
    fmt: FormatOpt = "table",
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
) -> None:
    """Per month: hours covered by costs and by usage, runs, state, revisions."""
    from tenantcost.cli.run import check_format
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.status import month_status, status_table

    check_format(fmt, ("table", "json"))
    if month is not None:
        _month(month)
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        months = month_status(engine, month)
    typer.echo(json.dumps(months, indent=2) if fmt == "json" else status_table(months))


__all__ = ["run_command", "status_command"]
