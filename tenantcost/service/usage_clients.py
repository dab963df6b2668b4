"""The clients the store knows from usage alone: metered usage stored, no run yet.

Why: the client list reads statements and runs, so a store that holds the meter's usage of
five clients listed none of them until the first ``run``, and an admin who had just
connected the meter could not tell whether anything arrived. Finance and admin
(:func:`tenantcost.service.permissions.sees_usage_clients`) therefore also list the clients
of the live usage (:func:`tenantcost.store.usage_totals.usage_clients`, the rows ``run``
would read) that no run or statement names yet, marked "no statement yet"; product and
account managers keep reading issued statements only.

Each month's clients are read from Parquet once per change of that month's usage
(:func:`tenantcost.store.usage_totals.usage_version`, as the month page's usage totals), so
the meter's batches of the open month do not make the closed months read again; the
difference with the clients that have a figure is one query and an index difference, kept
per store generation (:mod:`tenantcost.service.memo`).
"""

from __future__ import annotations

from itertools import chain

import pandas as pd
from sqlalchemy import Engine, select, union

from tenantcost.service.memo import remembered
from tenantcost.store.data import Store
from tenantcost.store.models import RunClient, Statement, table
from tenantcost.store.usage_totals import usage_clients, usage_months, usage_version


def _month_clients(store: Store, month: str) -> list[str]:
    return remembered(store.engine, "usage_clients", (month,),
                      lambda: usage_clients(store, month),
                      lambda: usage_version(store.engine, month))  # fmt: skip


def usage_only_clients(engine: Engine, store: Store | None) -> tuple[str, ...]:
    """The clients of the stored usage that no run and no statement names, in id order
    (none when the service has no data directory); kept per store generation."""
    if store is None:
        return ()
    return remembered(engine, "usage_only_clients", (), lambda: _usage_only(engine, store))


def _usage_only(engine: Engine, store: Store) -> tuple[str, ...]:
    months = usage_months(engine)
    if not months:
        return ()
    seen = pd.Index(list(chain.from_iterable(_month_clients(store, m) for m in months)))
    known = union(select(table(Statement).c.client), select(table(RunClient).c.client))
    with engine.connect() as connection:
        figured = pd.Index([str(c) for c in connection.execute(known).scalars()])
    return tuple(str(c) for c in seen.unique().difference(figured).sort_values())


__all__ = ["usage_only_clients"]
