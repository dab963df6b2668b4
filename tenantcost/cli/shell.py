"""The shell every command shares: the app, its error handling and the shared options.

Nothing here imports pandas, DuckDB or the readers: ``tenantcost --help`` and ``check-config``
must start fast, so the heavy modules are imported inside the commands that use them.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar, get_type_hints

import typer

from tenantcost.errors import InputError, InputWarning, InternalError

app = typer.Typer(
    name="tenantcost",
    help=(
        "What each client of a multi-tenant SaaS costs on Kubernetes: OpenCost workload costs "
        "split by application usage with a dated rule, reconciled to the micro-unit."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

P = ParamSpec("P")
R = TypeVar("R")


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    prefix = "warning: " if issubclass(category, InputWarning) else f"{category.__name__}: "
    typer.echo(f"{prefix}{message}", err=True)


def user_errors(func: Callable[P, R]) -> Callable[P, R]:
    """One stderr line, never a traceback: :class:`InputError` exits 2, :class:`InternalError`
    (a broken invariant, such as a cascade that does not close) exits 3; warnings print plainly.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with warnings.catch_warnings():
            warnings.simplefilter("always", InputWarning)
            warnings.showwarning = _show_warning
            try:
                return func(*args, **kwargs)
            except InputError as exc:
                typer.echo(f"error: {exc.one_line()}", err=True)
                raise typer.Exit(2) from None
            except InternalError as exc:
                typer.echo(f"internal error: {' '.join(str(exc).split())}", err=True)
                raise typer.Exit(3) from None

    return wrapper


def command(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a command under ``name`` with the shared error handling."""

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        app.command(name)(user_errors(func))
        return func

    return decorate


CostsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--costs",
        help="OpenCost JSON response, OpenCost CSV export, or canonical CSV/Parquet; a file or "
        "a folder; repeat for several. Default: sources.costs of the rule file.",
    ),
]
UsageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--usage",
        help="Usage CSV/Parquet (window_start, window_end, service, client, metrics...); "
        "repeat for several. Default: sources.usage of the rule file.",
    ),
]
BillingOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--billing",
        help="Billing data: FOCUS 1.0-1.3 or AWS CUR 2.0 (CSV, gzip CSV or Parquet; a file, a "
        "folder or a hive dataset); repeat for several. Default: billing.sources of the rule "
        "file. Costs are then repriced to the billed effective cost and the run closes on the "
        "invoice (docs/billing-data.md).",
    ),
]
AllowUnbilledOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unbilled",
        help="With billing data: keep OpenCost's estimate for periods the billing data does "
        "not cover yet (marked as an estimate on every output) instead of an error.",
    ),
]
ConfigOpt = Annotated[Path, typer.Option("--config", help="The YAML rule file.")]
OptionalConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="The YAML rule file (required, except with --from-db)."),
]
FromOpt = Annotated[
    str | None, typer.Option("--from", help="Period start, ISO 8601 (UTC if no offset).")
]
ToOpt = Annotated[str | None, typer.Option("--to", help="Period end (exclusive), ISO 8601.")]
MonthOpt = Annotated[str | None, typer.Option("--month", help="Period: a calendar month YYYY-MM.")]
CurrencyOpt = Annotated[
    str | None,
    typer.Option(
        "--currency",
        help="Show the amounts in this ISO 4217 currency (EUR, GBP, JPY), converted exactly "
        "with the rule file's fx: rates and policy (docs/currency.md). Default: the rule "
        "file's presentation:, else the ledger currency.",
    ),
]
KeyOpt = Annotated[
    str | None,
    typer.Option(
        "--key",
        help="Split every shared workload and external cost by this usage column (or 'even').",
    ),
]
OpenCostUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--opencost-url",
        help="Read costs from the OpenCost API at this URL (e.g. http://localhost:9003) for the "
        "period of --month or --from/--to. Default: sources.opencost.url of the rule file "
        "(used when --costs is not given).",
    ),
]
StepOpt = Annotated[
    str | None,
    typer.Option(
        "--step",
        help="OpenCost API: length of one cost window (1h, 1d...). Default: "
        "sources.opencost.step, else 1h.",
    ),
]
ResponsesOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="With the OpenCost API: save the raw responses used into this folder's "
        "responses/ folder.",
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="local (default: time chunks in this process) or dask (chunks as tasks on a Dask "
        "cluster; results identical to the unit).",
    ),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option("--scheduler", help="With --engine dask: an existing scheduler, tcp://HOST:PORT."),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option("--workers", help="With --engine dask: start a local cluster of N processes."),
]
ChunkOpt = Annotated[
    str,
    typer.Option(
        "--chunk",
        help="Time chunk read and split at once (memory is bounded by one chunk): 'auto' "
        "(about 2.5 M usage rows a chunk, 1 M when --out writes lines.csv) or a duration "
        "such as 1D or 6h.",
    ),
]


@dataclass(frozen=True)
class RunOptions:
    """The options every allocating command shares: where the inputs come from, the period,
    and how the chunks run. ``out`` is the command's own ``--out`` (OpenCost API responses
    are saved into its ``responses/`` folder)."""

    config: Path | None
    """``None`` only where the command makes it optional (``report --from-db``)."""
    costs: list[Path] | None = None
    usage: list[str] | None = None
    start: str | None = None
    end: str | None = None
    month: str | None = None
    opencost_url: str | None = None
    step: str | None = None
    engine: str = "local"
    scheduler: str | None = None
    workers: int | None = None
    chunk: str = "auto"
    out: Path | None = None
    billing: list[str] | None = None
    allow_unbilled: bool = False
    currency: str | None = None
    """The command's own ``--currency`` (commands that present amounts declare it)."""


_INPUT_OPTIONS: list[tuple[str, Any, Any]] = [
    ("costs", CostsOpt, None),
    ("usage", UsageOpt, None),
    ("start", FromOpt, None),
    ("end", ToOpt, None),
    ("month", MonthOpt, None),
    ("opencost_url", OpenCostUrlOpt, None),
    ("step", StepOpt, None),
    ("billing", BillingOpt, None),
    ("allow_unbilled", AllowUnbilledOpt, False),
]
_ENGINE_OPTIONS: list[tuple[str, Any, Any]] = [
    ("engine", EngineOpt, "local"),
    ("scheduler", SchedulerOpt, None),
    ("workers", WorkersOpt, None),
    ("chunk", ChunkOpt, "auto"),
]
_FIELDS = frozenset(f.name for f in fields(RunOptions))


def run_options(
    *, engine: bool = True, config_required: bool = True
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command the shared options (``--config``, the inputs, the period and, with
    ``engine``, the chunk engine); the command receives them as one :class:`RunOptions`,
    its first parameter, followed by its own options (``--out`` is also copied into the
    options).

    The command's signature is built here, so the shared options are declared once. Without
    ``config_required``, ``--config`` may be left out (the command checks it; ``report
    --from-db`` reads the stored run's rules).
    """

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        hints = get_type_hints(func, include_extras=True)
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints[p.name])
            for p in list(inspect.signature(func).parameters.values())[1:]
        ]
        shared = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=hint, default=dflt)
            for name, hint, dflt in [*_INPUT_OPTIONS, *(_ENGINE_OPTIONS if engine else [])]
        ]
        config = inspect.Parameter(
            "config",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=ConfigOpt if config_required else OptionalConfigOpt,
            default=inspect.Parameter.empty if config_required else None,
        )
        required = [p for p in own if p.default is inspect.Parameter.empty]
        optional = [p for p in own if p.default is not inspect.Parameter.empty]
        parameters = [config, *required, *shared, *optional]

        names = {p.name for p in own}

        @functools.wraps(func)
        def wrapper(**kwargs: Any) -> None:
            options = RunOptions(**{k: v for k, v in kwargs.items() if k in _FIELDS})
            func(options, **{k: v for k, v in kwargs.items() if k in names})

        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper

    return decorate
