"""``tenantcost unit-economics``, ``tenantcost catalog load`` and ``tenantcost fx load``.

``unit-economics``: cost, all-in cost, revenue and margin per plan and client. The command's
options are declared here, with the shared input options of every allocating command; from
files, the work runs through the one run sequence (:func:`tenantcost.cli.run.opened`: load
the inputs, open the engine, allocate, check the cascade); with ``--from-db`` from the
month's latest recorded run (nothing is allocated again). Then the pure core
(:mod:`tenantcost.economics`) computes and :mod:`tenantcost.report.economics_page` prints or
writes (the page, and the JSON, tables and CSV of :mod:`tenantcost.writers.economics`).
``catalog load`` keeps a catalog in the store (:mod:`tenantcost.store.catalog`).
Heavy modules are imported inside the commands, so ``tenantcost --help`` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tenantcost.cli.shell import CurrencyOpt, RunOptions, app, command, run_options, user_errors
from tenantcost.cli.store import EXIT_LOCKED, DataOpt, DbOpt, SettingsOpt, WaitOpt
from tenantcost.errors import InputError

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    from sqlalchemy import Connection

    from tenantcost.catalog import Catalog
    from tenantcost.config.rules import RuleSet
    from tenantcost.economics import GroupBy, MonthCosts, Policy
    from tenantcost.usage_source import UsageSource
    from tenantcost.windows import Period

FORMATS = ("table", "json", "csv", "html")

catalog_app = typer.Typer(help="The client catalog kept in the store.", no_args_is_help=True)
app.add_typer(catalog_app, name="catalog")
fx_app = typer.Typer(help="Exchange rates kept in the store.", no_args_is_help=True)
app.add_typer(fx_app, name="fx")


@command("unit-economics")
@run_options(config_required=False)
def unit_economics_command(
    options: RunOptions,
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog",
            help="Client catalog, CSV or Parquet: client, name, plan, segment, account_manager, "
            "monthly_revenue, currency, start, end (all but client optional). With --from-db: "
            "default the store's catalog.",
        ),
    ] = None,
    by: Annotated[str, typer.Option("--by", help="Group clients by plan (default) or segment.")] = (
        "plan"
    ),
    target_margin: Annotated[
        str | None,
        typer.Option(
            "--target-margin",
            help="Gross margin the price floors reach, a fraction such as 0.7 (default: "
            "pricing.target_margin of the rule file, else 0.7).",
        ),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="ISO 8601 time (default now): a month still in progress at this time is also "
            "projected to its end at the current run rate.",
        ),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="table (default), json, csv (one row per client), html.")
    ] = "table",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Also write unit_economics.json, unit_economics.html, clients.csv, plans.csv "
            "(or segments.csv) and unit_costs.csv into this folder. With --format html the "
            "page goes to the folder only: stdout names the file.",
        ),
    ] = None,
    from_db: Annotated[
        bool,
        typer.Option(
            "--from-db",
            help="The month's latest run recorded in the store (`tenantcost run`), its rules and "
            "the store's catalog; nothing is allocated again. Not with --config or other inputs.",
        ),
    ] = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    currency: CurrencyOpt = None,
) -> None:
    """Unit economics of a month: cost, all-in cost, revenue, margin and price floors per plan
    (or segment) and client; concentration; a projection while the month is in progress."""
    from tenantcost.cli.run import check_format

    check_format(fmt, FORMATS)
    choices = Choices(parse_by(by), target_margin, parse_as_of(as_of), fmt)
    if options.month is None:
        raise InputError("unit-economics needs --month YYYY-MM (the month to price)")
    if from_db:
        unit_economics_from_db(options, catalog, choices, (db, data, settings))
    else:
        if catalog is None:
            raise InputError("give --catalog FILE (or --from-db for the store's catalog)")
        unit_economics(options, catalog, choices)


@dataclass(frozen=True)
class Choices:
    """The command's own choices, checked before any input is read."""

    by: GroupBy
    target_text: str | None
    as_of: pd.Timestamp
    fmt: str


def unit_economics(options: RunOptions, catalog_path: Path, choices: Choices) -> None:
    """From files: the one run sequence allocates the month; then compute and print."""
    from tenantcost.catalog import read_catalog
    from tenantcost.cli.run import opened

    with opened(options, presents=True) as run:
        ruleset = run.inputs.ruleset
        catalog = read_catalog(catalog_path, ruleset.currency)
        shown = run.shown_currency  # clients with their own currency: their figures in it too
        own_codes = set(catalog.frame["currency"].astype("str")) - {shown, ""}
        allocation = run.allocate(days=bool(own_codes))  # in --currency or presentation:
        assert run.period is not None  # --month was given
        requests = usage_requests(run.inputs.usage, run.period, run.inputs.con)
    from tenantcost.economics import month_costs
    from tenantcost.presentation import present
    from tenantcost.windows import Period

    result = allocation.result
    month = Period.month(options.month or "")
    ledger = result.ledger or result
    own: dict[str, MonthCosts | None] = {
        code: month_costs(present(ledger, ruleset, code), month, requests)
        for code in sorted(own_codes)
    }  # one conversion per currency, exact
    _finish(options, choices, ruleset, month_costs(result, month, requests), catalog, None, own)


def unit_economics_from_db(
    options: RunOptions,
    catalog_path: Path | None,
    choices: Choices,
    where: tuple[str | None, str | None, Path | None],
) -> None:
    """From the store: the month's latest recorded run (its allocation and rules, as
    recorded), the store's catalog (or ``--catalog``), requests from the stored usage."""
    from tenantcost.catalog import read_catalog
    from tenantcost.economics import month_costs
    from tenantcost.split import connect
    from tenantcost.store.catalog import stored_catalog
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.report_figures import load_run_figures
    from tenantcost.store.run_fx import converted_month_costs, store_rates
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.stored import stored_usage
    from tenantcost.windows import Period

    inputs = {"--config": options.config, "--costs": options.costs, "--usage": options.usage,
              "--opencost-url": options.opencost_url}  # fmt: skip
    given = [option for option, value in inputs.items() if value]
    if given:
        raise InputError(f"--from-db reads the stored run: leave out {', '.join(given)}")
    assert options.month is not None
    period = Period.month(options.month)
    resolved = resolve_settings(*where)
    with current_store(resolved) as engine:
        with engine.connect() as connection:
            run_id = latest_run(connection, options.month)
            figures = load_run_figures(connection, run_id)
        currency = figures.result.currency
        catalog = read_catalog(catalog_path, currency) if catalog_path else stored_catalog(engine)
        con = connect()
        usage = stored_usage(Store(engine, DataDir(resolved.require_data())), period, con)
        requests = usage_requests(usage, period, con)
        with engine.connect() as connection:
            rates = store_rates(connection, figures.ruleset)
            ledger = month_costs(figures.result, period, requests)
            shown = _stored_currency(connection, run_id, figures.ruleset, options.currency)
            codes = set(catalog.frame["currency"].astype("str")) | {shown}
            converted = {code: converted_month_costs(connection, run_id, code, ledger)
                         for code in sorted(codes - {"", ledger.currency})}  # fmt: skip
    in_shown = ledger if shown == ledger.currency else converted[shown]
    assert in_shown is not None  # _stored_currency checked it
    own: dict[str, MonthCosts | None] = {
        code: costs for code, costs in converted.items() if code != shown
    }
    _finish(options, choices, figures.ruleset, in_shown, catalog, (rates.table, rates.source),
            own)  # fmt: skip


def _stored_currency(
    connection: Connection, run_id: str, ruleset: RuleSet, asked: str | None
) -> str:
    """The currency ``unit-economics --from-db`` prices the stored run in: ``--currency``,
    else ``presentation:`` when the run converted into it, else the ledger's. A currency the
    run did not convert into is one line naming those it did."""
    from tenantcost.presentation import presentation_currency
    from tenantcost.store.run_fx import run_conversions

    recorded = run_conversions(connection, run_id)
    if not asked:
        wanted = ruleset.presentation
        return wanted if wanted in recorded else ruleset.currency
    shown = presentation_currency(ruleset, asked)
    if shown != ruleset.currency and shown not in recorded:
        raise InputError(
            f"the month's run was not converted into {shown} (its conversions: "
            f"{', '.join(sorted(recorded)) or 'none'}): a run converts into presentation: and "
            "the catalog's client currencies",
            where="--currency",
        )
    return shown


def own_currency_figures(
    economics: Any,
    ruleset: RuleSet,
    catalog: Catalog,
    own: dict[str, MonthCosts | None],
    rates: tuple[pd.DataFrame, str] | None,
) -> pd.DataFrame:
    """``economics.clients`` with ``own_cost, own_all_in_cost, own_margin, own_margin_pct``:
    each client's figures in its own currency (the catalog's), as unit economics computed
    in that currency gives them: ``own[code]``, the month converted into it exactly (from
    the files, :func:`tenantcost.presentation.present`; from the store, as the run converted
    it), revenue in it, the residual shared the same way. One computation per currency, not
    per client. A currency ``own`` has no costs in (a run that could not convert into it)
    leaves its clients' own figures empty."""
    from tenantcost.economics import compute
    from tenantcost.presentation import revenue_rates

    clients = economics.clients
    shown = economics.costs.currency
    codes = clients["currency"].astype("str").where(clients["currency"] != "", shown)
    columns = {"cost": "own_cost", "all_in_cost": "own_all_in_cost", "margin": "own_margin",
               "margin_pct": "own_margin_pct"}  # fmt: skip
    out = clients.assign(**{new: clients[old] for old, new in columns.items()})
    month = economics.costs.month
    for code in sorted(set(codes) - {shown}):  # a few currencies
        mine = (codes == code).to_numpy()
        costs = own.get(code)
        if costs is None:
            out[list(columns.values())] = out[list(columns.values())].astype("float64")
            out.loc[mine, list(columns.values())] = float("nan")
            continue
        revenue = revenue_rates(catalog.frame, ruleset, code, month, rates)
        in_code = compute(costs, revenue, economics.policy)
        figures = in_code.clients.set_index("client")[list(columns)].rename(columns=columns)
        picked = figures.reindex(out.loc[mine, "client"]).to_numpy()
        out.loc[mine, list(columns.values())] = picked
    return out


def latest_run(connection: Connection, month: str) -> str:
    """The id of ``month``'s latest recorded run, or one ``error:`` line."""
    from sqlalchemy import select

    from tenantcost.store.models import Run, table

    r = table(Run).c
    run_id = connection.execute(
        select(r.id).where(r.month == month).order_by(r.started_at.desc()).limit(1)
    ).scalar()
    if run_id is None:
        raise InputError(f"{month} has no run in the store: `tenantcost run --month {month}` first")
    return str(run_id)


def _finish(
    options: RunOptions,
    choices: Choices,
    ruleset: RuleSet,
    costs: MonthCosts,
    catalog: Catalog,
    rates: tuple[pd.DataFrame, str] | None,
    own: dict[str, MonthCosts | None],
) -> None:
    """Compute, project, print; write the files with ``--out``. Revenue in a client's own
    currency is converted into the costs' at the month's rate (``rates``: the store's; None:
    the rule file's), :func:`tenantcost.presentation.revenue_rates`; each client is also
    shown in its own currency from ``own`` (:func:`own_currency_figures`). With ``--out DIR
    --format html`` the page is written to the folder only (stdout names the file): a page
    printed to a terminal after writing it is noise."""
    from tenantcost.economics import compute, project
    from tenantcost.presentation import revenue_rates
    from tenantcost.report import economics_page as page
    from tenantcost.writers import economics as writer

    policy = pricing_policy(ruleset, choices.target_text, choices.by)
    revenue = revenue_rates(catalog.frame, ruleset, costs.currency, costs.month, rates)
    economics = compute(costs, revenue, policy)
    economics.clients = own_currency_figures(economics, ruleset, catalog, own, rates)
    economics.projection = project(economics, choices.as_of)
    writer.warn_partial(economics)
    page_to_folder = options.out is not None and choices.fmt == "html"
    if not page_to_folder:
        typer.echo(page.render(economics, choices.fmt), nl=choices.fmt == "table")
    if options.out is not None:
        written = page.write_files(economics, options.out)
        if page_to_folder:
            typer.echo(str(options.out / "unit_economics.html"))
        typer.echo(f"wrote {len(written)} files to {options.out}", err=True)


@catalog_app.command("load")
@user_errors
def catalog_load_command(
    path: Annotated[Path, typer.Argument(help="The catalog file, CSV or Parquet.", metavar="FILE")],
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Keep a client catalog in the store (checked as unit-economics checks it); the latest
    load is the store's catalog."""
    from tenantcost.store.actor import os_actor
    from tenantcost.store.catalog import load_catalog
    from tenantcost.store.lock import StoreLocked, write_transaction
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    resolved = resolve_settings(db, data, settings)
    try:
        with current_store(resolved) as engine, write_transaction(engine, wait) as connection:
            loaded = load_catalog(connection, path, os_actor())
    except StoreLocked as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_LOCKED) from None
    if loaded.already_loaded:
        typer.echo(f"{path}: already the store's catalog (sha256 {loaded.sha256[:12]})")
        return
    typer.echo(
        f"{path}: stored as the store's catalog, {loaded.clients} clients "
        f"(load {loaded.load_id}, sha256 {loaded.sha256[:12]})"
    )


@fx_app.command("load")
@user_errors
def fx_load_command(
    source: Annotated[
        str,
        typer.Argument(
            help="A rates file or folder (CSV or Parquet: date, base, quote, rate; 1 base = "
            "rate quote), or 'ecb' for the ECB reference rates bundled offline.",
            metavar="FILE|ecb",
        ),
    ],
    since: Annotated[
        str | None,
        typer.Option("--since", help="Keep the rates from this date (YYYY-MM-DD) on."),
    ] = None,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Keep exchange rates in the store, for run, close and the service (a later load wins
    for the same date and currency pair; docs/currency.md)."""
    from datetime import date

    from tenantcost.store.actor import os_actor
    from tenantcost.store.fx_rates import load_rates
    from tenantcost.store.lock import StoreLocked, write_transaction
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    first = None
    if since is not None:
        try:
            first = date.fromisoformat(since.strip())
        except ValueError:
            raise InputError(f"--since: expected a date as YYYY-MM-DD, got '{since}'") from None
    resolved = resolve_settings(db, data, settings)
    try:
        with current_store(resolved) as engine, write_transaction(engine, wait) as connection:
            loaded = load_rates(connection, source, os_actor(), first)
    except StoreLocked as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_LOCKED) from None
    what = (
        f"{loaded.rates} rates from {loaded.first} to {loaded.last}, "
        f"{len(loaded.currencies)} currencies"
    )
    if loaded.already_loaded:
        typer.echo(f"{source}: already in the store ({what}; load {loaded.load_id})")
        return
    typer.echo(f"{source}: stored {what} (load {loaded.load_id}, sha256 {loaded.sha256[:12]})")


def parse_by(text: str) -> GroupBy:
    from tenantcost.economics import GroupBy

    try:
        return GroupBy(text)
    except ValueError:
        raise InputError(f"--by: expected plan or segment, got '{text}'") from None


def parse_as_of(text: str | None) -> pd.Timestamp:
    """``--as-of`` (naive = UTC), default now."""
    import pandas as pd

    from tenantcost.windows import parse_utc

    if text is None:
        return pd.Timestamp.now(tz="UTC")
    at = parse_utc(text, "--as-of")
    if pd.isna(at):
        raise InputError(f"--as-of: not an ISO 8601 time: '{text}'")
    return pd.Timestamp(at)


def pricing_policy(ruleset: RuleSet, target_text: str | None, by: GroupBy) -> Policy:
    """The rule file's ``pricing:`` with ``--target-margin`` over its ``target_margin``."""
    from decimal import Decimal, InvalidOperation
    from fractions import Fraction

    from tenantcost.economics import policy_for

    pricing = ruleset.pricing
    target = None
    if target_text is not None:
        try:
            value = Decimal(target_text.strip())
        except InvalidOperation:
            value = Decimal("NaN")
        if not value.is_finite() or not Decimal(0) <= value < Decimal(1):
            raise InputError(
                f"--target-margin: expected a fraction from 0 up to (not including) 1 such as "
                f"0.7, got '{target_text}'"
            )
        target = Fraction(value)
    return policy_for(pricing, by, target)


def usage_requests(
    usage: UsageSource | None, period: Period, con: duckdb.DuckDBPyConnection
) -> pd.DataFrame | None:
    """Each client's requests over every service in ``period`` (one aggregate query over the
    usage source the allocation read); None when the usage has no ``requests`` column."""
    from tenantcost.economics import REQUESTS
    from tenantcost.usage_source import client_sums

    return client_sums(usage, period, con, REQUESTS)
