"""``tenantcost ingest billing``: billing files into the store as one atomic batch.

The files are read by the same reader as ``allocate --billing``
(:func:`tenantcost.readers.billing.open_billing`, with the store's rule file's ``currency:``
and ``billing.focus_allocations``, which is therefore applied at ingest), so a row
``allocate`` refuses is refused here with the same one line, before anything is written. The
reader's canonical view is written by DuckDB ``COPY`` straight to Parquet (exact
``DECIMAL(38,18)`` amounts, UTC timestamps; never a frame of every row), one file per billing
period start, through the same atomic batch as costs and usage (:mod:`tenantcost.store.ingest`).
A billing batch replaces what earlier ones held for its (billing period, billing account)
cells (:mod:`tenantcost.store.billing`).

**Coverage.** What each cell covers is kept in ``billing_cell`` at ingest: the merged spans of
its usage lines' charge periods (``ChargeCategory = Usage``; corrections of earlier periods
aside). Recurring fees, purchases, tax and credits span the whole billing period and are
booked at its start or its end, so they say nothing about how far the export has got; usage
lines are hourly or daily and stop where the export stops
(:func:`tenantcost.store.status.billing_coverage`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import duckdb
import pandas as pd
from sqlalchemy import Connection, insert, select

from tenantcost.errors import InputError
from tenantcost.store.billing import COLUMNS, KIND, quote
from tenantcost.store.data import Store
from tenantcost.store.ingest import (
    Ingested,
    InTransaction,
    _cells,
    _connect,
    _Part,
    _Shape,
    _store_batch,
    _writing,
)
from tenantcost.store.models import Batch, BillingCell, table
from tenantcost.timefmt import iso_z


class BillingViews(Protocol):
    """What the reader gives (``tenantcost.readers.billing.BillingData``)."""

    @property
    def view(self) -> str: ...
    @property
    def split_view(self) -> str | None: ...
    @property
    def origin(self) -> str: ...


def ingest_billing(
    store: Store,
    paths: Sequence[str | Path],
    *,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
    in_transaction: InTransaction | None = None,
) -> Ingested:
    """Ingest billing files and folders as one batch (the module docstring)."""
    from tenantcost.readers.billing import open_billing
    from tenantcost.store.runs import stored_rules

    ruleset = stored_rules(store.engine).ruleset  # the currency the billing data must be in
    allocations = ruleset.billing.focus_allocations if ruleset.billing is not None else "origin"
    con = _connect()
    data = open_billing([str(p) for p in paths], con, currency=ruleset.currency,
                        focus_allocations=allocations)  # fmt: skip
    return ingest_billing_views(store, data, con, actor=actor, dry_run=dry_run, wait=wait,
                                in_transaction=in_transaction)  # fmt: skip


def ingest_billing_views(
    store: Store,
    data: BillingViews,
    con: duckdb.DuckDBPyConnection,
    *,
    actor: str,
    dry_run: bool = False,
    wait: float = 0.0,
    in_transaction: InTransaction | None = None,
) -> Ingested:
    """Store the reader's canonical view ``data.view`` as one billing batch."""
    _refuse_split_rows(con, data)
    cells = _cell_summary(con, data.view)
    if cells.empty:
        raise InputError("no billing rows to ingest", file=data.origin)
    shape = _Shape(KIND, data.origin, "replace", int(cells["rows"].sum()), 0,
                   cells["window_start"].min(), cells["window_end"].max())  # fmt: skip
    frame = _cells(cells["window_start"], cells["window_end"], cells["key"])
    if dry_run:
        return shape.dry_run(len(frame))

    def build(_conn: Connection, folder: Path) -> tuple[list[_Part], pd.DataFrame]:
        return _billing_files(con, data.view, cells, folder), frame

    def record(conn: Connection, done: Ingested) -> None:
        _record_cells(conn, done.uid, cells)
        if in_transaction is not None:
            in_transaction(conn, done)

    return _store_batch(store, shape, actor, wait, build, record)


def _refuse_split_rows(con: duckdb.DuckDBPyConnection, data: BillingViews) -> None:
    """CUR 2.0 EKS split rows carry no billing period to be replaced by: the store refuses
    them rather than keep part of what the files say."""
    if data.split_view is None:
        return
    count = int(con.execute(f"SELECT count(*) FROM {data.split_view}").fetchall()[0][0])
    if count:
        raise InputError(
            f"{count} CUR 2.0 split cost allocation row(s) (split_line_item_*): the store "
            "does not keep them yet; allocate a cluster with costs_from: "
            "split_cost_allocation from the files (`tenantcost allocate --billing PATH`)",
            file=data.origin,
        )


_CELLS = """
    SELECT BillingPeriodStart AS window_start, BillingPeriodEnd AS window_end,
           BillingAccountId AS key, count(*) AS rows,
           list(DISTINCT InvoiceId ORDER BY InvoiceId) AS invoices,
           max(ChargePeriodEnd) AS charge_end
    FROM {view} GROUP BY ALL ORDER BY window_start, key, window_end"""
_SPANS = """
    WITH u AS (
        SELECT DISTINCT BillingPeriodStart AS s, BillingAccountId AS a,
               ChargePeriodStart AS cs, ChargePeriodEnd AS ce
        FROM {view}
        WHERE ChargeCategory = 'Usage' AND ChargeClass <> 'Correction'
          AND ChargePeriodEnd > ChargePeriodStart),
    o AS (
        SELECT *, max(ce) OVER (PARTITION BY s, a ORDER BY cs, ce ROWS BETWEEN
               UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach FROM u),
    g AS (
        SELECT *, sum(CASE WHEN reach IS NULL OR cs > reach THEN 1 ELSE 0 END) OVER
               (PARTITION BY s, a ORDER BY cs, ce ROWS UNBOUNDED PRECEDING) AS island
        FROM o)
    SELECT s, a, min(cs) AS start, max(ce) AS "end" FROM g
    GROUP BY s, a, island ORDER BY s, a, start"""
"""Gaps and islands: the merged spans of each cell's usage charge periods (a few rows out)."""


def _cell_summary(con: duckdb.DuckDBPyConnection, view: str) -> pd.DataFrame:
    """Per (billing period, account) cell: rows, invoices, last charge end and the merged
    spans of its usage lines (``coverage``), computed in DuckDB."""
    cells = con.execute(_CELLS.format(view=view)).df()
    spans = con.execute(_SPANS.format(view=view)).df()
    for frame, columns in ((cells, ["window_start", "window_end", "charge_end"]),
                           (spans, ["s", "start", "end"])):  # fmt: skip
        for column in columns:
            frame[column] = pd.to_datetime(frame[column], utc=True)
    cells["key"] = cells["key"].astype(str)
    by_cell = {
        (s, str(a)): [[iso_z(r.start), iso_z(r.end)] for r in group.itertuples()]
        for (s, a), group in spans.groupby(["s", "a"], sort=False)
    }  # one entry per cell: a few
    starts, keys = cells["window_start"].tolist(), cells["key"].tolist()
    cells["coverage"] = [by_cell.get((s, k), []) for s, k in zip(starts, keys, strict=True)]
    return cells


def _billing_files(
    con: duckdb.DuckDBPyConnection, view: str, cells: pd.DataFrame, folder: Path
) -> list[_Part]:
    """One Parquet file per billing period start (DuckDB ``COPY``: streamed, exact types),
    rows in the view's order (the files' order: the same input gives the same bytes)."""
    columns = ", ".join(quote(c) for c in COLUMNS)
    parts = []
    starts = cells.groupby("window_start", sort=True)["rows"].sum()
    for start, rows in starts.items():  # one per billing period: a few
        day = f"{pd.Timestamp(start):%Y-%m-%d}"
        built = folder / f"{day}.parquet"
        target = str(built).replace("'", "''")
        at = pd.Timestamp(start).isoformat().replace("'", "")
        with _writing(built):
            con.execute(
                f"COPY (SELECT {columns} FROM {view} WHERE BillingPeriodStart = "
                f"'{at}'::TIMESTAMPTZ) TO '{target}' (FORMAT parquet)"
            )
        parts.append(_Part(day, built, int(rows)))
    return parts


def _record_cells(conn: Connection, uid: str, cells: pd.DataFrame) -> None:
    """The batch's ``billing_cell`` rows (in its write transaction)."""
    batch_id = conn.execute(select(table(Batch).c.id).where(table(Batch).c.uid == uid)).scalar()
    records = [
        {
            "batch_id": batch_id,
            "billing_period_start": r.window_start.to_pydatetime(),
            "billing_period_end": r.window_end.to_pydatetime(),
            "billing_account_id": r.key,
            "rows": int(r.rows),
            "invoices": json.dumps([str(i) for i in r.invoices]),
            "charge_end": r.charge_end.to_pydatetime(),
            "coverage": json.dumps(r.coverage),
        }
        for r in cells.itertuples()
    ]  # fmt: skip  (one per cell: a few)
    conn.execute(insert(table(BillingCell)), records)


__all__ = ["BillingViews", "ingest_billing", "ingest_billing_views"]
