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
from typing import Any

from sqlalchemy import Connection, Engine, func, insert, select

from tenantcost.store.cycle import connected
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


def record_watch(engine: Engine, document: dict[str, Any], actor: str, month_closed: bool) -> int:
    """Record one watch answer (the JSON contract's document); its snapshot id."""
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


def snapshot_document(bind: Connection | Engine, snapshot: Snapshot) -> dict[str, Any]:
    """The recorded run as the JSON contract's document (clients by id; each list with the
    month-level items first, then each client's in client order)."""
    clients = entries(bind, snapshot.id)
    document = dict(snapshot.document)
    lists = {name: list(document.get(name, [])) for name in CLIENT_LISTS}
    bare = []
    for entry in clients:
        for name in CLIENT_LISTS:
            lists[name].extend(entry.get(name, []))
        bare.append({k: v for k, v in entry.items() if k not in CLIENT_LISTS})
    return {**document, "clients": bare, **lists}
