"""``report --from-db``: a month's statement rendered from the store, as it was issued.

The pack comes from :func:`tenantcost.store.stored_run.load_statement` (the run's recorded
figures, no allocation) and is written by the same writer as ``report`` on files, so both
give the same pages for the same figures. The inputs of a file report (``--config``,
``--costs``, ``--usage``, ``--from``/``--to``, the OpenCost API) are refused with
``--from-db``: the store's run already names its inputs. ``--currency`` renders the run as
its conversion into that currency was recorded by ``run`` (frozen by the close), never at
the rates in the store now. Imported only when the command runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from tenantcost.cli.shell import RunOptions
from tenantcost.errors import InputError
from tenantcost.report.sheet_view import SheetView


@dataclass(frozen=True)
class FromDb:
    """The store options of ``report``: which run to render and where the store is."""

    from_db: bool
    revision: int | None
    run_id: str | None
    draft: bool
    db: str | None
    data: str | None
    settings: Path | None
    catalog: Path | None = None


def _check(options: RunOptions, which: FromDb) -> str:
    """The month, once the options make sense together; else one ``error:`` line."""
    if not which.from_db:
        given = [name for name, value in (("--revision", which.revision), ("--run", which.run_id),
                 ("--draft", which.draft or None), ("--db", which.db), ("--data", which.data),
                 ("--settings", which.settings)) if value is not None]  # fmt: skip
        raise InputError(f"{given[0]} goes with --from-db (the report from the store)")
    files = [name for name, value in (("--config", options.config), ("--costs", options.costs),
             ("--usage", options.usage), ("--from", options.start), ("--to", options.end),
             ("--opencost-url", options.opencost_url), ("--step", options.step))
             if value]  # fmt: skip
    if files:
        raise InputError(
            f"{files[0]}: --from-db renders the stored run of --month with its recorded inputs "
            "and rules; leave out the input options"
        )
    if which.catalog is not None:
        raise InputError(
            "--catalog: the unit-economics page is not rendered from the store; use "
            "`tenantcost unit-economics --month M --from-db`"
        )
    if not options.month:
        raise InputError("--from-db needs --month YYYY-MM (the month to render)")
    return options.month


def _currency(asked: str | None) -> str | None:
    """``--currency``: the statement as its run's conversion into it split it (frozen by the
    close that issued it); without it, as issued, in the ledger currency."""
    if not asked:
        return None
    from tenantcost.currency import require_currency

    return require_currency(asked.strip().upper(), where="--currency")


def report_from_db(
    options: RunOptions,
    which: FromDb,
    clients: list[str] | None,
    fmt: str,
    templates: Path | None,
    decimals: int | None,
    generated_at: str | None,
    jobs: int | None,
    view: SheetView = SheetView.CLIENT,
) -> None:
    """Render the month's issued (or draft) statement from the store into ``--out``; with
    ``--engine dask`` the cluster's workers write the PDFs (nothing is allocated). Sheets in
    ``view``, titled with the store catalog's names."""
    from tenantcost.cli.run import open_engine, parse_generated_at
    from tenantcost.report import parse_formats, write_pack
    from tenantcost.report.pdf_dask import dask_pdfs
    from tenantcost.store.data import DataDir
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.stored_run import load_statement
    from tenantcost.windows import Period

    month = _check(options, which)
    Period.month(month)  # a bad month is one line
    formats = parse_formats(fmt)
    at = parse_generated_at(generated_at)
    dask_pdfs(options.engine, options.scheduler, jobs)
    out = options.out
    assert out is not None  # --out is required by the command
    resolved = resolve_settings(which.db, which.data, which.settings)
    with current_store(resolved) as engine:
        statement = load_statement(
            engine, month, revision=which.revision, run_id=which.run_id, draft=which.draft,
            clients=clients, places=decimals, generated_at=at,
            data=DataDir(resolved.data) if resolved.data else None,
            currency=_currency(options.currency),
        )  # fmt: skip
        from tenantcost.store.catalog import names_of

        names = names_of(engine, [str(c) for c in statement.pack.clients])
    pack, chosen = statement.pack, statement.chosen
    with open_engine(options.engine, options.scheduler, options.workers) as cluster:
        dask = getattr(cluster, "client", None)
        written = write_pack(
            pack, out, formats, templates=templates, jobs=jobs, dask=dask, view=view, names=names
        )
    what = (
        f"revision {chosen.revision}"
        if chosen.revision is not None
        else f"draft of run {chosen.run_id}"
    )
    typer.echo(
        f"wrote {len(written)} files for {len(pack.clients)} client(s) of {month} ({what}) "
        f"to {out} (open {out / 'index.html'})"
    )  # the command's one output: on stdout


__all__ = ["FromDb", "report_from_db"]
