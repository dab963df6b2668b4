"""The ``tenantcost`` command line: a thin shell over readers, the core and the writers.

Every user mistake surfaces as one ``error: ...`` line on stderr and exit code 2; warnings
as ``warning: ...`` lines. ``reconcile`` exits 1 when the cascade does not close.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import pandas as pd
import typer

from tenantcost import __version__
from tenantcost.allocate import AllocationResult, allocate_stream
from tenantcost.collect import (
    RESPONSES_FOLDER,
    collect_summary,
    collect_to_folder,
    load_costs,
    opencost_source,
)
from tenantcost.config.rules import RuleSet, load_rules
from tenantcost.errors import InputError, InputWarning
from tenantcost.progress import chunk_progress
from tenantcost.reconcile import cascade
from tenantcost.split import connect
from tenantcost.usage_source import FrameUsage, UsageSource, is_url, open_usage
from tenantcost.windows import Period, data_period
from tenantcost.writers.compare import compare_document, compare_table
from tenantcost.writers.files import prepare_out_dir, with_decimal_amount, write_outputs
from tenantcost.writers.json_output import reconciliation_document, result_document
from tenantcost.writers.text import cascade_table, clients_table, header, money, sources_table

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
    """Turn :class:`InputError` into one stderr line and exit code 2; print warnings plainly."""

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

    return wrapper


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
ConfigOpt = Annotated[Path, typer.Option("--config", help="The YAML rule file.")]
FromOpt = Annotated[
    str | None, typer.Option("--from", help="Period start, ISO 8601 (UTC if no offset).")
]
ToOpt = Annotated[str | None, typer.Option("--to", help="Period end (exclusive), ISO 8601.")]
MonthOpt = Annotated[str | None, typer.Option("--month", help="Period: a calendar month YYYY-MM.")]
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
        "(about 2.5 M usage rows a chunk) or a duration such as 1D or 6h.",
    ),
]


@contextmanager
def open_engine(engine: str, scheduler: str | None, workers: int | None) -> Iterator[Any]:
    """The chunk engine the options ask for (None = local), closed after the command."""
    if engine not in ("local", "dask"):
        raise InputError(f"--engine: expected local or dask, got '{engine}'")
    if engine == "local":
        if scheduler or workers:
            raise InputError("--scheduler and --workers need --engine dask")
        yield None
        return
    if scheduler and workers:
        raise InputError("give either --scheduler (existing cluster) or --workers (local one)")
    from tenantcost.engine_dask import DaskEngine

    with DaskEngine(scheduler=scheduler, workers=workers) as dask_engine:
        yield dask_engine


def parse_chunk(text: str) -> pd.Timedelta | None:
    """``auto`` (None: sized by the usage row count) or a positive duration."""
    if text == "auto":
        return None
    try:
        chunk = pd.Timedelta(text)
    except ValueError:
        raise InputError(f"--chunk: not a duration: '{text}' (for example 1D or 6h)") from None
    if chunk <= pd.Timedelta(0):
        raise InputError(f"--chunk: must be positive, got '{text}'")
    return chunk


class Inputs:
    """The loaded inputs of one run."""

    def __init__(
        self,
        config: Path,
        costs: list[Path] | None,
        usage: list[str] | None,
        *,
        opencost_url: str | None = None,
        step: str | None = None,
        period: Period | None = None,
        out: Path | None = None,
    ) -> None:
        self.config = config
        self.ruleset: RuleSet = load_rules(config)
        cost_input = load_costs(
            self.ruleset,
            config,
            costs,
            opencost_url=opencost_url,
            step=step,
            period=period,
            responses_dir=out / RESPONSES_FOLDER if out is not None else None,
        )
        self.cost_input = cost_input
        cost_paths = cost_input.paths
        usage_paths: list[Path | str] = [
            p if is_url(p) else Path(p) for p in (usage or self.ruleset.sources.usage)
        ]
        self.cost_paths: list[Path] = cost_paths
        self.usage_paths: list[Path | str] = usage_paths
        self.costs = cost_input.costs
        # One DuckDB connection per run: Parquet usage is scanned chunk by chunk through it.
        self.con = connect()
        self.usage_source: UsageSource | None = (
            open_usage(usage_paths, self.con) if usage_paths else None
        )
        prometheus = self.ruleset.sources.prometheus
        if self.usage_source is None and prometheus is not None:
            # Usage straight from Prometheus, for the period (or the cost data's span).
            from tenantcost.readers.prometheus import read_prometheus_usage

            span = period or data_period(self.costs)
            frame = read_prometheus_usage(prometheus, span.start, span.end)
            self.usage_source = FrameUsage(frame, origin=f"prometheus {prometheus.url}")
            usage_paths = []
        self.usage: pd.DataFrame | None = (
            self.usage_source.frame if isinstance(self.usage_source, FrameUsage) else None
        )
        self.usage_origin = ", ".join(str(p) for p in usage_paths) or "usage"

    def run(
        self,
        key: str | None,
        period: Period | None,
        *,
        detail: str = "period",
        lines_out: Path | None = None,
        chunk: pd.Timedelta | None = None,
        engine: Any = None,
    ) -> AllocationResult:
        """Allocate the inputs (chunk by chunk; ``detail`` 'period' or 'window')."""
        with chunk_progress("allocating") as progress:
            return allocate_stream(
                self.costs,
                self.usage_source,
                self.ruleset,
                key=key,
                period=period,
                detail=detail,
                chunk=chunk,
                lines_out=lines_out,
                progress=progress,
                rules_origin=str(self.config),
                con=self.con,
                engine=engine,
            )


def _responses_saved(inputs: Inputs, out: Path | None) -> None:
    """``--out`` of compare/reconcile only saves API responses: refuse it with files."""
    if out is None:
        return
    if inputs.cost_input.source is None:
        raise InputError("--out saves OpenCost API responses, but the costs came from files")
    count = len(inputs.cost_input.paths)
    typer.echo(f"saved {count} OpenCost response(s) to {out / RESPONSES_FOLDER}", err=True)


def resolve_period(month: str | None, start: str | None, end: str | None) -> Period | None:
    if month and (start or end):
        raise InputError("give either --month or --from/--to, not both")
    if month:
        return Period.month(month)
    if start or end:
        if not (start and end):
            raise InputError("--from and --to go together")
        return Period.between(start, end)
    return None


def _reference_detail(result: AllocationResult) -> str:
    return f"costs {money(result.cost_total)} + external {money(result.external_total)}"


def _check_format(fmt: str, allowed: tuple[str, ...]) -> str:
    if fmt not in allowed:
        raise InputError(f"--format: expected one of {', '.join(allowed)}, got '{fmt}'")
    return fmt


@app.command("allocate")
@user_errors
def allocate_command(
    config: ConfigOpt,
    costs: CostsOpt = None,
    usage: UsageOpt = None,
    key: KeyOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    month: MonthOpt = None,
    engine: EngineOpt = "local",
    scheduler: SchedulerOpt = None,
    workers: WorkersOpt = None,
    chunk: ChunkOpt = "auto",
    fmt: Annotated[str, typer.Option("--format", help="table (default), json or csv.")] = "table",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Also write clients.csv, lines.csv, residual.csv, unattributed.csv, "
            "exclusions.csv and reconciliation.json into this folder (and, with the OpenCost "
            "API, the raw responses into its responses/ folder).",
        ),
    ] = None,
    opencost_url: OpenCostUrlOpt = None,
    step: StepOpt = None,
) -> None:
    """Split the period's costs over clients and print per-client totals and the cascade."""
    _check_format(fmt, ("table", "json", "csv"))
    period = resolve_period(month, start, end)
    inputs = Inputs(
        config, costs, usage, opencost_url=opencost_url, step=step, period=period, out=out
    )
    lines_out = None
    if out is not None:
        prepare_out_dir(out)
        lines_out = out / "lines.csv"  # window-level lines, streamed chunk by chunk
    with open_engine(engine, scheduler, workers) as chunk_engine:
        result = inputs.run(
            key, period, lines_out=lines_out, chunk=parse_chunk(chunk), engine=chunk_engine
        )
    if fmt == "json":
        typer.echo(json.dumps(result_document(result), indent=2))
    elif fmt == "csv":
        totals = result.client_totals().assign(currency=result.currency)
        typer.echo(with_decimal_amount(totals).to_csv(index=False), nl=False)
    else:
        typer.echo(header(result))
        typer.echo("")
        typer.echo(clients_table(result))
        typer.echo("")
        typer.echo(sources_table(result))
        typer.echo("")
        typer.echo(cascade_table(cascade(result), result.currency, _reference_detail(result)))
    if out is not None:
        written = write_outputs(result, out)
        typer.echo(f"wrote {len(written)} files to {out}", err=True)


@app.command("compare")
@user_errors
def compare_command(
    config: ConfigOpt,
    keys: Annotated[
        str, typer.Option("--keys", help="Comma-separated keys, e.g. requests,cpu_seconds.")
    ],
    costs: CostsOpt = None,
    usage: UsageOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    month: MonthOpt = None,
    engine: EngineOpt = "local",
    scheduler: SchedulerOpt = None,
    workers: WorkersOpt = None,
    chunk: ChunkOpt = "auto",
    fmt: Annotated[str, typer.Option("--format", help="table (default) or json.")] = "table",
    opencost_url: OpenCostUrlOpt = None,
    step: StepOpt = None,
    out: ResponsesOutOpt = None,
) -> None:
    """Show each client's amount under each key and the change relative to the first key."""
    _check_format(fmt, ("table", "json"))
    key_list = [k.strip() for k in keys.split(",") if k.strip()]
    if len(key_list) < 2:
        raise InputError(f"--keys: give at least two keys separated by commas, got '{keys}'")
    period = resolve_period(month, start, end)
    inputs = Inputs(
        config, costs, usage, opencost_url=opencost_url, step=step, period=period, out=out
    )
    _responses_saved(inputs, out)
    with open_engine(engine, scheduler, workers) as chunk_engine:
        results = {
            k: inputs.run(k, period, chunk=parse_chunk(chunk), engine=chunk_engine)
            for k in key_list
        }
    if fmt == "json":
        typer.echo(json.dumps(compare_document(results), indent=2))
    else:
        typer.echo(compare_table(results))


@app.command("reconcile")
@user_errors
def reconcile_command(
    config: ConfigOpt,
    costs: CostsOpt = None,
    usage: UsageOpt = None,
    key: KeyOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    month: MonthOpt = None,
    engine: EngineOpt = "local",
    scheduler: SchedulerOpt = None,
    workers: WorkersOpt = None,
    chunk: ChunkOpt = "auto",
    fmt: Annotated[str, typer.Option("--format", help="table (default) or json.")] = "table",
    opencost_url: OpenCostUrlOpt = None,
    step: StepOpt = None,
    out: ResponsesOutOpt = None,
) -> None:
    """Print the reconciliation cascade; exit 1 unless the gap is exactly zero."""
    _check_format(fmt, ("table", "json"))
    period = resolve_period(month, start, end)
    inputs = Inputs(
        config, costs, usage, opencost_url=opencost_url, step=step, period=period, out=out
    )
    _responses_saved(inputs, out)
    with open_engine(engine, scheduler, workers) as chunk_engine:
        result = inputs.run(key, period, chunk=parse_chunk(chunk), engine=chunk_engine)
    casc = cascade(result)
    if fmt == "json":
        typer.echo(json.dumps(reconciliation_document(result), indent=2))
    else:
        typer.echo(header(result))
        typer.echo("")
        typer.echo(cascade_table(casc, result.currency, _reference_detail(result)))
    if not casc.closes:
        typer.echo(f"error: the cascade does not close: gap {casc.gap} micro-units", err=True)
        raise typer.Exit(1)


@app.command("report")
@user_errors
def report_command(
    config: ConfigOpt,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the report pack into.")],
    costs: CostsOpt = None,
    usage: UsageOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    month: MonthOpt = None,
    client: Annotated[
        list[str] | None,
        typer.Option("--client", help="Only this client's sheet; repeat for several."),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="Comma list of html, pdf, md (default: all three).")
    ] = "html,pdf,md",
    templates: Annotated[
        Path | None,
        typer.Option(
            "--templates",
            help="Folder of jinja2 templates that replace the default ones file by file "
            "(base.html, report.css, client_sheet.html, ...), to brand the sheets.",
        ),
    ] = None,
    decimals: Annotated[
        int | None,
        typer.Option(
            "--decimals",
            min=0,
            max=6,
            help="Decimals shown. Default: the currency's, more when a client's total would "
            "show fewer than two significant digits.",
        ),
    ] = None,
    opencost_url: OpenCostUrlOpt = None,
    step: StepOpt = None,
) -> None:
    """Per-client cost sheets, a finance summary and an index (HTML, PDF, Markdown)."""
    from tenantcost.report import ReportInputs, build_pack, parse_formats, write_pack

    formats = parse_formats(fmt)
    period = resolve_period(month, start, end)
    inputs = Inputs(
        config, costs, usage, opencost_url=opencost_url, step=step, period=period, out=out
    )
    report_inputs = ReportInputs(
        config=inputs.config,
        ruleset=inputs.ruleset,
        costs=inputs.costs,
        usage=inputs.usage,
        cost_paths=inputs.cost_paths,
        usage_paths=inputs.usage_paths,
        usage_origin=inputs.usage_origin,
    )
    pack = build_pack(report_inputs, period, clients=client, places=decimals)
    written = write_pack(pack, out, formats, templates=templates)
    typer.echo(
        f"wrote {len(written)} files for {len(pack.clients)} client(s) to {out} "
        f"(open {out / 'index.html'})",
        err=True,
    )


@app.command("collect")
@user_errors
def collect_command(
    opencost_url: OpenCostUrlOpt = None,
    start: FromOpt = None,
    end: ToOpt = None,
    month: MonthOpt = None,
    step: StepOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the raw responses (responses/*.json, responses/requests.tsv) and the "
            "canonical cost table costs.csv into this folder.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Rule file whose sources.opencost gives the URL and the request settings.",
        ),
    ] = None,
) -> None:
    """Read a period's costs from the OpenCost Allocation API; save them with --out."""
    period = resolve_period(month, start, end)
    ruleset = load_rules(config) if config is not None else None
    source = opencost_source(ruleset, opencost_url, step)
    if source is None:
        raise InputError(
            "no OpenCost URL: give --opencost-url, or --config with sources.opencost.url"
        )
    if period is None:
        raise InputError("collect needs a period: give --month or --from/--to")
    collection, written = collect_to_folder(source, period, out)
    typer.echo(collect_summary(source, collection))
    if out is not None:
        typer.echo(
            f"wrote {len(written)} files to {out}; read them back with --costs "
            f"{out / 'costs.csv'} (or --costs {out / RESPONSES_FOLDER}, not both)",
            err=True,
        )


@app.command("check-config")
@user_errors
def check_config_command(
    config: Annotated[Path, typer.Argument(help="The YAML rule file to validate.")],
    usage: UsageOpt = None,
) -> None:
    """Validate a rule file (and, with --usage, its keys and services against the data)."""
    ruleset = load_rules(config)
    if usage:
        from tenantcost.config.rules import check_against_usage

        con = connect()
        source = open_usage([p if is_url(p) else Path(p) for p in usage], con)
        check_against_usage(
            ruleset,
            source.metrics,
            source.services(con),
            origin=str(config),
            usage_origin=source.origin,
        )
    for version in ruleset.rules:
        counts = pd.Series([w.class_ for w in version.workloads]).value_counts()
        summary = ", ".join(f"{n} {c}" for c, n in counts.items())
        typer.echo(
            f"{version.id}: from {version.effective_from.date()}, {len(version.workloads)} "
            f"workload entries ({summary}), {len(version.external)} external, idle "
            f"{version.idle}, unmatched {version.unmatched}"
        )
    typer.echo(f"{config}: ok ({len(ruleset.rules)} rule version(s), currency {ruleset.currency})")


@app.command("podcost")
@user_errors
def podcost_command(
    pods: Annotated[
        Path,
        typer.Option(
            "--pods",
            help="Pod usage CSV/Parquet: window_start, window_end, node, namespace, "
            "controller_kind, controller, pod, cpu_request, cpu_usage, memory_request_gib, "
            "memory_usage_gib.",
        ),
    ],
    config: ConfigOpt,
    nodes: Annotated[
        Path | None,
        typer.Option(
            "--nodes",
            help="Node prices CSV/Parquet: node, pool, vcpu, memory_gib, allocatable_vcpu, "
            "allocatable_memory_gib, hourly_price (amortized net). Not needed with unit_prices.",
        ),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="table (default), json or csv.")
    ] = "table",
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the output to this file.")
    ] = None,
) -> None:
    """Workload costs from node prices (the OpenCost cost model, built in).

    The CSV output is a canonical cost file: `tenantcost allocate --costs FILE` reads it.
    """
    from tenantcost.podcost import podcost_from_files, write_podcost

    frame = podcost_from_files(nodes, pods, config)
    rendered = write_podcost(frame, fmt, out)
    if out is None:
        typer.echo(rendered, nl=False)
    else:
        typer.echo(f"wrote {len(frame)} rows to {out}", err=True)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"tenantcost {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_version_callback,
            is_eager=True,
            help="Show the version and exit.",
        ),
    ] = False,
) -> None:
    """tenantcost: per-client Kubernetes cost, reconciled."""


def main() -> None:
    """Console-script entry point."""
    app(prog_name="tenantcost")


if __name__ == "__main__":  # pragma: no cover
    main()
