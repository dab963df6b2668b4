"""The commands: each declares its own options and hands over to the run sequence.

Heavy modules (pandas, DuckDB, the readers, the report renderer) are imported inside each
command, so ``tenantcost --help`` and ``check-config`` start in a fraction of a second.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tenantcost import __version__
from tenantcost.cli.shell import (
    ConfigOpt,
    CurrencyOpt,
    FromOpt,
    KeyOpt,
    MonthOpt,
    OpenCostUrlOpt,
    ResponsesOutOpt,
    RunOptions,
    StepOpt,
    ToOpt,
    UsageOpt,
    app,
    command,
    run_options,
    user_errors,
)
from tenantcost.cli.store import DataOpt, DbOpt, SettingsOpt
from tenantcost.report.sheet_view import SheetView

if TYPE_CHECKING:
    from tenantcost.config.billing import Billing

TableJsonOpt = Annotated[str, typer.Option("--format", help="table (default) or json.")]


@command("allocate")
@run_options()
def allocate_command(
    options: RunOptions,
    key: KeyOpt = None,
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
    currency: CurrencyOpt = None,
) -> None:
    """Split the period's costs over clients and print per-client totals and the cascade."""
    from tenantcost.cli import run

    run.allocate(options, key, fmt)


@command("compare")
@run_options()
def compare_command(
    options: RunOptions,
    keys: Annotated[
        str, typer.Option("--keys", help="Comma-separated keys, e.g. requests,cpu_seconds.")
    ],
    fmt: TableJsonOpt = "table",
    out: ResponsesOutOpt = None,
    currency: CurrencyOpt = None,
) -> None:
    """Show each client's amount under each key and the change relative to the first key."""
    from tenantcost.cli import run

    run.compare(options, keys, fmt)


@command("reconcile")
@run_options()
def reconcile_command(
    options: RunOptions,
    key: KeyOpt = None,
    fmt: TableJsonOpt = "table",
    out: ResponsesOutOpt = None,
    against: Annotated[
        str,
        typer.Option(
            "--against",
            help="opencost (default): the cascade on the reference total (effective cost in "
            "scope + external costs); invoice: the invoice cascade, closing on the billed "
            "total of the billing data (needs --billing or billing.sources).",
        ),
    ] = "opencost",
    currency: CurrencyOpt = None,
) -> None:
    """Print the reconciliation cascade; exit 1 unless the gap is exactly zero."""
    from tenantcost.cli import run

    run.reconcile(options, key, fmt, against)


@command("report")
@run_options(engine=True, config_required=False)
def report_command(
    options: RunOptions,
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", help="Folder to write the report pack into.")],
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
    generated_at: Annotated[
        str | None,
        typer.Option(
            "--generated-at",
            help="The generation time the pages show (ISO 8601; before SOURCE_DATE_EPOCH, "
            "else now), so two runs give byte-identical HTML and Markdown.",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            min=1,
            help="With --engine local: processes writing PDFs (default: the cores; 1: "
            "serial). With --engine dask the cluster's workers write them (and run the "
            "allocations); every engine writes the same files.",
        ),
    ] = None,
    catalog: Annotated[
        Path | None,
        typer.Option(
            "--catalog",
            help="Client catalog (as for unit-economics): also write the finance page "
            "unit-economics.html (cost per client per plan, margin against revenue).",
        ),
    ] = None,
    from_db: Annotated[
        bool,
        typer.Option(
            "--from-db",
            help="Render the --month's issued statement from the store, as issued (nothing is "
            "recomputed): its latest revision, or --revision N; --draft or --run ID for a run "
            "not issued; in the ledger currency, or with --currency as the run converted it "
            "(the rates frozen at close). Not with --config or other inputs.",
        ),
    ] = False,
    revision: Annotated[
        int | None,
        typer.Option("--revision", min=1, help="With --from-db: this issued revision."),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option("--run", help="With --from-db: this run's figures, marked as a draft."),
    ] = None,
    draft: Annotated[
        bool,
        typer.Option(
            "--draft",
            help="With --from-db: the month's latest run, closed or not, marked as a draft.",
        ),
    ] = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    view: Annotated[
        SheetView,
        typer.Option(
            "--view",
            help="Which sheets: client (what a client receives: no confidence grade, no "
            "amounts under other keys, no file names or reproduce command) or internal "
            "(finance's, with all of them).",
        ),
    ] = SheetView.CLIENT,
    currency: CurrencyOpt = None,
) -> None:
    """Per-client cost sheets, a finance summary and an index (HTML, PDF, Markdown)."""
    from tenantcost.cli import run

    store = (revision, run_id, draft or None, db, data, settings)
    if from_db or any(v is not None for v in store):
        from tenantcost.cli.from_db import FromDb, report_from_db

        which = FromDb(from_db, revision, run_id, draft, db, data, settings, catalog)
        report_from_db(options, which, client, fmt, templates, decimals, generated_at, jobs, view)
        return
    if options.config is None:  # required without --from-db: typer's own usage error
        ctx.fail("Missing option '--config'.")
    run.report(
        options, client, fmt, templates, decimals, generated_at=generated_at, jobs=jobs,
        catalog=catalog, view=view,
    )  # fmt: skip


@command("collect")
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
    from tenantcost.cli import run

    run.collect(opencost_url, run.resolve_period(month, start, end), step, out, config)


@command("check-config")
def check_config_command(
    config: Annotated[Path, typer.Argument(help="The YAML rule file to validate.")],
    usage: UsageOpt = None,
) -> None:
    """Validate a rule file (and, with --usage, its keys and services against the data)."""
    from tenantcost.config.rules import load_rules

    ruleset = load_rules(config)
    if usage:
        from tenantcost.cli.run import check_usage

        check_usage(ruleset, config, usage)
    for version in ruleset.rules:
        typer.echo(
            f"{version.id}: from {version.effective_from.date()}, {len(version.workloads)} "
            f"workload entries ({_class_counts(w.class_ for w in version.workloads)}), "
            f"{len(version.external)} external, idle {version.idle}, unmatched "
            f"{version.unmatched}"
        )
        if version.billed:
            services = ", ".join(version.billed_services) or "none"
            typer.echo(
                f"  billed: {len(version.billed)} entries "
                f"({_class_counts(b.class_ for b in version.billed)}), split over services "
                f"{services}, unmatched_billed {version.unmatched_billed}"
            )
    if ruleset.billing is not None:
        typer.echo(_billing_summary(ruleset.billing))
    typer.echo(f"{config}: ok ({len(ruleset.rules)} rule version(s), currency {ruleset.currency})")


def _class_counts(classes: Iterable[str]) -> str:
    """``6 shared, 2 direct``: entries per class, most frequent first."""
    from collections import Counter

    return ", ".join(f"{n} {c}" for c, n in Counter(classes).most_common())


def _billing_summary(billing: Billing) -> str:
    """check-config's line for the ``billing:`` section: what a run with billing will read."""
    named = [(c.name or '""', c.costs_from) for c in billing.clusters]  # "": rows without one
    clusters = ", ".join(f"{name} ({costs})" for name, costs in named) or "none"
    sources = ", ".join(billing.sources) or "none (give --billing)"
    return (
        f"billing: clusters {clusters}; sources {sources}; focus_allocations "
        f"{billing.focus_allocations}"
    )


@command("schema")
def schema_command() -> None:
    """Print the rule file's JSON Schema (for editors that complete and validate YAML)."""
    from tenantcost.config.schema import rules_schema

    typer.echo(json.dumps(rules_schema(), indent=2))


@command("podcost")
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
    fmt: Annotated[str, typer.Option("--format", help="table (default), json or csv.")] = "table",
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


export_app = typer.Typer(
    name="export",
    help="Write the allocation in a format other tools read (FOCUS).",
    no_args_is_help=True,
)
app.add_typer(export_app)


@run_options()
def export_focus_command(
    options: RunOptions,
    out: Annotated[
        Path, typer.Option("--out", help="The FOCUS file to write: FILE.parquet or FILE.csv.")
    ],
    grain: Annotated[
        str, typer.Option("--grain", help="Charge period of a row: day (default) or hour.")
    ] = "day",
    focus_version: Annotated[
        str,
        typer.Option(
            "--focus-version",
            help="1.2 (default; allocation columns x_-prefixed) or 1.3 (allocation columns "
            "native).",
        ),
    ] = "1.2",
) -> None:
    """Per-client cost rows in FOCUS (the FinOps Open Cost and Usage Specification)."""
    from tenantcost.cli.export import export_focus

    export_focus(options, out, grain, focus_version)


export_app.command("focus")(user_errors(export_focus_command))


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
