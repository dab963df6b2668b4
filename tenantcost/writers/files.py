"""The ``--out DIR`` files of an allocation: CSV tables plus the reconciliation JSON.

CSV amounts carry both an exact decimal (``amount``, in currency units) and the integer
micro-units (``amount_micros``) so spreadsheets and scripts read them without float drift.
Text cells that a spreadsheet would run as a formula get a leading ``'``
(:mod:`tenantcost.csv_cells`); ``amount`` is a number and is written as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tenantcost.csv_cells import neutralised
from tenantcost.errors import InputError
from tenantcost.kinds import Detail
from tenantcost.money import micros_to_decimal_strings
from tenantcost.reconcile import residual_summary
from tenantcost.result import AllocationResult
from tenantcost.timefmt import ISO_Z_FORMAT
from tenantcost.writers.json_output import reconciliation_document


def with_decimal_amount(frame: pd.DataFrame) -> pd.DataFrame:
    """Rename ``amount`` to ``amount_micros`` and put the exact decimal ``amount`` before it
    (and the same for a converted table's ``ledger_amount``)."""
    out = frame.copy()
    for name in ("amount", "ledger_amount"):
        if name not in out:
            continue
        out = out.rename(columns={name: f"{name}_micros"})
        out.insert(
            out.columns.get_loc(f"{name}_micros"),
            name,
            micros_to_decimal_strings(out[f"{name}_micros"]),
        )
    return out


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A result table as its CSV shows it: the exact decimal ``amount`` beside
    ``amount_micros``, and text cells neutralised for spreadsheets."""
    return neutralised(with_decimal_amount(frame), decimals=("amount", "ledger_amount"))


def prepare_out_dir(out: Path) -> None:
    """Create the output folder (one clear error if that is impossible)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output folder: {exc.strerror}", file=str(out)) from None


def write_outputs(result: AllocationResult, out: Path) -> list[Path]:
    """Write clients.csv, residual.csv, residual_by_window.csv, unattributed.csv,
    exclusions.csv and reconciliation.json into ``out``; return the paths written.

    ``lines.csv`` (one row per client, source and window) is streamed chunk by chunk while
    the allocation runs with ``lines_out`` (``tenantcost.engine.lines_csv``); only a
    window-level result writes it here.
    """
    prepare_out_dir(out)
    written: list[Path] = []

    def csv(name: str, frame: pd.DataFrame) -> None:
        path = out / name
        csv_frame(frame).to_csv(path, index=False, date_format=ISO_Z_FORMAT)
        written.append(path)

    csv("clients.csv", result.client_totals().assign(currency=result.currency))
    if result.detail == Detail.WINDOW:
        csv("lines.csv", result.lines)
    elif (out / "lines.csv").exists():
        written.append(out / "lines.csv")
    residual = pd.DataFrame(residual_summary(result))
    csv("residual.csv", residual)
    csv("residual_by_window.csv", result.residual)
    csv("unattributed.csv", result.unattributed)
    csv("exclusions.csv", result.exclusions)
    recon = reconciliation_document(result)
    path = out / "reconciliation.json"
    path.write_text(json.dumps(recon, indent=2) + "\n", encoding="utf-8")
    written.append(path)
    return written
