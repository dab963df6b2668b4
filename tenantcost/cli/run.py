"""The one run sequence of the allocating commands, and what each prints.

load the inputs (:func:`tenantcost.inputs.load_inputs`) -> open the chunk engine -> allocate
(:func:`tenantcost.allocate.allocate_stream`) -> check the cascade. A cascade that does not
close is an :class:`~tenantcost.errors.InternalError` (exit 3): no figure that does not add
up is printed as a result. Only ``reconcile``, the auditing command, prints such a cascade
and exits 1.

This module imports the heavy libraries; the command definitions import it only when run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd
import typer

from tenantcost.allocate import AllocationResult, allocate_keys, allocate_stream
from tenantcost.cli.shell import RunOptions
from tenantcost.collect import RESPONSES_FOLDER, collect_to_folder, opencost_source
from tenantcost.config.rules import RuleSet, load_rules
from tenantcost.engine import Engine
from tenantcost.errors import InputError
from tenantcost.inputs import Inputs, load_inputs
from tenantcost.invoice import invoice_cascade
from tenantcost.presentation import needs_days, present, presentation_currency
from tenantcost.progress import chunk_progress
from tenantcost.reconcile import Cascade, cascade, require_closed
from tenantcost.report.sheet_view import SheetView
from tenantcost.split import connect
from tenantcost.usage_source import is_url
from tenantcost.windows import Period, parse_utc
from tenantcost.writers.collection import collect_summary
from tenantcost.writers.compare import compare_document, compare_table
from tenantcost.writers.files import csv_frame, prepare_out_dir, write_outputs
from tenantcost.writers.json_output import reconciliation_document, result_json
from tenantcost.writers.text import (
    cascade_table,
    clients_table,
    header,
    invoice_table,
    money,
    sources_table,
)


def resolve_period(month: str | None, start: str | None, end: str | None) -> Period | None:
    """``--month`` or ``--from``/``--to`` (both or neither); ``None``: the cost data's span."""
    if month and (start or end):
        raise InputError("give either --month or --from/--to, not both")
    if month:
        return Period.month(month)
    if start or end:
        if not (start and end):
            raise InputError("--from and --to go together")
        return Period.between(start, end)
    return None


def parse_generated_at(text: str | None) -> datetime | None:
    """``--generated-at``: an ISO 8601 time (naive = UTC) pinning the pages' generation time."""
    if text is None:
        return None
    at = parse_utc(text, "--generated-at")
    if pd.isna(at):
        raise InputError(f"--generated-at: not an ISO 8601 time: '{text}'")
    return at.to_pydatetime()


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


@contextmanager
def open_engine(engine: str, scheduler: str | None, workers: int | None) -> Iterator[Engine | None]:
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
    from tenantcost.engine.dask import DaskEngine

    with DaskEngine(scheduler=scheduler, workers=workers) as dask_engine:
        yield dask_engine


@dataclass(frozen=True)
class Allocation:
    """One allocation and its cascade."""

    result: AllocationResult
    cascade: Cascade


@dataclass(frozen=True)
class Run:
    """A command's loaded inputs, period and engine: allocate as often as it needs."""

    inputs: Inputs
    period: Period | None
    chunk: pd.Timedelta | None
    engine: Engine | None
    currency: str | None = None
    """``--currency``: the presentation currency asked for (:mod:`tenantcost.presentation`)."""
    presents: bool = False
    """The command shows converted figures (``allocate``, ``compare``, ``reconcile``,
    ``explain``, ``report``); every other command (``export``, ``unit-economics``) keeps
    the ledger currency whatever ``presentation:`` says."""

    @property
    def shown_currency(self) -> str:
        if not self.presents:
            return self.inputs.ruleset.currency
        return presentation_currency(self.inputs.ruleset, self.currency)

    def present(self, result: AllocationResult) -> AllocationResult:
        """``result`` in the shown currency (itself when that is the ledger's)."""
        return present(result, self.inputs.ruleset, self.shown_currency)

    def _needs_days(self) -> bool:
        """A conversion with more than one rate in the period needs the lines per day."""
        if self.period is not None:
            start, end = self.period.start, self.period.end
        else:
            costs = self.inputs.costs
            start, end = costs["window_start"].min(), costs["window_end"].max()
        return needs_days(self.inputs.ruleset, pd.Timestamp(start), pd.Timestamp(end))

    def allocate(
        self,
        key: str | None = None,
        *,
        lines_out: Path | None = None,
        audit: bool = False,
        days: bool = False,
    ) -> Allocation:
        """Allocate chunk by chunk (period-level lines), in the shown currency; unless
        ``audit``, a cascade that does not close raises
        :class:`~tenantcost.errors.InternalError`. ``days``: keep the ledger's lines per day
        anyway (the command converts into other currencies too: clients' own)."""
        converting = self.shown_currency != self.inputs.ruleset.currency
        if converting and lines_out is not None:
            raise InputError(
                "--out writes window-level lines in the ledger currency: give it without "
                "--currency (or without presentation: in the rule file)",
                where="--out",
            )
        with chunk_progress("allocating") as progress:
            result = allocate_stream(
                self.inputs.allocation_costs,
                self.inputs.usage,
                self.inputs.ruleset,
                key=key,
                period=self.period,
                detail="period",
                chunk=self.chunk,
                lines_out=lines_out,
                progress=progress,
                rules_origin=str(self.inputs.config),
                con=self.inputs.con,
                engine=self.engine,
                billed=self.inputs.billing,
                days=(converting or days) and self._needs_days(),
            )
        self._with_invoice(result)
        result = self.present(result)
        casc = cascade(result)
        return Allocation(result, casc if audit else require_closed(casc))

    def allocate_keys(self, keys: list[str | None]) -> list[Allocation]:
        """Allocate under each of ``keys`` (``None``: the rules' own) in one pass over the
        usage (:func:`tenantcost.allocate.allocate_keys`), in the shown currency; every
        cascade must close."""
        converting = self.shown_currency != self.inputs.ruleset.currency
        with chunk_progress("allocating") as progress:
            results = allocate_keys(
                self.inputs.allocation_costs,
                self.inputs.usage,
                self.inputs.ruleset,
                keys=keys,
                period=self.period,
                detail="period",
                chunk=self.chunk,
                progress=progress,
                rules_origin=str(self.inputs.config),
                con=self.inputs.con,
                engine=self.engine,
                billed=self.inputs.billing,
                days=converting and self._needs_days(),
            )
        for r in results:
            self._with_invoice(r)
        results = [self.present(r) for r in results]
        return [Allocation(r, require_closed(cascade(r))) for r in results]

    def _with_invoice(self, result: AllocationResult) -> None:
        """Attach the invoice cascade to a run on billing data."""
        if self.inputs.billing is not None:
            result.invoice = invoice_cascade(result, self.inputs.billing).to_json()


def require_config(options: RunOptions) -> Path:
    """``--config``: typer requires it of every command but ``report``, which checks it
    itself (``--from-db`` needs none); a Python caller without one gets one line."""
    if options.config is None:
        raise InputError("--config: give the rule file")
    return options.config


@contextmanager
def opened(
    options: RunOptions, *, check_period: bool = True, presents: bool = False
) -> Iterator[Run]:
    """The run sequence's start: resolve the period, load the inputs (a period without cost
    data is refused: :func:`require_cost_data`; ``explain`` checks each of its months
    itself), open the engine."""
    config = require_config(options)
    period = resolve_period(options.month, options.start, options.end)
    chunk = parse_chunk(options.chunk)
    inputs = load_inputs(
        config,
        options.costs,
        options.usage,
        opencost_url=options.opencost_url,
        step=options.step,
        period=period,
        out=options.out,
        billing=options.billing,
        allow_unbilled=options.allow_unbilled,
    )
    if period is not None and check_period:
        require_cost_data(inputs.costs, period, "--month" if options.month else "--from/--to")
    with open_engine(options.engine, options.scheduler, options.workers) as engine:
        yield Run(inputs, period, chunk, engine, options.currency, presents)


def require_cost_data(costs: pd.DataFrame, period: Period, option: str) -> None:
    """Refuse a period without any cost window in the inputs, naming the span they cover.

    Every command that takes a period asks this one check (through :func:`opened`, and
    ``explain`` for each of its months): a month outside the data would otherwise print an
    all-zero cascade, or fail deep in a writer, instead of saying what was asked wrong."""
    from tenantcost.report.display import period_label
    from tenantcost.windows import data_period

    inside = (costs["window_start"] >= period.start) & (costs["window_end"] <= period.end)
    if inside.any():
        return
    label = period_label(period.start, period.end)
    if costs.empty:
        raise InputError(f"{option}: the inputs have no cost data at all, so none in {label}")
    span = data_period(costs)
    raise InputError(
        f"{option}: the inputs have no cost data in {label}; their costs cover "
        f"{span.start.isoformat()} to {span.end.isoformat()}"
    )


def check_format(fmt: str, allowed: tuple[str, ...]) -> str:
    if fmt not in allowed:
        raise InputError(f"--format: expected one of {', '.join(allowed)}, got '{fmt}'")
    return fmt


def _reference_detail(result: AllocationResult) -> str:
    if result.invoice is not None:  # repriced costs and billed lines: the effective in scope
        effective = result.cost_total + result.billed_pool_total
        return f"billed effective {money(effective)} + external {money(result.external_total)}"
    return f"costs {money(result.cost_total)} + external {money(result.external_total)}"


def allocation_text(result: AllocationResult, casc: Cascade) -> str:
    """The table form of an allocation (``allocate`` and the store's ``run`` print the same):
    header, clients, sources and the cascade, separated by blank lines."""
    return "\n\n".join(
        [
            header(result),
            clients_table(result),
            sources_table(result),
            cascade_table(casc, result.currency, _reference_detail(result)),
        ]
    )


def _responses_saved(inputs: Inputs, out: Path | None) -> None:
    """``--out`` of compare/reconcile only saves API responses: refuse it with files."""
    if out is None:
        return
    if inputs.cost_input.source is None:
        raise InputError("--out saves OpenCost API responses, but the costs came from files")
    count = len(inputs.cost_input.paths)
    typer.echo(f"saved {count} OpenCost response(s) to {out / RESPONSES_FOLDER}", err=True)


def allocate(options: RunOptions, key: str | None, fmt: str) -> None:
    """``allocate``: totals, sources and cascade (or JSON/CSV); files with ``--out``."""
    check_format(fmt, ("table", "json", "csv"))
    out = options.out
    with opened(options, presents=True) as run:
        lines_out = None
        if out is not None:
            prepare_out_dir(out)
            lines_out = out / "lines.csv"  # window-level lines, streamed chunk by chunk
        allocation = run.allocate(key, lines_out=lines_out)
    result, casc = allocation.result, allocation.cascade
    if fmt == "json":
        typer.echo(result_json(result))  # json.dumps(result_document(...), indent=2), fast
    elif fmt == "csv":
        totals = result.client_totals().assign(currency=result.currency)
        if result.ledger is not None:
            totals = totals.assign(ledger_currency=result.ledger.currency)
        typer.echo(csv_frame(totals).to_csv(index=False), nl=False)
    else:
        typer.echo(allocation_text(result, casc))
    if out is not None:
        written = write_outputs(result, out)
        typer.echo(f"wrote {len(written)} files to {out}", err=True)


def compare(options: RunOptions, keys: str, fmt: str) -> None:
    """``compare``: each client under each key."""
    check_format(fmt, ("table", "json"))
    key_list = [k.strip() for k in keys.split(",") if k.strip()]
    if len(key_list) < 2:
        raise InputError(f"--keys: give at least two keys separated by commas, got '{keys}'")
    with opened(options, presents=True) as run:
        _responses_saved(run.inputs, options.out)
        results = {k: run.allocate(k).result for k in key_list}
    if fmt == "json":
        typer.echo(json.dumps(compare_document(results), indent=2))
    else:
        typer.echo(compare_table(results))


def reconcile(options: RunOptions, key: str | None, fmt: str, against: str = "opencost") -> None:
    """``reconcile``: the cascade, audited: exit 1 (not 3) when it does not close."""
    check_format(fmt, ("table", "json"))
    if against not in ("opencost", "invoice"):
        raise InputError(f"--against: expected opencost or invoice, got '{against}'")
    with opened(options, presents=True) as run:
        _responses_saved(run.inputs, options.out)
        allocation = run.allocate(key, audit=True)
    result, casc = allocation.result, allocation.cascade
    if against == "invoice":
        _reconcile_invoice(result, fmt)
        return
    if fmt == "json":
        typer.echo(json.dumps(reconciliation_document(result), indent=2))
    else:
        typer.echo(header(result))
        typer.echo("")
        typer.echo(cascade_table(casc, result.currency, _reference_detail(result)))
    if not casc.closes:
        typer.echo(f"error: the cascade does not close: gap {casc.gap} micro-units", err=True)
        raise typer.Exit(1)


def _reconcile_invoice(result: AllocationResult, fmt: str) -> None:
    """``reconcile --against invoice``: the invoice cascade; exit 1 unless its gap is 0."""
    invoice = result.invoice
    if invoice is None:
        raise InputError(
            "--against invoice: give the billing data (--billing PATH, or billing.sources in "
            "the rule file)"
        )
    if fmt == "json":
        typer.echo(json.dumps(invoice, indent=2))
    else:
        typer.echo(header(result))
        typer.echo("")
        typer.echo(invoice_table(invoice))
    if invoice["gap"] != 0:
        typer.echo(
            f"error: the invoice cascade does not close: gap {invoice['gap']} micro-units",
            err=True,
        )
        raise typer.Exit(1)


def report(
    options: RunOptions,
    clients: list[str] | None,
    fmt: str,
    templates: Path | None,
    decimals: int | None,
    generated_at: str | None = None,
    jobs: int | None = None,
    catalog: Path | None = None,
    view: SheetView = SheetView.CLIENT,
) -> None:
    """``report``: the pack around the main run, through the same inputs and core; with a
    ``catalog``, also the unit-economics finance page (:func:`tenantcost.report.
    economics_page.finance_page`) and the clients' names in the sheets' titles. With
    ``--engine dask`` the allocations and the PDFs run on the cluster."""
    from tenantcost.report import build_pack, parse_formats, write_pack
    from tenantcost.report.pack import alternative_keys
    from tenantcost.report.pdf_dask import dask_pdfs

    formats = parse_formats(fmt)
    out = options.out
    assert out is not None  # --out is required by the command
    at = parse_generated_at(generated_at)
    pdf_cluster = dask_pdfs(options.engine, options.scheduler, jobs)
    with opened(options, presents=True) as run:
        keys = alternative_keys(run.inputs)  # the pack's re-runs, in the main run's pass
        base, *others = run.allocate_keys([None, *keys])
        alternatives = {k: o.result for k, o in zip(keys, others, strict=True)}
        pack = build_pack(
            run.inputs, base.result, clients=clients, places=decimals, generated_at=at,
            engine=run.engine, alternatives=alternatives,
        )  # fmt: skip
        economics, names = None, None
        if catalog is not None:
            from tenantcost.catalog import read_catalog
            from tenantcost.report.economics_page import finance_page

            economics = finance_page(run.inputs, run.period, pack.base, catalog, templates, at)
            frame = read_catalog(catalog, pack.base.currency).frame
            named = frame.loc[frame["name"] != "", ["client", "name"]]
            names = dict(zip(named["client"].astype(str), named["name"].astype(str), strict=True))
        dask = getattr(run.engine, "client", None) if pdf_cluster else None
        written = write_pack(
            pack, out, formats, templates=templates, jobs=jobs, unit_economics=economics,
            dask=dask, view=view, names=names,
        )  # fmt: skip
    typer.echo(
        f"wrote {len(written)} files for {len(pack.clients)} client(s) to {out} "
        f"(open {out / 'index.html'})"
    )  # the command's one output: on stdout


def collect(
    opencost_url: str | None,
    period: Period | None,
    step: str | None,
    out: Path | None,
    config: Path | None,
) -> None:
    """``collect``: ask the OpenCost API for a period; save its responses with ``--out``."""
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


def check_usage(ruleset: RuleSet, config: Path, usage: list[str]) -> None:
    """``check-config --usage``: the rule file's keys and services against the usage."""
    from tenantcost.config.rules import check_against_usage
    from tenantcost.gauge_usage import open_gauged

    con = connect()
    # sample files are read as gauges (a counter given as samples, or a gauge as windows,
    # is refused there)
    source = open_gauged([p if is_url(p) else Path(p) for p in usage], con, ruleset.gauges)
    assert source is not None
    services = source.services(con)
    check_against_usage(
        ruleset, source.metrics, services, origin=str(config), usage_origin=source.origin
    )
