"""``tenantcost export focus``: the allocation as a FOCUS file (docs/focus.md).

The run sequence of the other allocating commands (load the inputs, open the engine, allocate,
check the cascade). A FOCUS row covers one charge period (a day or an hour), so each chunk
also sums its window-level client lines per charge period (``ChargeLinesSink``): memory stays
bounded by a chunk, as for ``allocate --out``. Imported only when the command runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import cast

import typer

from tenantcost.allocate import allocate_stream
from tenantcost.cli.run import opened
from tenantcost.cli.shell import RunOptions
from tenantcost.errors import InputError, InternalError
from tenantcost.kinds import Detail
from tenantcost.money import format_amount
from tenantcost.progress import chunk_progress
from tenantcost.reconcile import cascade, require_closed
from tenantcost.writers.focus import (
    ChargeLinesSink,
    FocusVersion,
    Grain,
    batches,
    charge_items,
    check_options,
    focus_rows,
    write_focus,
)

BATCH_ROWS = 200_000
"""Rows built and written at a time: an hourly month for thousands of clients is millions of
rows, built in batches so memory holds one batch of FOCUS rows, not the file."""


def check_choices(out: Path, grain: str, version: str) -> tuple[Grain, FocusVersion]:
    """Refuse a bad ``--out`` suffix, ``--grain`` or ``--focus-version`` before any input is
    read (a month of usage is not read to learn that the file name is wrong)."""
    if out.suffix.lower() not in (".parquet", ".csv"):
        raise InputError("--out: the FOCUS file must end in .parquet or .csv", file=str(out))
    check_options(version, grain)
    return cast(Grain, grain), cast(FocusVersion, version)


def export_focus(options: RunOptions, out: Path, grain_text: str, version_text: str) -> None:
    """Allocate, build the FOCUS rows, write them; say how many and that they add up."""
    grain, version = check_choices(out, grain_text, version_text)
    with (
        ChargeLinesSink(out.parent / f".{out.name}.parts", grain) as sink,
        # --out is this command's file, not a folder for OpenCost API responses.
        opened(dataclasses.replace(options, out=None)) as run,
        chunk_progress("allocating") as progress,
    ):
        result = allocate_stream(
            run.inputs.allocation_costs,
            run.inputs.usage,
            run.inputs.ruleset,
            period=run.period,
            detail=Detail.PERIOD,
            chunk=run.chunk,
            progress=progress,
            rules_origin=str(run.inputs.config),
            con=run.inputs.con,
            engine=run.engine,
            lines_sink=sink,
            billed=run.inputs.billing,
        )
        clients = sink.collect()
    require_closed(cascade(result))
    items = charge_items(result, grain, clients)
    total = int(items["amount"].sum())
    if total != result.reference_total:
        raise InternalError(
            f"the FOCUS rows sum to {total} micro-units, the reference total is "
            f"{result.reference_total}"
        )
    focus = run.inputs.ruleset.focus
    rows = write_focus(
        (focus_rows(b, result.currency, focus, version) for b in batches(items, BATCH_ROWS)),
        out,
    )
    typer.echo(
        f"wrote {rows} FOCUS {version} rows ({grain}) to {out}: EffectiveCost "
        f"{format_amount(total, 6)} {result.currency} = reference total",
        err=True,
    )
