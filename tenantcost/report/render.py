"""Write a report pack: one sheet per client and format, the finance summary, an index.

Templates are jinja2 files shipped inside the package (``tenantcost/templates``, loaded with
:class:`jinja2.PackageLoader`, so an installed wheel renders without the repository). A company
brands its sheets with ``--templates DIR``, searched first, file by file: override only
``base.html`` or ``report.css`` and inherit the rest; a user template may still extend the
package's own under the ``tenantcost/`` prefix (``{% extends "tenantcost/base.html" %}``).
HTML is self-contained (CSS inlined, charts as inline SVG) so it can be mailed or archived as
one file; the PDF is WeasyPrint's rendering of the same HTML, so both always show the same
figures. Markdown escapes every value (:mod:`tenantcost.report.markdown`).

Sheets are written in one view (:mod:`tenantcost.report.sheet_view`): the client's by default
(the files a pack is made to send), finance's internal one with ``report --view internal``.
The finance summary and the index are finance's in either case.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tenantcost.errors import InputError, InternalError
from tenantcost.report import markdown as md
from tenantcost.report.display import format_share, format_units
from tenantcost.report.pack import ReportPack
from tenantcost.report.pdf import PdfPool, default_jobs, write_pdf
from tenantcost.report.pdf_dask import DaskPdfPool
from tenantcost.report.sheet import ClientSheet, build_sheet, period_view, prepare, slug
from tenantcost.report.sheet_view import SheetView
from tenantcost.report.summary import FinanceSummary, build_summary
from tenantcost.writers.json_output import reconciliation_document

FORMATS = ("html", "pdf", "md")
TEMPLATES_PACKAGE = ("tenantcost", "templates")
"""Package and folder of the default templates (package data, in the wheel and the sdist)."""
PACKAGE_PREFIX = "tenantcost"
"""``{% extends "tenantcost/base.html" %}`` names the package's template past a user's own."""
SUMMARY_NAME = "finance-summary"
ECONOMICS_NAME = "unit-economics"
CLIENT_DIR = "clients"
RECONCILIATION_NAME = "reconciliation.json"
"""With billing data: the cascades as ``reconcile --format json`` prints them, ``invoice``
object included (finance's, beside the summary)."""


def parse_formats(text: str) -> list[str]:
    """``html,pdf,md`` -> a list in that order, each known, without repeats."""
    chosen = [f.strip().lower() for f in text.split(",") if f.strip()]
    if not chosen:
        raise InputError("--format: give at least one of html, pdf, md")
    for fmt in chosen:
        if fmt not in FORMATS:
            raise InputError(
                f"--format: expected a comma list of {', '.join(FORMATS)}, got '{fmt}'"
            )
    return [f for f in FORMATS if f in chosen]


def load_weasyprint() -> ModuleType:
    """WeasyPrint, or a one-line error saying what to install."""
    try:
        import weasyprint
    except (ImportError, OSError) as exc:
        raise InputError(
            f"--format pdf needs WeasyPrint and its system libraries (pango): {exc}; install "
            "them (pip install weasyprint) or leave pdf out of --format"
        ) from None
    return weasyprint


def template_loader(user_dir: Path | None) -> jinja2.BaseLoader:
    """The user's folder (if any), then the package's templates, then ``tenantcost/<name>``.

    A :class:`~jinja2.ChoiceLoader` takes each name from the first loader that has it, so a
    folder holding only ``base.html`` changes the frame of every page and inherits the rest.
    """
    try:
        package = jinja2.PackageLoader(*TEMPLATES_PACKAGE)
    except ValueError as exc:  # the package folder is missing: a broken installation
        raise InternalError(
            f"tenantcost's report templates are missing ({exc}); reinstall it"
        ) from None
    loaders: list[jinja2.BaseLoader] = []
    if user_dir is not None:
        loaders.append(jinja2.FileSystemLoader(str(user_dir)))
    loaders += [package, jinja2.PrefixLoader({PACKAGE_PREFIX: package})]
    return jinja2.ChoiceLoader(loaders)


def environment(kind: str, user_dir: Path | None) -> jinja2.Environment:
    """A jinja2 environment for ``html`` (HTML-escaped) or ``md`` (Markdown-escaped) output."""
    markdown = kind == "md"
    env = jinja2.Environment(
        loader=template_loader(user_dir),
        autoescape=kind == "html",
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=md.escape if markdown else None,
    )
    if markdown:
        env.filters.update(md.FILTERS)
    return env


def _render(env: jinja2.Environment, name: str, **context: Any) -> str:
    try:
        return env.get_template(name).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise InputError(f"template not found: {exc.name}") from None
    except jinja2.TemplateError as exc:
        where = getattr(exc, "filename", None) or name
        line = getattr(exc, "lineno", None)
        raise InputError(
            f"template error: {exc}", file=str(where), where=f"line {line}" if line else None
        ) from None


@dataclass(frozen=True)
class Reproduce:
    """The command that produces the same pack from the same inputs."""

    command: str


def reproduce_command(pack: ReportPack, out: Path) -> str:
    if pack.command is not None:  # a stored run: report --from-db
        return shlex.join([*pack.command, "--out", str(out)])
    inputs = pack.inputs
    parts = ["tenantcost", "report", "--config", str(inputs.config)]
    for cost_path in inputs.cost_paths:
        parts += ["--costs", str(cost_path)]
    for path in inputs.usage_paths:
        parts += ["--usage", str(path)]
    period = period_view(pack)
    if period.is_month:
        parts += ["--month", period.label]
    else:
        parts += ["--from", period.start, "--to", period.end]
    parts += ["--out", str(out)]
    return shlex.join(parts)


@dataclass
class Writer:
    """Renders and writes the files of one pack, reporting each step to ``tick``; PDFs in
    ``jobs`` processes (:class:`~tenantcost.report.pdf.PdfPool`) when more than one."""

    pack: ReportPack
    out: Path
    formats: Sequence[str]
    templates: Path | None
    tick: Callable[[str], None]
    jobs: int = 1
    unit_economics: str | None = None
    """The unit-economics finance page (``report --catalog``), written as it is."""
    dask: Any = None
    """A ``distributed.Client`` (``report --engine dask``): its workers write the PDFs."""
    view: SheetView = SheetView.CLIENT
    """The sheets' view (``report --view``)."""
    names: dict[str, str] | None = None
    """Catalog names of the clients (sheet titles); ``None``: ids only."""

    def __post_init__(self) -> None:
        self.html_env = environment("html", self.templates)
        self.md_env = environment("md", self.templates)
        self.weasyprint = load_weasyprint() if "pdf" in self.formats else None
        self.written: list[Path] = []
        self.pool: PdfPool | DaskPdfPool | None = None

    def _write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self.written.append(path)

    def _emit(self, stem: Path, html_name: str, md_name: str, **context: Any) -> None:
        html = _render(self.html_env, html_name, **context)
        if "html" in self.formats:
            self._write(stem.with_suffix(".html"), html)
            self.tick(f"{stem.name}.html")
        if "pdf" in self.formats:
            assert self.weasyprint is not None
            target = stem.with_suffix(".pdf")
            target.parent.mkdir(parents=True, exist_ok=True)
            self.written.append(target)
            if self.pool is not None:  # ticks when a worker has written it
                self.pool.submit(html, target)
            else:
                write_pdf(self.weasyprint, html, target)
                self.tick(f"{stem.name}.pdf")
        if "md" in self.formats:
            self._write(stem.with_suffix(".md"), _render(self.md_env, md_name, **context))
            self.tick(f"{stem.name}.md")

    def run(self) -> list[Path]:
        """Every file of the pack; PDFs on the Dask cluster's workers, else in a process pool
        when ``jobs`` > 1 and there are several (the summary and at least one sheet)."""
        if "pdf" in self.formats and self.dask is not None:
            pool: PdfPool | DaskPdfPool = DaskPdfPool(self.dask, self._page_done)
        elif "pdf" not in self.formats or self.jobs < 2 or not self.pack.clients:
            return self._pages()
        else:
            pool = PdfPool(self.jobs, self._page_done)
        with pool:
            self.pool = pool
            written = self._pages()
            pool.finish()
        self.pool = None
        return written

    def _page_done(self, target: Path) -> None:
        self.tick(target.name)

    def _pages(self) -> list[Path]:
        pack = self.pack
        slugs = _unique_slugs(pack.clients)
        files = {c: f"{CLIENT_DIR}/{slugs[c]}" for c in pack.clients}
        command = reproduce_command(pack, self.out)
        view_option = " --view internal" if self.view.internal else ""
        names = self.names or {}
        sheets: list[ClientSheet] = []
        views = prepare(pack)  # what every sheet shares, once: each sheet costs its own lines
        for client in pack.clients:  # one sheet per client, each in every format
            sheet = build_sheet(
                pack, client, slugs[client], views, self.view, names.get(client, "")
            )
            sheets.append(sheet)
            redact = views.redaction.reader(client)
            self._emit(
                self.out / files[client],
                "client_sheet.html",
                "client_sheet.md",
                sheet=sheet,
                reproduce=Reproduce(
                    redact(f"{command} --client {shlex.quote(client)}{view_option}")
                ),
            )
        html_links = {c: f"{files[c]}.html" for c in pack.clients} if "html" in self.formats else {}
        summary = build_summary(pack, html_links)
        self._emit(
            self.out / SUMMARY_NAME,
            "finance_summary.html",
            "finance_summary.md",
            summary=summary,
            reproduce=Reproduce(command),
        )
        reconciliation = self._reconciliation()
        economics = None
        if self.unit_economics is not None:
            economics = f"{ECONOMICS_NAME}.html"
            self._write(self.out / economics, self.unit_economics)
        self._write(
            self.out / "index.html",
            _render(
                self.html_env,
                "index.html",
                index=_index(pack, sheets, summary, files, self.formats, economics, reconciliation),
                reproduce=Reproduce(command),
            ),
        )
        self.tick("index.html")
        return self.written

    def _reconciliation(self) -> str | None:
        """A run on billing data: ``reconciliation.json`` (the cascade, the ``invoice``
        object), the machine-readable twin of the summary's cascades; else nothing, so packs
        without billing data keep their files."""
        if self.pack.base.invoice is None:
            return None
        document = reconciliation_document(self.pack.base)
        self._write(self.out / RECONCILIATION_NAME, json.dumps(document, indent=2) + "\n")
        return RECONCILIATION_NAME


@dataclass(frozen=True)
class IndexRow:
    client: str
    total: str
    confidence: str
    links: list[tuple[str, str]]


@dataclass(frozen=True)
class IndexPage:
    summary: FinanceSummary
    rows: list[IndexRow]
    total: str
    summary_links: list[tuple[str, str]]
    unattributed_share: str
    unit_economics: str | None = None
    reconciliation: str | None = None
    """``reconciliation.json`` of a run on billing data (the invoice cascade); else None."""


def _index(
    pack: ReportPack,
    sheets: list[ClientSheet],
    summary: FinanceSummary,
    files: dict[str, str],
    formats: Sequence[str],
    unit_economics: str | None = None,
    reconciliation: str | None = None,
) -> IndexPage:
    shown = pack.shown
    labels = {"html": "HTML", "pdf": "PDF", "md": "Markdown"}
    rows = [
        IndexRow(
            client,
            format_units(shown.by_key["rule"][client], pack.places),
            pack.confidence[client].level,
            [(labels[f], f"{files[client]}.{f}") for f in formats] if client in files else [],
        )
        for client in pack.all_clients
    ]
    unattributed = int(pack.base.unattributed["amount"].sum())
    bound = int(pack.base.lines["amount"].sum()) + unattributed
    return IndexPage(
        summary=summary,
        rows=rows,
        total=format_units(shown.clients_line, pack.places),
        summary_links=[(labels[f], f"{SUMMARY_NAME}.{f}") for f in formats],
        unattributed_share=format_share(unattributed / bound) if bound else "-",
        unit_economics=unit_economics,
        reconciliation=reconciliation,
    )


def _unique_slugs(clients: Sequence[str]) -> dict[str, str]:
    """File names per client: the slug, with -2, -3... when two ids slug alike."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for client in sorted(clients):
        base = slug(client)
        name, n = base, 1
        while name.lower() in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name.lower())
        out[client] = name
    return out


def write_pack(
    pack: ReportPack,
    out: Path,
    formats: Sequence[str],
    templates: Path | None = None,
    progress: bool | None = None,
    jobs: int | None = None,
    unit_economics: str | None = None,
    dask: Any = None,
    view: SheetView = SheetView.CLIENT,
    names: dict[str, str] | None = None,
) -> list[Path]:
    """Render every file of the pack into ``out``; a progress bar on a terminal's stderr.
    PDFs are written by ``jobs`` processes (default: the cores; 1: in this process), or by
    the workers of ``dask`` (a ``distributed.Client``, ``--engine dask``). Sheets in ``view``,
    titled with the clients' catalog ``names`` when given."""
    if templates is not None and not templates.is_dir():
        raise InputError("--templates: not a folder", file=str(templates))
    steps = (len(pack.clients) + 1) * len(formats) + 1
    show = sys.stderr.isatty() if progress is None else progress
    console = Console(stderr=True)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show,
        transient=False,
    ) as bar:
        task = bar.add_task("rendering", total=steps)

        def tick(name: str) -> None:
            bar.update(task, advance=1, description=f"rendering {name}")

        writer = Writer(
            pack, out, formats, templates, tick, jobs or default_jobs(), unit_economics, dask,
            view, names,
        )  # fmt: skip
        try:
            return writer.run()
        except OSError as exc:
            raise InputError(
                f"cannot write the report: {exc.strerror or exc}", file=exc.filename or str(out)
            ) from None
