"""Every client id the store knows: what free text shown to a client's reader is redacted
against, outside a report pack (a pack redacts with the ids its run knows, so a revision
renders the same bytes whenever it is rendered again).

A client is known once a run or a statement names it, or a close recorded it among the ids
seen only in the usage or the rules (``run_pack.other_clients``). The set changes only when a
run or a close is recorded, so :func:`clients_version` (the count of runs, the latest month
event) tells a cache when to read it again: one query of counts, not a scan of clients.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, Engine, func, select, union

from tenantcost.store.connection import connected
from tenantcost.store.models import MonthEvent, Run, RunClient, RunPack, Statement, table


def known_clients(bind: Connection | Engine) -> frozenset[str]:
    """Every client id of every run, statement and recorded pack of the store."""
    rc, s, p = table(RunClient).c, table(Statement).c, table(RunPack).c
    names = union(select(rc.client), select(s.client)).subquery()
    with connected(bind) as connection:
        found = set(connection.execute(select(names.c.client)).scalars())
        for listed in connection.execute(select(p.other_clients)).scalars():  # one per close
            found.update(json.loads(listed))
    return frozenset(str(c) for c in found)


def clients_version(bind: Connection | Engine) -> tuple[int, int]:
    """Changes whenever :func:`known_clients` may: (runs recorded, latest month event id)."""
    runs = select(func.count()).select_from(table(Run)).scalar_subquery()
    event = select(func.coalesce(func.max(table(MonthEvent).c.id), 0)).scalar_subquery()
    with connected(bind) as connection:
        count, latest = connection.execute(select(runs, event)).one()
    return int(count), int(latest)


__all__ = ["clients_version", "known_clients"]
