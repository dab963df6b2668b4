"""The store's commands: ``db upgrade``, ``rules load``, ``ingest usage|costs|billing`` (``run`` and
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
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

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
ingest_app = typer.Typer(
    help="Raw usage, costs and billing data into the store, one atomic batch each: `ingest "
    "usage`, `ingest costs`, `ingest billing`, or `ingest --since-last` (the hourly job).",
    no_args_is_help=True,
    invoke_without_command=True,
)
app.add_typer(db_app, name="db")
app.add_typer(rules_app, name="rules")
app.add_typer(ingest_app, name="ingest")


def _register(
    group: typer.Typer, name: str
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        group.command(name)(user_errors(locked_exits_4(func)))
        return func

    return decorate


def locked_exits_4(func: Callable[..., None]) -> Callable[..., None]:
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


UsageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--usage",
        help="Usage CSV/Parquet (window_start, window_end, service, client, metrics...), "
        "a file, folder or URL; repeat for several.",
        show_default=False,
    ),
]
PrometheusOpt = Annotated[
    bool,
    typer.Option(
        "--prometheus",
        help="Usage from sources.prometheus of the rule file (--config, else the latest "
        "stored rule file), queried for the period.",
    ),
]
IngestConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="Rule file whose sources: apply (Prometheus, OpenCost settings). Default: the "
        "latest rule file stored in the store.",
        show_default=False,
    ),
]
IngestCostsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--costs",
        help="OpenCost JSON response, OpenCost CSV export, or canonical CSV/Parquet; a "
        "file or a folder; repeat for several.",
        show_default=False,
    ),
]
IngestOpenCostOpt = Annotated[
    str | None,
    typer.Option(
        "--opencost-url",
        help="Costs from the OpenCost API at this URL for the period (other settings: "
        "sources.opencost of --config, else of the latest stored rule file).",
        show_default=False,
    ),
]


@_register(ingest_app, "usage")
def ingest_usage_command(
    usage: UsageOpt = None,
    prometheus: PrometheusOpt = False,
    config: IngestConfigOpt = None,
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
    """Ingest usage as one batch (validated as `allocate` validates it): files or Prometheus."""
    if bool(usage) == prometheus:
        raise_input("give --usage PATH... or --prometheus" if not usage
                    else "give either --usage or --prometheus, not both")  # fmt: skip
    if usage and config is not None:
        raise_input("--config applies to --prometheus, not to --usage files")
    request = _Request(start, end, month, mode, dry_run, db, data, settings, wait)
    _ingest(request, Source.PROMETHEUS if prometheus else Source.FILES, usage or [], config)


@_register(ingest_app, "costs")
def ingest_costs_command(
    costs: IngestCostsOpt = None,
    opencost_url: IngestOpenCostOpt = None,
    config: IngestConfigOpt = None,
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
    """Ingest costs as one batch (read as `allocate` reads them): files or the OpenCost API."""
    if bool(costs) == bool(opencost_url):
        raise_input("give --costs PATH... or --opencost-url URL" if not costs
                    else "give either --costs or --opencost-url, not both")  # fmt: skip
    if costs and config is not None:
        raise_input("--config applies to --opencost-url, not to --costs files")
    request = _Request(start, end, month, mode, dry_run, db, data, settings, wait)
    source = Source.OPENCOST if opencost_url else Source.FILES
    _ingest(request, source, costs or [], config, opencost_url, kind="costs")


IngestBillingOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--billing",
        help="Billing data: FOCUS 1.0-1.3 or AWS CUR 2.0 (CSV, gzip CSV or Parquet), a file, "
        "a folder or a hive-partitioned dataset; repeat for several. Replaces what earlier "
        "billing batches held for the same billing period and billing account.",
        show_default=False,
    ),
]


KeepDuplicatesOpt = Annotated[
    bool,
    typer.Option(
        "--keep-duplicates",
        help="Keep lines that repeat another line exactly (every column, across all the "
        "--billing files). By default such a line is refused (exit 2), naming both places: "
        "it is almost always a file read twice. Only for exports that really bill identical "
        "lines (docs/store.md#billing-data-in-the-store).",
    ),
]


@_register(ingest_app, "billing")
def ingest_billing_command(
    billing: IngestBillingOpt = None,
    dry_run: DryRunOpt = False,
    keep_duplicates: KeepDuplicatesOpt = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Ingest billing data as one batch (read as `allocate --billing` reads it, in the stored
    rule file's currency): a restated export replaces the earlier one. Refused in one line
    (file, row, column; exit 2), --dry-run too: a line's amount beyond 2^63 micro-units, a
    billing period's total beyond 10^18 micro-units, a time outside 2000-01-01 .. 2100-01-01,
    a control character in stored text, a malformed CSV line, an exact duplicate line."""
    from tenantcost.store.actor import os_actor
    from tenantcost.store.billing_ingest import ingest_billing
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    if not billing:
        raise_input("give --billing PATH (a file or a folder; repeat for several)")
    resolved = resolve_settings(db, data, settings)
    with current_store(resolved) as engine:
        store = Store(engine, DataDir(resolved.require_data()))
        done = ingest_billing(store, billing, actor=os_actor(), dry_run=dry_run, wait=wait,
                              keep_duplicates=keep_duplicates)  # fmt: skip
    typer.echo(_ingested_line(done))


class Source(StrEnum):
    """Where an ``ingest`` reads from."""

    FILES = "files"
    PROMETHEUS = "prometheus"
    OPENCOST = "opencost"


@dataclass(frozen=True)
class _Request:
    """The options every ``ingest usage|costs`` takes."""

    start: str | None
    end: str | None
    month: str | None
    mode: str
    dry_run: bool
    db: str | None
    data: str | None
    settings: Path | None
    wait: float


def raise_input(message: str) -> NoReturn:
    from tenantcost.errors import InputError

    raise InputError(message)


def _ingest(
    request: _Request,
    source: Source,
    paths: list[str],
    config: Path | None,
    opencost_url: str | None = None,
    kind: str = "usage",
) -> None:
    from tenantcost.cli.run import resolve_period
    from tenantcost.store import ingest as batches
    from tenantcost.store import live, samples
    from tenantcost.store.actor import os_actor
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings

    resolved = resolve_settings(request.db, request.data, request.settings)
    period = resolve_period(request.month, request.start, request.end)
    batches.check_mode(request.mode)
    if source is not Source.FILES and period is None:
        option = "--prometheus" if source is Source.PROMETHEUS else "--opencost-url"
        raise_input(f"{option} needs a period: give --month or --from/--to")
    options = live.Options(request.mode, os_actor(), request.dry_run, request.wait)
    with current_store(resolved) as engine:
        store = Store(engine, DataDir(resolved.require_data()))
        if source is Source.FILES:
            ingest = samples.ingest_usage_files if kind == "usage" else batches.ingest_costs
            done = ingest(store, paths, period=period, mode=options.mode, actor=options.actor,
                          dry_run=options.dry_run, wait=options.wait)  # fmt: skip
        else:
            assert period is not None
            ruleset = live.ruleset_for_sources(engine, config)
            if source is Source.PROMETHEUS:
                ruleset = live.require_prometheus(ruleset, config)
                for each in live.ingest_prometheus(store, ruleset, period, options):
                    _report(each)  # the counters' batch, then the gauges' samples
                return
            else:
                opencost = live.opencost(ruleset, opencost_url)
                assert opencost is not None
                done = live.ingest_opencost(store, opencost, period, options)
    _warn(done)
    typer.echo(_ingested_line(done))


@ingest_app.callback()
def _ingest_group(
    ctx: typer.Context,
    since_last: Annotated[
        bool,
        typer.Option(
            "--since-last",
            help="The hourly job: ingest every complete hour since the last ingested one, "
            "per source (costs from --opencost-url, usage from --prometheus; neither: every "
            "live source the rule file configures).",
        ),
    ] = False,
    opencost_url: IngestOpenCostOpt = None,
    prometheus: PrometheusOpt = False,
    lookback: Annotated[
        int,
        typer.Option(
            "--lookback",
            min=0,
            max=24 * 31,
            metavar="HOURS",
            help="With --since-last: ask for the last HOURS complete hours again too (the "
            "source's late revisions are taken, idempotently), and start HOURS back when "
            "nothing was ingested from the source yet (the Helm chart's CronJob: 6).",
        ),
    ] = 0,
    config: IngestConfigOpt = None,
    now: Annotated[
        str | None,
        typer.Option("--now", hidden=True, help="Tests and replays: the time taken as now."),
    ] = None,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    wait: WaitOpt = 0.0,
) -> None:
    """Raw usage and costs into the store (``--since-last``: the hourly job)."""
    given = (since_last or opencost_url or prometheus or lookback or config or now or db
             or data or settings)  # fmt: skip
    if ctx.invoked_subcommand is not None:
        if given or wait:
            sub = ctx.invoked_subcommand
            raise_input(f"options before `{sub}` belong to `ingest --since-last`; put them "
                        f"after `ingest {sub}`")  # fmt: skip
        return
    if not since_last:
        raise_input("give a sub-command (`ingest usage`, `ingest costs`, `ingest billing`) or "
                    "--since-last")  # fmt: skip
    _since_last(opencost_url, prometheus, lookback, config, now, db, data, settings, wait)


_ingest_group_command = ingest_app.registered_callback
assert _ingest_group_command is not None
_ingest_group_command.callback = user_errors(locked_exits_4(_ingest_group))


def _since_last(
    opencost_url: str | None,
    prometheus: bool,
    lookback: int,
    config: Path | None,
    now: str | None,
    db: str | None,
    data: str | None,
    settings: Path | None,
    wait: float,
) -> None:
    """``ingest --since-last``: one line per source (a batch, up to date, or nothing new)."""
    import pandas as pd

    from tenantcost.store import live
    from tenantcost.store.actor import os_actor
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.windows import parse_utc

    resolved = resolve_settings(db, data, settings)
    at = parse_utc(now, "--now") if now is not None else pd.Timestamp.now(tz="UTC")
    with current_store(resolved) as engine:
        store = Store(engine, DataDir(resolved.require_data()))
        ruleset = live.ruleset_for_sources(engine, config)
        explicit = prometheus or opencost_url is not None
        costs = live.opencost(ruleset, opencost_url) if opencost_url or not explicit else None
        usage = prometheus or (not explicit and ruleset is not None
                               and ruleset.sources.prometheus is not None)  # fmt: skip
        if usage:
            ruleset = live.require_prometheus(ruleset, config)
        if costs is None and not usage:
            raise_input("--since-last: no live source: give --opencost-url URL or "
                        "--prometheus, or set sources.opencost.url or sources.prometheus in "
                        "the rule file")  # fmt: skip
        done = live.since_last(store, ruleset=ruleset, usage=usage, costs=costs, now=at,
                               options=live.Options("replace", os_actor(), wait=wait),
                               lookback=lookback)  # fmt: skip
    for item in done:
        _report(item)


def _report(item: Any) -> None:
    """One ingest's warnings and line, or why a source was skipped."""
    from tenantcost.store import live

    if not isinstance(item, live.Skipped):
        _warn(item)
    typer.echo(item.reason if isinstance(item, live.Skipped) else _ingested_line(item))


def _warn(done: Ingested) -> None:
    """What the batch could not be checked against yet: ``warning: ...`` on stderr."""
    from tenantcost.errors import warn

    for note in done.warnings:
        warn(note)


def _ingested_line(done: Ingested) -> str:
    """One line: what the batch holds, or would hold."""
    from tenantcost.timefmt import iso_z_seconds

    cell = {"usage": "(window, service)", "costs": "(window, workload)",
            "billing": "(billing period, billing account)"}[done.kind]  # fmt: skip
    spans = "billing periods" if done.kind == "billing" else "windows"
    span = f"{spans} {iso_z_seconds(done.window_from)} to {iso_z_seconds(done.window_to)}"
    skipped = f"; {done.skipped} row(s) outside the period left out" if done.skipped else ""
    if done.dry_run:
        return (f"{done.kind}: dry run, nothing written: {done.rows} rows, {done.cells} {cell} "
                f"cells, {span}{skipped}")  # fmt: skip
    if done.unchanged:
        return (f"{done.kind}: nothing would change, nothing written: batch {done.uid[:12]} "
                f"already holds these {done.rows} rows of {done.cells} {cell} cells, and they "
                f"count ({span}, sha256 {done.sha256[:12]}){skipped}")  # fmt: skip
    verb = "replaced" if done.mode == "replace" else "added to"
    earlier = f"; {verb} {done.replaced} cell(s) held by earlier batches" if done.replaced else ""
    cleaned = f"; removed {done.cleaned} leftover file(s)" if done.cleaned else ""
    return (f"{done.kind}: batch {done.uid[:12]} committed ({done.mode}): {done.rows} rows, "
            f"{done.cells} {cell} cells, {done.files} file(s), {span}, sha256 "
            f"{done.sha256[:12]}{earlier}{skipped}{cleaned}")  # fmt: skip
