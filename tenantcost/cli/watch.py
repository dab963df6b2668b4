"""``tenantcost watch``: the month to date of every client against its budget, and anomalies.

A thin shell: :func:`tenantcost.store.watch_run.watch_month` computes the answer from the
store and records it (the service shows the latest), this module prints it (JSON: the
contract of docs/watch.md; table: :mod:`tenantcost.writers.watch_text`) and, with
``--notify``, hands it to the alerts (docs/alerts.md): sent once per alert and destination;
exit 1 if a delivery failed (the next run tries it again). A month without data yet is an
empty answer with a ``no_data`` warning and exit 0: a CronJob on the 1st must not fail.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from tenantcost.cli.shell import app
from tenantcost.cli.store import DataOpt, DbOpt, SettingsOpt, _register
from tenantcost.errors import InputError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from tenantcost.store.settings import StoreSettings
    from tenantcost.store.watch_run import Watched


@_register(app, "watch")
def watch_command(
    month: Annotated[
        str,
        typer.Option(
            "--month",
            help="The calendar month YYYY-MM to watch, or `current` (the UTC month of "
            "--as-of: an hourly scheduled watch).",
        ),
    ],
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="ISO 8601 time (default now; naive = UTC): the hours covered before it are "
            "allocated, the complete UTC days before it are scored.",
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table (default) or json.")] = "table",
    notify: Annotated[
        bool,
        typer.Option(
            "--notify",
            help="Send each new anomaly and each client entering `above` (or `below`, if "
            "configured) to the destinations of the settings' alerts: section, once.",
        ),
    ] = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
) -> None:
    """Month to date per client against its budget band, the month-end projection, anomalies
    per client and source, rule changes and data warnings; recorded for the service."""
    from tenantcost.cli.economics import parse_as_of
    from tenantcost.cli.run import check_format
    from tenantcost.month import resolve_month
    from tenantcost.store.actor import os_actor
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.watch_run import watch_month
    from tenantcost.writers.watch_text import watch_table

    check_format(fmt, ("table", "json"))
    at = parse_as_of(as_of)
    month = resolve_month(month, at.to_pydatetime())
    resolved = resolve_settings(db, data, settings)
    if notify and resolved.alerts is None:
        from tenantcost.store.notify import MISSING_SECTION

        raise InputError(MISSING_SECTION)  # before anything is computed or recorded
    with current_store(resolved) as engine:
        store = Store(engine, DataDir(resolved.require_data()))
        watched = watch_month(store, month, at, resolved.watch, os_actor())
        text = json.dumps(watched.document, indent=2, ensure_ascii=False)
        typer.echo(text if fmt == "json" else watch_table(watched.document))
        if notify:
            _notify(engine, resolved, watched)


def _notify(engine: Engine, resolved: StoreSettings, watched: Watched) -> None:
    """Hand the answer to the alerts (:func:`tenantcost.store.notify.notify`): its summary
    on stderr; when a delivery failed, one ``error:`` line after it and exit 1 (the others
    were sent; the failed ones are tried again by the next run), so a CronJob's failed runs
    show that a destination is not reached."""
    from tenantcost.store.notify import notify, routing_catalog

    report = notify(engine, resolved.alerts, watched.document, month_closed=watched.month_closed,
                    catalog=routing_catalog(engine))  # fmt: skip
    typer.echo(report.summary(), err=True)
    failure = report.failure()
    if failure is not None:
        typer.echo(failure, err=True)
        raise typer.Exit(1)
