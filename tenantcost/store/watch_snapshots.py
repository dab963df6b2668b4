"""What ``tenantcost watch`` found, kept per run so the service can show it.

``watch`` allocates the hours covered so far and scores each client's days (a few seconds to
minutes on a large month): far too slow for a page view. So each run of ``watch`` on the store
records its answer here, and the service reads the latest one of a month
(:func:`latest_snapshot`). The JSON contract of ``watch --format json`` is split in two:

* ``watch_snapshot``: the month-level part (``month``, ``as_of``, ``money`` and the warnings
  that belong to no client: a day without costs, unbilled estimates, no data yet);
* ``watch_entry``: one row per client, its object of ``clients`` with its own ``anomalies``,
  ``rule_changes`` and ``warnings`` inside (``entry``), plus the columns lists sort and filter
  on. An account manager's page reads its client's row and nothing else, so no other
  client's figure can reach it (the privacy rule of :mod:`tenantcost.service.permissions`).

:func:`snapshot_document` joins the two back into the contract's shape, byte for byte the
document that was recorded (lists in their recorded order).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import pandas as pd
from sqlalchemy import BigInteger, Connection, Engine, case, cast, func, insert, select

from tenantcost.store.connection import connected
from tenantcost.store.models import WatchEntry, WatchSnapshot, table, utcnow

CLIENT_LISTS = ("anomalies", "rule_changes", "warnings")
"""The contract's lists whose items name a client (each goes with its client's entry)."""


@dataclass(frozen=True)
class Snapshot:
    """A recorded watch run: its month-level part (``document`` without ``clients`` and with
    only the warnings of no client)."""

    id: int
    month: str
    as_of: datetime
    computed_at: datetime
    actor: str
    month_closed: bool
    currency: str
    document: dict[str, Any]


def record_watch(
    engine: Engine,
    document: dict[str, Any],
    actor: str,
    month_closed: bool,
    daily: pd.DataFrame | None = None,
) -> int:
    """Record one watch answer (the JSON contract's document); its snapshot id. ``daily``:
    the watch's daily figures, kept per client and summed (:mod:`tenantcost.store.
    watch_daily`) in the same transaction."""
    clients = document.get("clients", [])
    per_client: dict[str, dict[str, list[Any]]] = {
        str(c["client"]): {name: [] for name in CLIENT_LISTS} for c in clients
    }
    month_level = {k: v for k, v in document.items() if k not in ("clients", *CLIENT_LISTS)}
    month_level["warnings"] = []
    for name in CLIENT_LISTS:
        for item in document.get(name, []):
            owner = item.get("client")
            if owner is None or str(owner) not in per_client:
                month_level.setdefault(name, []).append(item)
            else:
                per_client[str(owner)][name].append(item)
    with engine.begin() as connection:
        snapshot_id = _insert_snapshot(connection, document, month_level, actor, month_closed)
        rows = [_entry_row(snapshot_id, c, per_client[str(c["client"])]) for c in clients]
        if rows:
            connection.execute(insert(table(WatchEntry)), rows)
        if daily is not None:
            from tenantcost.store.watch_daily import insert_daily

            anomalies = list(document.get("anomalies", []))
            insert_daily(connection, snapshot_id, daily, document["month"], anomalies)
    return snapshot_id


def _insert_snapshot(
    connection: Connection,
    document: dict[str, Any],
    month_level: dict[str, Any],
    actor: str,
    month_closed: bool,
) -> int:
    values = {
        "month": document["month"],
        "as_of": datetime.fromisoformat(document["as_of"]),
        "computed_at": utcnow(),
        "actor": actor,
        "month_closed": month_closed,
        "currency": document["money"]["currency"],
        "document": json.dumps(month_level, ensure_ascii=False),
    }
    result = connection.execute(insert(table(WatchSnapshot)).values(**values))
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


def _entry_row(
    snapshot_id: int, client: dict[str, Any], lists: dict[str, list[Any]]
) -> dict[str, Any]:
    entry = {**client, **lists}
    return {
        "snapshot_id": snapshot_id,
        "client": str(client["client"]),
        "status": client["status"],
        "month_to_date": int(client["month_to_date"]),
        "projected": int(client["projected"]),
        "anomalies": len(lists["anomalies"]),
        "entry": json.dumps(entry, ensure_ascii=False),
    }


def latest_snapshot(bind: Connection | Engine, month: str) -> Snapshot | None:
    """The month's latest recorded watch run (None if ``watch`` never ran on it)."""
    t = table(WatchSnapshot)
    query = select(t).where(t.c.month == month).order_by(t.c.id.desc()).limit(1)
    with connected(bind) as connection:
        row = connection.execute(query).mappings().first()
    if row is None:
        return None
    return Snapshot(
        id=int(row["id"]),
        month=row["month"],
        as_of=row["as_of"],
        computed_at=row["computed_at"],
        actor=row["actor"],
        month_closed=bool(row["month_closed"]),
        currency=row["currency"],
        document=json.loads(row["document"]),
    )


def client_entry(bind: Connection | Engine, snapshot_id: int, client: str) -> dict[str, Any] | None:
    """One client's object of a watch run, with its own anomalies, rule changes and warnings
    (None: the client is not in it)."""
    t = table(WatchEntry)
    query = select(t.c.entry).where(t.c.snapshot_id == snapshot_id, t.c.client == client)
    with connected(bind) as connection:
        text = connection.execute(query).scalar_one_or_none()
    return None if text is None else dict(json.loads(text))


def entries(bind: Connection | Engine, snapshot_id: int, *, clients: Sequence[str] | None = None,
            offset: int = 0, limit: int | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Clients' objects of a watch run, by client id (only ``clients`` if given), paged."""
    t = table(WatchEntry)
    query = select(t.c.entry).where(t.c.snapshot_id == snapshot_id).order_by(t.c.client)
    if clients is not None:
        query = query.where(t.c.client.in_(list(clients)))
    query = query.offset(offset)
    if limit is not None:
        query = query.limit(limit)
    with connected(bind) as connection:
        return [dict(json.loads(text)) for text in connection.execute(query).scalars()]


def entry_count(bind: Connection | Engine, snapshot_id: int) -> int:
    t = table(WatchEntry)
    query = select(func.count()).select_from(t).where(t.c.snapshot_id == snapshot_id)
    with connected(bind) as connection:
        return int(connection.execute(query).scalar_one())


def snapshot_document(
    bind: Connection | Engine, snapshot: Snapshot, *, offset: int = 0, limit: int | None = None
) -> dict[str, Any]:
    """The recorded run as the JSON contract's document (clients by id; each list with the
    month-level items first, then each client's in client order). ``offset``/``limit``: one
    page of the clients, with their own items (and every month-level item)."""
    clients = entries(bind, snapshot.id, offset=offset, limit=limit)
    document = dict(snapshot.document)
    lists = {name: list(document.get(name, [])) for name in CLIENT_LISTS}
    bare = []
    for entry in clients:
        for name in CLIENT_LISTS:
            lists[name].extend(entry.get(name, []))
        bare.append({k: v for k, v in entry.items() if k not in CLIENT_LISTS})
    return {**document, "clients": bare, **lists}


class EntryOrder(StrEnum):
    """How a list of a watch run's clients is sorted (the month page's choices)."""

    CLIENT = "client"
    """By client id."""
    STATUS = "status"
    """``above`` first, then ``below``, ``within``, ``no_budget``; by client id within each."""
    ABOVE = "above"
    """By how far ``projected`` is over the band's ``high``, most first; clients without a
    budget last; by client id on ties."""


STATUS_RANK = {"above": 0, "below": 1, "within": 2, "no_budget": 3}
"""The order of :attr:`EntryOrder.STATUS`: what needs a look first."""


def watched_months(bind: Connection | Engine, client: str) -> list[str]:
    """The months whose latest watch run has an entry for ``client`` (ascending): the months
    a client's page may open even when no figure of them is issued (one query, by the
    entries' primary key and the snapshots' month index)."""
    s, e = table(WatchSnapshot), table(WatchEntry)
    latest = select(func.max(s.c.id)).group_by(s.c.month)
    query = (
        select(s.c.month)
        .join(e, e.c.snapshot_id == s.c.id)
        .where(e.c.client == client, s.c.id.in_(latest))
        .order_by(s.c.month)
    )
    with connected(bind) as connection:
        return [str(m) for m in connection.execute(query).scalars()]


def watched_month_list(bind: Connection | Engine) -> list[str]:
    """Every month ``watch`` recorded a run of (ascending)."""
    s = table(WatchSnapshot)
    with connected(bind) as connection:
        rows = connection.execute(select(s.c.month).distinct().order_by(s.c.month)).scalars()
        return [str(m) for m in rows]


def _budget_high(bind: Connection | Engine, entry: Any) -> Any:
    """The band's ``high`` read from an entry's JSON in SQL (NULL without a budget): the
    entry table keeps no column of it, and sorting 10,000 clients belongs in the database."""
    if bind.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        text = func.jsonb_extract_path_text(cast(entry, JSONB), "budget", "high")
        return cast(text, BigInteger)
    return cast(func.json_extract(entry, "$.budget.high"), BigInteger)


def ranked_entries(
    bind: Connection | Engine,
    snapshot_id: int,
    order: EntryOrder,
    *,
    offset: int = 0,
    limit: int | None = None,
    anomalous: bool = False,
) -> list[dict[str, Any]]:
    """A page of a watch run's clients in ``order`` (only those with anomalies if
    ``anomalous``): sorted, filtered and paged in SQL."""
    t = table(WatchEntry)
    query = select(t.c.entry).where(t.c.snapshot_id == snapshot_id)
    if anomalous:
        query = query.where(t.c.anomalies > 0)
    if order is EntryOrder.STATUS:
        rank = case(STATUS_RANK, value=t.c.status, else_=len(STATUS_RANK))
        query = query.order_by(rank, t.c.client)
    elif order is EntryOrder.ABOVE:
        over = t.c.projected - _budget_high(bind, t.c.entry)
        query = query.order_by(over.is_(None), over.desc(), t.c.client)
    else:
        query = query.order_by(t.c.client)
    query = query.offset(offset)
    if limit is not None:
        query = query.limit(limit)
    with connected(bind) as connection:
        return [dict(json.loads(text)) for text in connection.execute(query).scalars()]


def anomaly_total(bind: Connection | Engine, snapshot_id: int) -> tuple[int, int]:
    """How many anomalies a watch run found, and in how many clients."""
    t = table(WatchEntry)
    query = select(func.coalesce(func.sum(t.c.anomalies), 0), func.count()).where(
        t.c.snapshot_id == snapshot_id, t.c.anomalies > 0
    )
    with connected(bind) as connection:
        found, clients = connection.execute(query).one()
    return int(found), int(clients)


def _budget_part(bind: Connection | Engine, entry: Any, name: str) -> Any:
    """A part of the band (``low``, ``expected``, ``high``) read from an entry's JSON in SQL."""
    return cast(_budget_text(bind, entry, name), BigInteger)


def _budget_text(bind: Connection | Engine, entry: Any, name: str) -> Any:
    """A field of an entry's band as SQL reads it from the JSON (NULL when absent)."""
    if bind.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import JSONB

        return func.jsonb_extract_path_text(cast(entry, JSONB), "budget", name)
    return func.json_extract(entry, f"$.budget.{name}")


@dataclass(frozen=True)
class WatchTotals:
    """A watch run summed over its clients (micro-units): every client's month to date and
    projection, and the same of the clients with a budget beside their bands' sums, so the
    month's projection is compared with a band of the same clients."""

    clients: int
    month_to_date: int
    projected: int
    budgeted: int
    budgeted_month_to_date: int
    budgeted_projected: int
    low: int
    expected: int
    high: int


def watch_totals(bind: Connection | Engine, snapshot_id: int) -> WatchTotals:
    """:class:`WatchTotals` of a run, in one query (10,000 clients are summed in SQL). Bands
    are summed in the ledger currency: a client whose band is in its own currency counts as
    not budgeted here (its own page compares it)."""
    t = table(WatchEntry)
    low, expected, high = (_budget_part(bind, t.c.entry, n) for n in ("low", "expected", "high"))
    # a band in a client's own currency (it has a rate) does not add up with ledger bands
    has = expected.is_not(None) & _budget_text(bind, t.c.entry, "rate").is_(None)

    def total(value: Any) -> Any:
        return func.coalesce(func.sum(value), 0)

    def budgeted(value: Any) -> Any:
        return total(case((has, value), else_=0))

    query = select(
        func.count(), total(t.c.month_to_date), total(t.c.projected),
        total(case((has, 1), else_=0)), budgeted(t.c.month_to_date), budgeted(t.c.projected),
        budgeted(low), budgeted(expected), budgeted(high),
    ).where(t.c.snapshot_id == snapshot_id)  # fmt: skip
    with connected(bind) as connection:
        row = connection.execute(query).one()
    return WatchTotals(*(int(v) for v in row))
