"""The store's commands: ``db upgrade``, ``rules load``, ``ingest usage|costs`` (``run`` and
``status``: :mod:`tenantcost.cli.cycle`).

Every store command takes ``--db``, ``--data`` and ``--settings`` (and their environment
variables), even where one of them is not needed, so scripts can pass the same three
everywhere. Every command that writes takes ``--wait SECONDS`` (default 0): how long to wait
for another process's write lock before exiting 4 with one line. SQLAlchemy and Alembic are
imported inside the commands: ``tenantcost --help`` stays fast.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tenantcost.cli.shell import FromOpt, MonthOpt, ToOpt, app, user_errors

if TYPE_CHECKING:
    from tenantcost.store.ingest import Ingested

DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL: sqlite:///FILE (default sqlite:///tenantcost.db) or "
        "postgresql+psycopg://USER@HOST:PORT/DB. Environment: TENANTCOST_DB.",
        show_default=False,
    ),
]
DataOpt = Annotated[
    str | None,
    typer.Option(
        "--data",
        help="Data directory for raw inputs (Parquet), a folder or an fsspec URL. Default: "
        "tenantcost-data/ next to a SQLite database. Environment: TENANTCOST_DATA.",
        show_default=False,
    ),
]
SettingsOpt = Annotated[
    Path | None,
    typer.Option(
        "--settings",
        help="Settings file (YAML: db, data; see config/settings.example.yaml). "
        "Environment: TENANTCOST_SETTINGS. Flags win over the environment, which wins over "
        "the file.",
        show_default=False,
    ),
]

WaitOpt = Annotated[
    float,
    typer.Option(
        "--wait",
        help="Seconds to wait for another process writing to the store; then exit 4.",
        min=0,
    ),
]
ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode",
        help="replace: the batch's rows replace those of its (window, service) or (window, "
        "workload) cells; sum: they add to them.",
    ),
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Validate and count; write nothing.")]
EXIT_LOCKED = 4

db_app = typer.Typer(help="The store's database: create it or bring its schema up to date.",
                     no_args_is_help=True)  # fmt: skip
rules_app = typer.Typer(help="Rule file versions kept in the store.", no_args_is_help=True)
ingest_app = typer.Typer(help="Raw usage and costs into the store, one atomic batch each.",
                         no_args_is_help=True)  # fmt: skip
app.add_typer(db_app, name="db")
app.add_typer(rules_app, name="rules")
app.add_typer(ingest_app, name="ingest")


def _register(
    group: typer.Typer, name: str
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        group.command(name)(user_errors(_locked_exits_4(func)))
        return func

    return decorate


def _locked_exits_4(func: Callable[..., None]) -> Callable[..., None]:
    """The store locked by another process past ``--wait``: one line, exit 4."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from tenantcost.store.lock import StoreLocked

        try:
            func(*args, **kwargs)
        except StoreLocked as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_LOCKED) from None

    return wrapper


@_register(db_app, "upgrade")
def db_upgrade_command(
    db: DbOpt = None, data: DataOpt = None, settings: SettingsOpt = None, wait: WaitOpt = 0.0
) -> None:
    """Create the store, or migrate its schema to this version of tenantcost."""
    from tenantcost.store.engine import open_engine, store_errors
    from tenantcost.store.schema import upgrade
    from tenantcost.store.settings import resolve_settings

    resolved = resolve_settings(db, data, settings)
    with store_errors(resolved):
        engine = open_engine(resolved, create=True, foreign_keys=False)
        try:
            done = upgrade(engine, wait=wait)
        finally:
            engine.dispose()
    before = done.before or "(empty)"
    if done.before == done.after:
        typer.echo(f"{resolved.display_db}: schema already at revision {done.after} (current)")
    else:
        typer.echo(f"{resolved.display_db}: schema upgraded from {before} to revision {done.after}")


@_register(rules_app, "load")
def rules_load_command(
    rules: Annotated[
        Path,
        typer.Argument(
            help="The YAML rule file to store.", metavar="RULES.yaml", show_default=False
        ),
    ],
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Store a rule file's versions (content + sha256); a changed version id is refused."""
    from tenantcost.config.rules import load_rules
    from tenantcost.store.actor import os_actor
    from tenantcost.store.lock import write_transaction
    from tenantcost.store.rules import load_rule_file
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    resolved = resolve_settings(db, data, settings)
    ruleset = load_rules(rules)  # a bad rule file is reported before the store is opened
    with current_store(resolved) as engine, write_transaction(engine, wait) as connection:
        loaded = load_rule_file(connection, rules, os_actor(), ruleset)
    if loaded.already_loaded:
        typer.echo(f"{rules}: already loaded (sha256 {loaded.sha256[:12]}); nothing to do")
        return
    new = ", ".join(loaded.new) or "none"
    unchanged = f"; unchanged: {', '.join(loaded.unchanged)}" if loaded.unchanged else ""
    typer.echo(
        f"{rules}: stored (sha256 {loaded.sha256[:12]}); new rule versions: {new}{unchanged}"
    )


@_register(ingest_app, "usage")
def ingest_usage_command(
    usage: Annotated[
        list[str],
        typer.Option(
            "--usage",
            help="Usage CSV/Parquet (window_start, window_end, service, client, metrics...), "
            "a file, folder or URL; repeat for several.",
            show_default=False,
        ),
    ],
    start: FromOpt = None,
    end: ToOpt = None,
    month: MonthOpt = None,
    mode: ModeOpt = "replace",
    dry_run: DryRunOpt = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Ingest usage as one batch (validated as `allocate` validates it)."""
    from tenantcost.store.ingest import ingest_usage

    _ingest(ingest_usage, usage, start, end, month, mode, dry_run, db, data, settings, wait)


@_register(ingest_app, "costs")
def ingest_costs_command(
    costs: Annotated[
        list[str],
        typer.Option(
            "--costs",
            help="OpenCost JSON response, OpenCost CSV export, or canonical CSV/Parquet; a "
            "file or a folder; repeat for several.",
            show_default=False,
        ),
    ],
    start: FromOpt = None,
    end: ToOpt = None,
    month: MonthOpt = None,
    mode: ModeOpt = "replace",
    dry_run: DryRunOpt = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Ingest costs as one batch (read as `allocate` reads them)."""
    from tenantcost.store.ingest import ingest_costs

    _ingest(ingest_costs, costs, start, end, month, mode, dry_run, db, data, settings, wait)


def _ingest(
    ingest: Callable[..., Ingested],
    paths: list[str],
    start: str | None,
    end: str | None,
    month: str | None,
    mode: str,
    dry_run: bool,
    db: str | None,
    data: str | None,
    settings: Path | None,
    wait: float,
) -> None:
    from tenantcost.cli.run import resolve_period
    from tenantcost.store.actor import os_actor
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.ingest import check_mode
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    resolved = resolve_settings(db, data, settings)
    period = resolve_period(month, start, end)
    check_mode(mode)
    with current_store(resolved) as engine:
        store = Store(engine, DataDir(resolved.require_data()))
        done = ingest(store, paths, period=period, mode=mode, actor=os_actor(),
                      dry_run=dry_run, wait=wait)  # fmt: skip
    typer.echo(_ingested_line(done))


def _ingested_line(done: Ingested) -> str:
    """One line: what the batch holds, or would hold."""
    from tenantcost.timefmt import iso_z_seconds

    cell = "(window, service)" if done.kind == "usage" else "(window, workload)"
    span = f"windows {iso_z_seconds(done.window_from)} to {iso_z_seconds(done.window_to)}"
    skipped = f"; {done.skipped} row(s) outside the period left out" if done.skipped else ""
    if done.dry_run:
        return (f"{done.kind}: dry run, nothing written: {done.rows} rows, {done.cells} {cell} "
                f"cells, {span}{skipped}")  # fmt: skip
    verb = "replaced" if done.mode == "replace" else "added to"
    earlier = f"; {verb} {done.replaced} cell(s) held by earlier batches" if done.replaced else ""
    cleaned = f"; removed {done.cleaned} leftover file(s)" if done.cleaned else ""
    return (f"{done.kind}: batch {done.uid[:12]} committed ({done.mode}): {done.rows} rows, "
            f"{done.cells} {cell} cells, {done.files} file(s), {span}, sha256 "
            f"{done.sha256[:12]}{earlier}{skipped}{cleaned}")  # fmt: skip
