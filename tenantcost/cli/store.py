"""The store's commands: ``db upgrade`` and ``rules load`` (ingest, run, close... come next).

Every store command takes ``--db``, ``--data`` and ``--settings`` (and their environment
variables), even where one of them is not needed, so scripts can pass the same three
everywhere. SQLAlchemy and Alembic are imported inside the commands: ``tenantcost --help``
stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from tenantcost.cli.shell import app, user_errors

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

db_app = typer.Typer(help="The store's database: create it or bring its schema up to date.",
                     no_args_is_help=True)  # fmt: skip
rules_app = typer.Typer(help="Rule file versions kept in the store.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(rules_app, name="rules")


def _register(
    group: typer.Typer, name: str
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        group.command(name)(user_errors(func))
        return func

    return decorate


@_register(db_app, "upgrade")
def db_upgrade_command(
    db: DbOpt = None, data: DataOpt = None, settings: SettingsOpt = None
) -> None:
    """Create the store, or migrate its schema to this version of tenantcost."""
    from tenantcost.store.engine import open_engine, store_errors
    from tenantcost.store.schema import upgrade
    from tenantcost.store.settings import resolve_settings

    resolved = resolve_settings(db, data, settings)
    with store_errors(resolved):
        engine = open_engine(resolved, create=True, foreign_keys=False)
        try:
            done = upgrade(engine)
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
) -> None:
    """Store a rule file's versions (content + sha256); a changed version id is refused."""
    from tenantcost.config.rules import load_rules
    from tenantcost.store.actor import os_actor
    from tenantcost.store.engine import open_engine, store_errors
    from tenantcost.store.rules import load_rule_file
    from tenantcost.store.schema import require_current_schema
    from tenantcost.store.settings import resolve_settings

    resolved = resolve_settings(db, data, settings)
    ruleset = load_rules(rules)  # a bad rule file is reported before the store is opened
    with store_errors(resolved):
        engine = open_engine(resolved)
        try:
            require_current_schema(engine)
            loaded = load_rule_file(engine, rules, os_actor(), ruleset)
        finally:
            engine.dispose()
    if loaded.already_loaded:
        typer.echo(f"{rules}: already loaded (sha256 {loaded.sha256[:12]}); nothing to do")
        return
    new = ", ".join(loaded.new) or "none"
    unchanged = f"; unchanged: {', '.join(loaded.unchanged)}" if loaded.unchanged else ""
    typer.echo(
        f"{rules}: stored (sha256 {loaded.sha256[:12]}); new rule versions: {new}{unchanged}"
    )
