"""Usage totals per month, service and client: what the store's live usage adds up to.

Why it exists: usage measured where it happens (the meter, an OTLP export) arrives as many
small ``sum`` batches, and the first thing a newcomer wants to see is whether each client's
requests and CPU time arrived (``tenantcost status --usage``, the finance month page). The
figures must be the ones ``run`` would split by, so they are read through
:func:`tenantcost.store.stored.stored_usage`, the very rows ``run`` reads: committed batches
only, the latest ``replace`` batch of each cell and the ``sum`` batches after it, withdrawn
batches nowhere. They are aggregated in DuckDB (one ``GROUP BY`` per month over the Parquet
scan, no Python loop per row); only the (service, client) totals come back.

A client ``""`` is usage without a client (its cost is reported as unattributed). Numbers:
a metric column whose totals are all whole is given as integers (``requests``), any other
as floats rounded to 9 decimals (the sums of float columns carry binary noise beyond that;
usage values are at most 6 decimals in practice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd
from sqlalchemy import Engine, func, select

from tenantcost.gauge_usage import GaugedUsage
from tenantcost.key_units import gauge_measure
from tenantcost.split import quote
from tenantcost.store.data import Store
from tenantcost.store.models import Batch, BatchFile, BatchWithdrawal, table
from tenantcost.store.stored import days_of, stored_usage
from tenantcost.windows import Period

NO_CLIENT = "(no client)"
"""How tables and pages show the empty client (usage without a client)."""
DECIMALS = 9
_WHOLE_LIMIT = 2.0**53
"""Beyond this a double no longer holds every integer: such totals stay floats."""


@dataclass(frozen=True)
class UsageTotals:
    """One month's usage totals: ``rows`` has ``service, client`` and one column per metric,
    sorted by service and client; ``count`` is every (service, client) of the month (``rows``
    may be one page of them)."""

    month: str
    metrics: list[str]
    rows: pd.DataFrame
    count: int
    gauges: dict[str, str | None] = field(default_factory=dict)
    """The gauges among ``metrics`` (their unit): their figures are unit-hours, the time
    integral of the sampled level (byte-hours)."""

    def document(self) -> dict[str, Any]:
        """The month's object in ``status --usage --format json``: a gauge's figures are
        unit-hours (``gauges`` names them with their unit)."""
        document: dict[str, Any] = {"month": self.month, "metrics": list(self.metrics)}
        if self.gauges:  # only when the store declares some: the document is otherwise as before
            document["gauges"] = {g: {"unit": u, "measure": "unit-hours"}
                                  for g, u in self.gauges.items()}  # fmt: skip
        document["usage"] = _numbers(self.rows, self.metrics).to_dict("records")
        return document


def usage_months(engine: Engine) -> list[str]:
    """Every month ``YYYY-MM`` with a file of a committed usage batch, in order."""
    b, f = table(Batch).c, table(BatchFile).c
    query = (
        select(f.day)
        .join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
        .where(b.kind == "usage", b.status == "committed")
        .distinct()
    )
    with engine.connect() as connection:
        days = pd.Series(connection.execute(query).scalars().all(), dtype="object")
    return sorted(days.str[:7].unique().tolist()) if not days.empty else []


def usage_version(engine: Engine, month: str) -> tuple[int, int, int]:
    """What ``month``'s usage totals depend on: the newest and the number of batch files on
    the days that can hold its windows (batch ids are given at commit and only grow), and the
    store's withdrawals. Committing a batch of another month changes none of it; compaction
    folds files without changing what they add up to. Read by the ``(day, batch_id)`` index
    alone, never by walking the batches."""
    f = table(BatchFile).c
    first, last = days_of(Period.month(month))
    files = select(func.coalesce(func.max(f.batch_id), 0), func.count()).where(
        f.day >= first, f.day <= last
    )
    withdrawn = select(func.count()).select_from(table(BatchWithdrawal))
    with engine.connect() as connection:
        newest, count = connection.execute(files).one()
        withdrawals = connection.execute(withdrawn).scalar() or 0
    return int(newest), int(count), int(withdrawals)


def usage_totals(
    store: Store,
    month: str,
    con: duckdb.DuckDBPyConnection | None = None,
    *,
    limit: int | None = None,
    offset: int = 0,
) -> UsageTotals:
    """The live usage of ``month`` summed per service and client (``limit`` rows from
    ``offset`` of them, for a page; all by default)."""
    from tenantcost.split import connect

    con = con if con is not None else connect()
    source = stored_usage(store, Period.month(month), con)
    if source is None:
        return UsageTotals(month, [], _empty([]), 0)
    metrics = list(source.metrics)
    gauges = (
        {g: m.unit for g, m in source.gauges.items()} if isinstance(source, GaugedUsage) else {}
    )
    sums = ", ".join(f"fsum({quote(m)}) AS {quote(m)}" for m in metrics)
    grouped = (
        f"SELECT service, client, {sums} FROM ({source.relation(con)}) GROUP BY service, client"
    )
    counted = con.execute(f"SELECT count(*) FROM ({grouped})").fetchall()
    page = f" LIMIT {int(limit)} OFFSET {int(offset)}" if limit is not None else ""
    rows = con.execute(f"{grouped} ORDER BY service, client{page}").df()
    return UsageTotals(month, metrics, rows, int(counted[0][0]) if counted else 0, gauges)


def usage_clients(store: Store, month: str) -> list[str]:
    """The clients named in ``month``'s live usage (not the empty client), in order: who the
    store knows from usage, run or not (one ``DISTINCT`` in DuckDB over the Parquet scan)."""
    from tenantcost.split import connect

    con = connect()
    source = stored_usage(store, Period.month(month), con)
    if source is None:
        return []
    query = (
        f"SELECT DISTINCT client FROM ({source.relation(con)}) "
        "WHERE client IS NOT NULL AND client <> '' ORDER BY client"
    )
    return [str(row[0]) for row in con.execute(query).fetchall()]


def all_usage_totals(store: Store, month: str | None = None) -> list[UsageTotals]:
    """``month`` alone (even without usage), else every month with stored usage."""
    from tenantcost.split import connect

    con = connect()
    months = [month] if month is not None else usage_months(store.engine)
    return [usage_totals(store, m, con) for m in months]  # one GROUP BY per month


def totals_document(totals: list[UsageTotals]) -> dict[str, Any]:
    """``status --usage --format json``."""
    return {"months": [t.document() for t in totals]}


def totals_table(totals: list[UsageTotals]) -> str:
    """``status --usage`` as a text table: one row per (month, service, client), each metric
    column in plain decimals aligned on the point (:func:`shown_column`); ``-`` where a month
    has no such metric."""
    from tenantcost.writers.text import render_table

    metrics = list(dict.fromkeys(m for t in totals for m in t.metrics))
    frames = [t.rows.assign(month=t.month) for t in totals if not t.rows.empty]
    if not frames:
        return "(no stored usage)"
    rows = pd.concat(frames, ignore_index=True).reindex(
        columns=["month", "service", "client", *metrics]
    )
    gauges = {g: u for t in totals for g, u in t.gauges.items()}
    scale = {g: gauge_measure(u) for g, u in gauges.items()}  # byte-hours as GiB-hours
    columns = [rows["month"].astype(str).tolist(), rows["service"].astype(str).tolist(),
               [shown_client(str(c)) for c in rows["client"]],
               *(shown_column(rows[m] / scale[m][1] if m in scale else rows[m])
                 for m in metrics)]  # fmt: skip
    header = ["month", "service", "client",
              *(f"{m} ({scale[m][0]})" if m in scale else m for m in metrics)]  # fmt: skip
    return render_table(header, [list(r) for r in zip(*columns, strict=True)],
                        set(range(3, len(header))))  # fmt: skip


def shown_column(values: pd.Series, *, thousands: bool = False) -> list[str]:
    """A metric column as people read it: plain decimals (``0.000097``, never ``9.7e-05``),
    every value with as many decimals as the column's most precise total needs (at most
    :data:`DECIMALS`), so the column lines up on the point; ``-`` for a missing value.
    ``thousands``: with separators (``66,348.5``), as the pages show figures."""
    numbers = pd.to_numeric(values, errors="coerce").astype("float64")
    present = numbers.dropna().round(DECIMALS)
    decimals = next(
        (d for d in range(DECIMALS) if bool((present.round(d) == present).all())), DECIMALS
    )
    spec = f"{',' if thousands else ''}.{decimals}f"
    return ["-" if pd.isna(v) else format(v + 0.0, spec) for v in numbers.round(DECIMALS)]


def shown_client(client: str) -> str:
    """A client as tables and pages show it: ``(no client)`` for usage without one."""
    return client if client else NO_CLIENT


def _numbers(rows: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Each metric column as integers when all its totals are whole, else rounded floats
    (column by column, not per value: a column keeps one type)."""
    out = rows.astype({"service": "object", "client": "object"})
    for metric in metrics:
        values = out[metric].astype("float64")
        whole = bool(((values % 1 == 0) & (values.abs() < _WHOLE_LIMIT)).all())
        out[metric] = values.astype("int64") if whole else values.round(DECIMALS)
        out[metric] = out[metric].astype("object")  # Python numbers for json.dumps
    return out


def _empty(metrics: list[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=["service", "client", *metrics])


__all__ = [
    "NO_CLIENT",
    "UsageTotals",
    "all_usage_totals",
    "shown_client",
    "shown_column",
    "totals_document",
    "totals_table",
    "usage_clients",
    "usage_months",
    "usage_totals",
]
