"""What ``watch --notify`` sent: each alert once per destination, failures retried next run.

An hourly CronJob runs ``tenantcost watch --notify``; every run finds the same anomalies
again (their ids are stable), so the store, not the receiver, must know what was delivered.
One ``alert_delivery`` row per alert key, destination and channel (``webhook``, ``email``: a
destination with both is two deliveries, so a webhook that worked is not repeated because the
e-mail failed).

**A delivery's life.** :func:`claim` marks it ``sending`` in a short transaction under the
store's write lock, so two overlapping runs never both take it; the run then sends and
:func:`finish` records ``sent`` (final) or ``failed`` with the attempts and the last error. A
``failed`` delivery is claimed again by the next run. A ``sending`` row older than
:data:`STALE_CLAIM` is a run that died while sending: the next run claims it again. That
may repeat a message the receiver got just before the crash, which is why every message
carries its alert id (receivers deduplicate on it): at least once, and once in every run that
finishes.

The HTTP and SMTP calls are made outside any transaction (a slow receiver never holds the
store's lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd
from sqlalchemy import Connection, Engine, and_, bindparam, insert, select, update

from tenantcost.store.connection import connected
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import AlertDelivery, table, utcnow

STALE_CLAIM = timedelta(minutes=15)
"""A ``sending`` claim older than this belongs to a run that died: it may be claimed again.
A run's retries of one delivery take seconds (:mod:`tenantcost.store.notify`)."""
CHUNK = 500
"""Alert keys per ``IN (...)`` list (SQLite and PostgreSQL limit a statement's parameters)."""
KEY = ["alert_key", "destination", "channel"]
DELIVERY_COLUMNS = [*KEY, "month", "client", "kind", "status", "attempts", "last_error",
                    "first_attempt_at", "last_attempt_at", "sent_at"]  # fmt: skip


@dataclass(frozen=True)
class Delivery:
    """One alert to one destination over one channel."""

    alert_key: str
    destination: str
    channel: str
    month: str
    client: str
    kind: str


@dataclass(frozen=True)
class Claimed:
    """What :func:`claim` found: the deliveries this run now holds, those sent before, and
    those another run is sending right now."""

    mine: list[Delivery]
    already_sent: list[Delivery]
    busy: list[Delivery]


def claim(engine: Engine, wanted: Sequence[Delivery], *, wait: float = 0.0) -> Claimed:
    """Take the deliveries of ``wanted`` that are not sent and not being sent (see the module
    docstring), in one transaction under the store's write lock."""
    if not wanted:
        return Claimed([], [], [])
    frame = pd.DataFrame([d.__dict__ for d in wanted])
    now = utcnow()
    with write_transaction(engine, wait) as connection:
        known = _known(connection, frame["alert_key"].unique().tolist())
        merged = frame.merge(known, on=KEY, how="left")
        new = merged["status"].isna()
        last = pd.to_datetime(merged["last_attempt_at"], utc=True)
        stale = (merged["status"] == "sending") & (last < pd.Timestamp(now - STALE_CLAIM))
        retake = (merged["status"] == "failed") | stale
        _insert_claims(connection, frame.loc[new.to_numpy()], now)
        _retake(connection, merged.loc[retake.to_numpy()], now)
    mine = (new | retake).to_numpy()
    sent = (merged["status"] == "sent").to_numpy()
    return Claimed(
        mine=[d for d, m in zip(wanted, mine, strict=True) if m],
        already_sent=[d for d, s in zip(wanted, sent, strict=True) if s],
        busy=[d for d, m, s in zip(wanted, mine, sent, strict=True) if not (m or s)],
    )


def _known(connection: Connection, keys: list[str]) -> pd.DataFrame:
    """The stored rows of these alert keys: the key columns, status and last attempt."""
    t = table(AlertDelivery).c
    rows: list[tuple[object, ...]] = []
    for first in range(0, len(keys), CHUNK):
        query = select(t.alert_key, t.destination, t.channel, t.status, t.last_attempt_at)
        rows.extend(
            tuple(r)
            for r in connection.execute(query.where(t.alert_key.in_(keys[first : first + CHUNK])))
        )
    columns = [*KEY, "status", "last_attempt_at"]
    return pd.DataFrame(rows, columns=columns).astype({"status": "object"})


def _insert_claims(connection: Connection, frame: pd.DataFrame, now: datetime) -> None:
    if frame.empty:
        return
    rows = frame.assign(status="sending", attempts=0, last_error=None, first_attempt_at=now,
                        last_attempt_at=now, sent_at=None)  # fmt: skip
    connection.execute(insert(table(AlertDelivery)), rows.to_dict("records"))


def _retake(connection: Connection, frame: pd.DataFrame, now: datetime) -> None:
    """Failed and stale deliveries back to ``sending`` (only if still as read: the write lock
    makes that certain, the condition documents it)."""
    if frame.empty:
        return
    t = table(AlertDelivery)
    same = and_(*(t.c[k] == bindparam(f"b_{k}") for k in [*KEY, "status"]))
    statement = update(t).where(same).values(status="sending", last_attempt_at=now)
    params = [{f"b_{k}": row[k] for k in [*KEY, "status"]} for row in frame.to_dict("records")]
    connection.execute(statement, params)


def finish(
    engine: Engine,
    delivery: Delivery,
    *,
    sent: bool,
    attempts: int,
    error: str | None,
    wait: float = 0.0,
) -> None:
    """Record a claimed delivery's outcome: ``sent`` (final) or ``failed`` (retried next run),
    ``attempts`` added to those of earlier runs."""
    t = table(AlertDelivery)
    now = utcnow()
    values: dict[str, object] = {
        "status": "sent" if sent else "failed",
        "attempts": t.c.attempts + attempts,
        "last_error": error,
        "last_attempt_at": now,
    }
    if sent:
        values["sent_at"] = now
    where = and_(*(t.c[k] == getattr(delivery, k) for k in KEY), t.c.status == "sending")
    with write_transaction(engine, wait) as connection:
        connection.execute(update(t).where(where).values(**values))


def month_deliveries(bind: Connection | Engine, month: str) -> pd.DataFrame:
    """The month's delivery rows (:data:`DELIVERY_COLUMNS`), by alert key, destination and
    channel: what was sent, what failed and why."""
    t = table(AlertDelivery)
    query = select(*(t.c[c] for c in DELIVERY_COLUMNS)).where(t.c.month == month)
    with connected(bind) as connection:
        rows = [tuple(r) for r in connection.execute(query.order_by(*(t.c[k] for k in KEY)))]
    return pd.DataFrame(rows, columns=DELIVERY_COLUMNS)
