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

CUR 2.0 EKS split cost allocation rows (the reader's ``split_view``) are stored beside
them (``billing_split/``), each with the billing cell whose period holds its charge period,
and replaced with it.

**Refused before anything is written** (``--dry-run`` too), besides the reader's checks: an
exact duplicate line among all the files of the call, unless ``keep_duplicates``
(:mod:`tenantcost.readers.billing_duplicates`), and a billing period whose lines, with the
live lines of its other accounts, would total more than
:data:`~tenantcost.limits.MAX_AMOUNT_TOTAL` micro-units, the total ``run`` holds exactly.

**Coverage.** What each cell covers is kept in ``billing_cell`` at ingest: the merged spans of
its usage lines' charge periods (``ChargeCategory = Usage``; corrections of earlier periods
aside). Recurring fees, purchases, tax and credits span the whole billing period and are
booked at its start or its end, so they say nothing about how far the export has got; usage
lines are hourly or daily and stop where the export stops
(:func:`tenantcost.store.status.billing_coverage`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import duckdb
import pandas as pd
from sqlalchemy import Connection, insert, select

from tenantcost.errors import InputError
from tenantcost.limits import MAX_AMOUNT_TOTAL
from tenantcost.store.billing import (
    COLUMNS,
    KIND,
    SPLIT_CELL,
    SPLIT_COLUMNS,
    SPLIT_KIND,
    live_cells,
    quote,
    stored_billing,
)
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

_names = itertools.count(1)


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
    keep_duplicates: bool = False,
) -> Ingested:
    """Ingest billing files and folders as one batch (the module docstring). A line repeating
    another exactly (every column, within all ``paths``) is refused unless ``keep_duplicates``
    (:mod:`tenantcost.readers.billing_duplicates`)."""
    from dataclasses import replace

    from tenantcost.readers.billing import SUFFIXES, describe_paths, open_billing, read_error
    from tenantcost.readers.billing_duplicates import find_duplicate
    from tenantcost.readers.object_storage import fetched
    from tenantcost.store.month_inputs import stored_rules

    ruleset = stored_rules(store.engine).ruleset  # the currency the billing data must be in
    allocations = ruleset.billing.focus_allocations if ruleset.billing is not None else "origin"
    con = _connect()
    with fetched(paths, SUFFIXES) as local:  # object storage URLs: read from local copies
        try:
            data = open_billing(local.paths, con, currency=ruleset.currency,
                                focus_allocations=allocations, shown_as=local.copies)  # fmt: skip
            data = replace(data, origin=describe_paths(paths))  # the URLs, not the copies
            if not keep_duplicates:
                try:
                    duplicate = find_duplicate(con, data.sources)
                except duckdb.Error as exc:
                    raise read_error(con, data.sources, exc, data.origin) from None
                if duplicate is not None:
                    raise duplicate
            return ingest_billing_views(store, data, con, actor=actor, dry_run=dry_run,
                                        wait=wait, in_transaction=in_transaction)  # fmt: skip
        except InputError as exc:
            raise local.restore(exc) from exc.__cause__


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
    cells = _cell_summary(con, data.view)
    if cells.empty:
        raise InputError("no billing rows to ingest", file=data.origin)
    _check_period_totals(store, con, data, cells)
    split = _split_cells(con, data, cells)
    shape = _Shape(KIND, data.origin, "replace", int(cells["rows"].sum()), 0,
                   cells["window_start"].min(), cells["window_end"].max())  # fmt: skip
    frame = _cells(cells["window_start"], cells["window_end"], cells["key"])
    if dry_run:
        return shape.dry_run(len(frame))

    def build(_conn: Connection, folder: Path) -> tuple[list[_Part], pd.DataFrame]:
        parts = _billing_files(con, data.view, cells, folder)
        return parts + _split_files(con, split, cells, folder), frame

    def record(conn: Connection, done: Ingested) -> None:
        _record_cells(conn, done.uid, cells)
        if in_transaction is not None:
            in_transaction(conn, done)

    return _store_batch(store, shape, actor, wait, build, record)


def _split_cells(con: duckdb.DuckDBPyConnection, data: BillingViews, cells: pd.DataFrame) -> str:
    """The CUR 2.0 EKS split rows, each with the billing cell it belongs to (the one whose
    billing period holds its charge period start; it must be a single one, else one line
    naming the row), as a TEMP VIEW (empty without split rows): they are then replaced with
    their cell like the other rows."""
    name = f"tc_split_cells_{next(_names)}"
    con.register(f"{name}_cells", cells[["window_start", "window_end", "key"]])
    if data.split_view is None:
        con.execute(f"CREATE TEMP VIEW {name} AS SELECT NULL::TIMESTAMPTZ AS "
                    "x_billing_period_start WHERE FALSE")  # fmt: skip
        return name
    source, columns = data.split_view, ", ".join(f"s.{quote(c)}" for c in SPLIT_COLUMNS)
    con.execute(f"""CREATE TEMP VIEW {name} AS SELECT {columns},
        c.window_start AS x_billing_period_start, c.key AS x_billing_account_id
        FROM {source} s JOIN {name}_cells c ON s.ChargePeriodStart >= c.window_start
            AND s.ChargePeriodStart < c.window_end""")
    found = con.execute(f"""SELECT s.x_file, s.x_row, count(c.x_row) FROM {source} s
        LEFT JOIN {name} c ON c.x_file = s.x_file AND c.x_row = s.x_row
        GROUP BY ALL HAVING count(c.x_row) <> 1 ORDER BY s.x_file, s.x_row LIMIT 1""").fetchall()
    if found:
        file, row, count = found[0]
        raise InputError(
            f"split cost allocation row: {count} billing periods and accounts of the data "
            "hold its charge period, so the billing period it belongs to cannot be told; "
            "ingest each billing account's export in its own batch",
            file=str(file), where=f"row {row}", column="line_item_usage_start_date",
        )  # fmt: skip
    return name


_CELLS = """
    SELECT BillingPeriodStart AS window_start, BillingPeriodEnd AS window_end,
           BillingAccountId AS key, count(*) AS rows,
           sum(abs(BilledCost)::DOUBLE) AS billed_abs,
           sum(abs(EffectiveCost)::DOUBLE) AS effective_abs,
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


MAX_PERIOD_TOTAL = MAX_AMOUNT_TOTAL / 1_000_000
"""The largest total of a billing period's lines, in currency units (one trillion):
:data:`~tenantcost.limits.MAX_AMOUNT_TOTAL` micro-units, the total ``run`` holds exactly."""


def _check_period_totals(
    store: Store, con: duckdb.DuckDBPyConnection, data: BillingViews, cells: pd.DataFrame
) -> None:
    """Refuse a batch after which a billing period's lines would total more than
    :data:`MAX_PERIOD_TOTAL` (the sum of absolute amounts, BilledCost and EffectiveCost each):
    the live lines of the period's other accounts, which this batch does not replace, plus
    the batch's. ``run`` sums a month's lines in ``int64`` micro-units; a total beyond
    :data:`~tenantcost.limits.MAX_AMOUNT_TOTAL` (1e18, a ninth of ``int64``) is refused here,
    naming the line at which the running total passes it, instead of failing every run of
    the month. Totals are doubles: exact enough for a limit nine times below the overflow."""
    stored = _stored_totals(store, con, cells)
    for column, label in (("billed_abs", "BilledCost"), ("effective_abs", "EffectiveCost")):
        batch = cells.groupby("window_start")[column].sum()
        for start, total in batch.items():  # one per billing period: a few
            before = stored.get((pd.Timestamp(start), column), 0.0)
            if before + float(total) > MAX_PERIOD_TOTAL:
                _raise_period_total(con, data.view, pd.Timestamp(start), label, before)


def _stored_totals(
    store: Store, con: duckdb.DuckDBPyConnection, cells: pd.DataFrame
) -> dict[tuple[pd.Timestamp, str], float]:
    """(billing period start, column) -> the absolute total of the live stored lines of that
    period whose cell the batch does not replace (none read when there are no such cells)."""
    from tenantcost.windows import Period

    period = Period(cells["window_start"].min(), cells["window_end"].max())
    live = live_cells(store.engine, period)
    starts = set(cells["window_start"])
    replaced = set(zip(cells["window_start"], cells["key"], strict=True))
    kept = live[
        [
            s in starts and (s, str(k)) not in replaced
            for s, k in zip(live["window_start"], live["key"], strict=True)
        ]
    ]  # few cells
    if kept.empty:
        return {}
    view = stored_billing(store, period, con)
    if view is None:
        return {}
    name = f"tc_kept_cells_{next(_names)}"
    con.register(name, kept[["window_start", "key"]].astype({"key": str}))
    rows = con.execute(f"""SELECT v.BillingPeriodStart, sum(abs(v.BilledCost)::DOUBLE),
        sum(abs(v.EffectiveCost)::DOUBLE) FROM {view.view} v SEMI JOIN {name} k
        ON k.window_start = v.BillingPeriodStart AND k.key = v.BillingAccountId
        GROUP BY ALL""").fetchall()
    totals: dict[tuple[pd.Timestamp, str], float] = {}
    for start, billed, effective in rows:
        totals[(pd.Timestamp(start), "billed_abs")] = float(billed or 0)
        totals[(pd.Timestamp(start), "effective_abs")] = float(effective or 0)
    return totals


def _raise_period_total(con: duckdb.DuckDBPyConnection, view: str, start: pd.Timestamp,
                        column: str, before: float) -> None:  # fmt: skip
    """Name the batch line at which the period's running total passes the limit."""
    at = start.isoformat()
    found = con.execute(f"""SELECT x_file, x_row FROM (
        SELECT x_file, x_row, ? + sum(abs({quote(column)})::DOUBLE) OVER (
            ORDER BY x_file, x_row ROWS UNBOUNDED PRECEDING) AS running
        FROM {view} WHERE BillingPeriodStart = ?::TIMESTAMPTZ)
        WHERE running > ? ORDER BY x_file, x_row LIMIT 1""",
        [before, at, MAX_PERIOD_TOTAL]).fetchall()  # fmt: skip
    file, row = (str(found[0][0]), f"row {found[0][1]}") if found else (view, None)
    stored = f", {before:,.0f} of it already stored for other accounts" if before else ""
    raise InputError(
        f"the billing period starting {iso_z(start)} would total more than"
        f" {MAX_PERIOD_TOTAL:,.0f} in absolute amounts at this line{stored}: the largest total"
        " a run holds exactly (docs/store.md)",
        file=file, where=row, column=column,
    )  # fmt: skip


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


def _split_files(
    con: duckdb.DuckDBPyConnection, split: str, cells: pd.DataFrame, folder: Path
) -> list[_Part]:
    """The split rows, one file per billing period start under ``billing_split/``, with the
    cell each belongs to (``x_billing_period_start``, ``x_billing_account_id``)."""
    columns = ", ".join(quote(c) for c in (*SPLIT_COLUMNS, *SPLIT_CELL))
    counts = dict(con.execute(f"SELECT x_billing_period_start, count(*) FROM {split} "
                              "GROUP BY ALL").fetchall())  # fmt: skip
    parts = []
    for start in sorted(set(cells["window_start"])):  # one per billing period: a few
        at = pd.Timestamp(start)
        rows = next((int(n) for s, n in counts.items() if pd.Timestamp(s) == at), 0)
        if not rows:
            continue
        day = f"{at:%Y-%m-%d}"
        built = folder / f"{day}.split.parquet"
        target = str(built).replace("'", "''")
        with _writing(built):
            con.execute(
                f"COPY (SELECT {columns} FROM {split} WHERE x_billing_period_start = "
                f"'{at.isoformat()}'::TIMESTAMPTZ) TO '{target}' (FORMAT parquet)"
            )
        parts.append(_Part(day, built, rows, kind=SPLIT_KIND))
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
