"""The store's generation: one cheap query telling a reader's cache that the store changed.

The service's pages summarise the store (coverage per month, a run's cascade and key tables,
the usage totals), and each summary took tens to hundreds of milliseconds per request while
the store changes a few times a day. What a summary reads changes only when a batch is
committed (batch ids are given at commit and only grow), a batch is withdrawn, a run is
recorded, a month is closed or reopened (a close also records the issued run's report
figures) or a catalog is loaded; :func:`store_generation` reads the five counters of those,
each from a primary key or a small table, so a cache keyed by it is never stale and costs one
round trip (:mod:`tenantcost.service.memo`).
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine, func, select

from tenantcost.store.connection import connected
from tenantcost.store.models import Batch, BatchWithdrawal, CatalogLoad, MonthEvent, Run, table


def store_generation(bind: Connection | Engine) -> tuple[int, ...]:
    """(latest batch id, withdrawals, runs, latest month event id, latest catalog load id)."""
    counters = [
        select(func.coalesce(func.max(table(Batch).c.id), 0)),
        select(func.count()).select_from(table(BatchWithdrawal)),
        select(func.count()).select_from(table(Run)),
        select(func.coalesce(func.max(table(MonthEvent).c.id), 0)),
        select(func.coalesce(func.max(table(CatalogLoad).c.id), 0)),
    ]
    with connected(bind) as connection:
        row = connection.execute(select(*(c.scalar_subquery() for c in counters))).one()
    return tuple(int(v) for v in row)


__all__ = ["store_generation"]
