"""Billing data in the store: which stored billing rows count, and the month's billing view.

Billing files (FOCUS 1.0–1.3, CUR 2.0) are ingested as ``billing`` batches
(:mod:`tenantcost.store.billing_ingest`): the reader's canonical columns in Parquet, one file
per billing period start, exact ``DECIMAL(38,18)`` amounts.

**Restated exports replace.** Cloud exports are rewritten several times a day until the
invoice is final, each time holding the whole billing period so far. A billing batch's cells
are its (BillingPeriodStart, BillingAccountId) pairs (``batch_cell``: ``window_start`` = the
billing period start, ``window_end`` its end, ``key`` the account): the rows of a cell that
count are those of the latest committed billing batch holding it, never a sum. Earlier
batches stay recorded (``batch list`` shows them ``superseded``); withdrawing the latest
brings the one before it back, as for any ``replace`` batch (:mod:`tenantcost.store.batches`).

``run`` opens the live rows of the billing periods overlapping its month as one DuckDB view
(:func:`stored_billing`: a scan of the Parquet files, semi-joined to the live cells; nothing
per row in Python), the same canonical view ``allocate --billing`` gets from the reader.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import duckdb
import pandas as pd
from sqlalchemy import Connection, Engine, func, select

from tenantcost.billing import BillingRun, prepare_billing
from tenantcost.config.billing import BILLING_MATCH_COLUMNS
from tenantcost.config.rules import RuleSet
from tenantcost.duck import quote
from tenantcost.errors import InputError
from tenantcost.store.connection import connected
from tenantcost.store.data import Store
from tenantcost.store.models import Batch, BatchCell, BatchFile, BillingCell, table
from tenantcost.windows import Period

KIND = "billing"
COLUMNS: tuple[str, ...] = (
    "x_file", "x_row", *BILLING_MATCH_COLUMNS, "BillingPeriodStart", "BillingPeriodEnd",
    "ChargePeriodStart", "ChargePeriodEnd", "BilledCost", "EffectiveCost", "BillingCurrency",
    "Tags",
)  # fmt: skip
"""The canonical billing view's columns (:mod:`tenantcost.readers.billing`), as stored."""
SPLIT_KIND = "billing_split"
"""The data directory folder of a billing batch's CUR 2.0 EKS split rows."""
SPLIT_COLUMNS: tuple[str, ...] = (
    "x_file", "x_row", "ChargePeriodStart", "ChargePeriodEnd", "ParentResourceId", "Cluster",
    "Namespace", "WorkloadName", "WorkloadType", "Node", "Pod", "SplitCost", "UnusedCost", "Tags",
)  # fmt: skip
"""The reader's ``split_view`` columns (``SPLIT_COLUMNS`` of :mod:`tenantcost.readers.billing`)."""
SPLIT_CELL = ("x_billing_period_start", "x_billing_account_id")
"""The billing cell a stored split row belongs to (replaced with it)."""
LIVE_COLUMNS = ["uid", "batch_id", "created_at", "window_start", "window_end", "key", "rows",
                "invoices", "charge_end", "coverage"]  # fmt: skip
_names = itertools.count(1)


@dataclass(frozen=True)
class StoredBilling:
    """A month's live billing rows as a TEMP VIEW on the run's DuckDB connection (the fields
    of the reader's ``BillingData``)."""

    view: str
    split_view: str | None
    origin: str
    files: list[str]
    rows: int


def live_cells(bind: Connection | Engine, period: Period) -> pd.DataFrame:
    """The billing cells overlapping ``period``, each with the batch whose rows count (the
    latest committed billing batch holding it) and its ``billing_cell`` figures
    (:data:`LIVE_COLUMNS`), by billing period and account."""
    b, c, bc = table(Batch).c, table(BatchCell).c, table(BillingCell).c
    latest = (
        select(c.window_start, c.key, func.max(b.id).label("batch_id"))
        .join_from(table(BatchCell), table(Batch), b.id == c.batch_id)
        .where(b.kind == KIND, b.status == "committed")
        .where(c.window_start < period.end.to_pydatetime(),
               c.window_end > period.start.to_pydatetime())
        .group_by(c.window_start, c.key)
        .subquery()
    )  # fmt: skip
    query = (
        select(b.uid, b.id, b.created_at, bc.billing_period_start, bc.billing_period_end,
               bc.billing_account_id, bc.rows, bc.invoices, bc.charge_end, bc.coverage)
        .join_from(table(BillingCell), table(Batch), b.id == bc.batch_id)
        .join(latest, (latest.c.batch_id == bc.batch_id)
              & (latest.c.window_start == bc.billing_period_start)
              & (latest.c.key == bc.billing_account_id))
        .order_by(bc.billing_period_start, bc.billing_account_id)
    )  # fmt: skip
    with connected(bind) as connection:
        rows = connection.execute(query).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=LIVE_COLUMNS)
    for column in ("created_at", "window_start", "window_end", "charge_end"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


def stored_billing(
    store: Store, period: Period, con: duckdb.DuckDBPyConnection
) -> StoredBilling | None:
    """The live billing rows of the billing periods overlapping ``period`` as a view on
    ``con``, and their CUR 2.0 EKS split rows as ``split_view`` (``None`` when there are
    none); ``None`` when the store has no billing data for it. Each row's ``x_file`` ends
    with ``(billing batch <uid>)``, so an error about it names the batch to withdraw."""
    cells = live_cells(store.engine, period)
    if cells.empty:
        return None
    f = table(BatchFile).c
    with store.engine.connect() as connection:
        paths = connection.execute(
            select(f.path).where(f.batch_id.in_(sorted(set(cells["batch_id"].tolist()))))
            .order_by(f.batch_id, f.day)
        ).scalars().all()  # fmt: skip
    if not store.data.local:
        from tenantcost.usage_source import register_filesystems

        register_filesystems(con, [store.data.protocol])
    n = next(_names)
    live = f"tc_billing_cells_{n}"
    con.register(live, cells[["uid", "window_start", "key"]].astype({"uid": str, "key": str}))
    main = [store.data.reader_path(str(p)) for p in paths if not str(p).startswith(SPLIT_KIND)]
    split = [store.data.reader_path(str(p)) for p in paths if str(p).startswith(SPLIT_KIND)]
    view = _live_view(con, f"tc_stored_billing_{n}", main, live, COLUMNS,
                      ("BillingPeriodStart", "BillingAccountId"))  # fmt: skip
    split_view = (_live_view(con, f"tc_stored_billing_split_{n}", split, live, SPLIT_COLUMNS,
                             SPLIT_CELL) if split else None)  # fmt: skip
    return StoredBilling(view, split_view, f"stored billing in {store.data.url}", main + split,
                         int(cells["rows"].sum()))  # fmt: skip


def _live_view(
    con: duckdb.DuckDBPyConnection,
    name: str,
    files: list[str],
    live: str,
    columns: tuple[str, ...],
    cell: tuple[str, str],
) -> str:
    """A TEMP VIEW of ``columns`` of the rows of ``files`` whose cell (``cell``: its billing
    period start and account columns) is live for the row's batch (the ``live`` frame)."""
    listed = ", ".join("'" + p.replace("'", "''") + "'" for p in files)
    selected = ", ".join(
        "u.x_file || ' (billing batch ' || left(u.x_uid, 12) || ')' AS x_file" if c == "x_file"
        else f"u.{quote(c)}" for c in columns
    )  # fmt: skip
    con.execute(rf"""CREATE OR REPLACE TEMP VIEW {name} AS SELECT {selected} FROM (
        SELECT *, regexp_extract(x_stored, '([0-9a-f]{{32}})\.parquet$', 1) AS x_uid
        FROM read_parquet([{listed}], filename = 'x_stored', hive_partitioning = false)) u
        SEMI JOIN {live} c ON c.uid = u.x_uid AND c.window_start = u.{quote(cell[0])}
            AND c.key = u.{quote(cell[1])}""")
    return name


def stored_billing_run(
    store: Store,
    period: Period,
    con: duckdb.DuckDBPyConnection,
    ruleset: RuleSet,
    costs: pd.DataFrame,
    *,
    allow_unbilled: bool,
) -> BillingRun | None:
    """The billing side of a stored month's allocation, as ``allocate --billing`` prepares
    it (:func:`tenantcost.inputs.open_billing_run`), from the stored billing rows; ``None``
    when the store holds none for the period."""
    data = stored_billing(store, period, con)
    if data is None:
        return None
    if ruleset.billing is None:
        raise InputError(
            f"the store holds billing data for {period.start:%Y-%m} but the stored rule file "
            "has no billing: section; load a rule file listing the clusters whose billed "
            "lines OpenCost prices (billing.clusters), or the node cost would be counted twice"
        )
    return prepare_billing(costs, con, data.view, ruleset, period=period,
                           allow_unbilled=allow_unbilled, origin=data.origin,
                           split_view=data.split_view)  # fmt: skip


__all__ = [
    "COLUMNS",
    "KIND",
    "LIVE_COLUMNS",
    "StoredBilling",
    "live_cells",
    "stored_billing",
    "stored_billing_run",
]
