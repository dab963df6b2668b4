"""``tenantcost budget plan`` and ``tenantcost budget load``: monthly budgets per client.

``plan`` reads the issued history from the store (:mod:`tenantcost.store.budgets`), hands it
to the pure method (:mod:`tenantcost.budget`) and prints it (:mod:`tenantcost.writers.budget`);
its CSV is a file ``load`` reads back unchanged. ``load`` stores a version of a month's budget
under the store's write lock. Heavy modules are imported inside the commands, so
``tenantcost --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tenantcost.cli.shell import app, user_errors
from tenantcost.cli.store import DataOpt, DbOpt, SettingsOpt, WaitOpt, locked_exits_4
from tenantcost.errors import InputError

FORMATS = ("table", "json", "csv")

budget_app = typer.Typer(
    help="Monthly budgets per client (low, expected, high) kept in the store.",
    no_args_is_help=True,
)
app.add_typer(budget_app, name="budget")

BudgetMonthOpt = Annotated[
    str, typer.Option("--month", help="The budget's calendar month YYYY-MM (may be in the future).")
]


def checked_month(month: str) -> str:
    """``--month`` as ``YYYY-MM``, or one ``error:`` line."""
    from tenantcost.windows import Period

    Period.month(month)
    return month


@budget_app.command("plan")
@user_errors
def budget_plan_command(
    month: BudgetMonthOpt,
    history: Annotated[
        int,
        typer.Option(
            "--history",
            min=1,
            max=120,
            help="Issued months before --month to read (latest revisions).",
        ),
    ] = 6,
    growth: Annotated[
        str | None,
        typer.Option(
            "--growth",
            help="low=RATE,expected=RATE,high=RATE (e.g. low=-0.05,expected=0.02,high=0.1): "
            "these month-over-month rates replace g-s, g and g+s of the default method.",
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option("--format", help="table (default), json, or csv (what `budget load` reads)."),
    ] = "table",
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the output to this file instead.")
    ] = None,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
) -> None:
    """Propose each client's low, expected and high budget for a month from its amounts in
    the last issued months (method: docs/budgets.md); a client with its own currency in the
    catalog in it, as the issued runs converted its months."""
    from tenantcost.budget import parse_growth, plan_budgets
    from tenantcost.cli.run import check_format
    from tenantcost.errors import warn
    from tenantcost.store import budgets
    from tenantcost.store.catalog import store_currency
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.writers import budget as writer

    check_format(fmt, FORMATS)
    checked_month(month)
    rates = parse_growth(growth) if growth is not None else None
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine, engine.connect() as connection:
        currency = store_currency(connection)
        months = budgets.issued_months(connection, month, history)
        frame = budgets.issued_history(connection, months)
        frame, left = budgets.own_currency_history(connection, frame, months, currency)
        clients = budgets.catalog_clients(connection)
    if not months:
        warn(f"no month before {month} is issued (closed) yet: every client is no_history")
    if left:
        warn(f"{len(left)} client(s) planned in {currency}, not in their own currency: a month "
             f"of their history was issued without a conversion into it ({', '.join(left[:5])}"
             f"{', ...' if len(left) > 5 else ''})")  # fmt: skip
    plan = plan_budgets(frame, clients, rates)
    own = frame.drop_duplicates("client").set_index("client")["currency"]
    plan["currency"] = plan["client"].map(own).fillna("").astype(str)
    if fmt == "json":
        rendered = writer.plan_json(plan, month, currency, history, months, rates)
    elif fmt == "csv":
        rendered = writer.plan_csv(plan)
    else:
        rendered = writer.plan_table(plan, month, currency, months)
    if out is None:
        typer.echo(rendered, nl=False)
        return
    out.write_text(rendered, encoding="utf-8")
    typer.echo(f"wrote the budget plan of {len(plan)} clients to {out}", err=True)


@budget_app.command("load")
@user_errors
@locked_exits_4
def budget_load_command(
    path: Annotated[
        Path,
        typer.Argument(help="CSV: client, low, expected, high (currency units).", metavar="FILE"),
    ],
    month: BudgetMonthOpt,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Store a month's budget (a new version; the old one stays, the latest is in force). A
    closed month's budget does not change."""
    from tenantcost.store.actor import os_actor
    from tenantcost.store.budgets import load_budget
    from tenantcost.store.lock import write_transaction
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    checked_month(month)
    if not path.is_file():
        raise InputError("file not found", file=str(path))
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine, write_transaction(engine, wait) as connection:
        loaded = load_budget(connection, path, month, os_actor())
    if loaded.already_loaded:
        typer.echo(f"{path}: already {month}'s budget in force (version {loaded.version})")
        return
    typer.echo(
        f"{path}: stored as version {loaded.version} of {month}'s budget, {loaded.clients} "
        f"clients (sha256 {loaded.sha256[:12]})"
    )
