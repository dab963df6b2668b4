"""What ``watch --notify`` sent: each alert once per destination, failures retried next run.

An hourly CronJob runs ``tenantcost watch --notify``; every run finds the same anomalies
again (their ids are stable), so the store, not the receiver, must know what was delivered.
One ``alert_delivery`` row per alert key, destination and channel (``webhook``, ``email``: a
destination with both is two deliveries, so a webhook that worked is not repeated because the
e-mail failed).

**A delivery's life.** :func:`claim` marks it ``sending`` in a short transaction under the
store's write lock, so two overlapping runs never both take it, and records the claimant
(:class:`Claimant`: host, PID namespace, process id and a token of the run) and when. Just
before sending, the run renews its claim (:func:`renew`: still ``sending``, still its own; the
time is refreshed), so a claim goes stale only while one delivery is being sent, never
while it waits its turn behind slow ones. :func:`finish` then records ``sent`` (final) or
``failed`` with the attempts and the last error, and :func:`release` gives back the claims a
run that is stopping (Ctrl-C, SIGTERM) did not try. A ``failed`` delivery is claimed again
by the next run.

**A run that died while sending** (SIGKILL, a lost node) leaves ``sending`` rows. The next
run takes such a claim over when it is older than :data:`STALE_CLAIM`, or at once when its
claimant was a process of this host and PID namespace that no longer exists. A process of
another host, or of another PID namespace (another container), is never judged dead: its
claim waits out the bound. A take-over may repeat a message the receiver got just before
the crash, which is why every message carries its alert id (receivers deduplicate on it):
at least once, and once in every run that finishes.

The HTTP and SMTP calls are made outside any transaction (a slow receiver never holds the
store's lock).
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pandas as pd
from sqlalchemy import Connection, Engine, and_, bindparam, insert, select, update
from sqlalchemy.sql.elements import ColumnElement

from tenantcost.store.connection import connected
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import AlertDelivery, table, utcnow

STALE_CLAIM = timedelta(minutes=15)
"""A ``sending`` claim older than this belongs to a run that died: it may be claimed again.
A claim is renewed just before its delivery is sent, and sending one delivery, retries
included, takes at most a few minutes (:mod:`tenantcost.store.notify`)."""
CHUNK = 500
"""Alert keys per ``IN (...)`` list (SQLite and PostgreSQL limit a statement's parameters)."""
KEY = ["alert_key", "destination", "channel"]
DELIVERY_COLUMNS = [*KEY, "month", "client", "kind", "status", "attempts", "last_error",
                    "first_attempt_at", "last_attempt_at", "sent_at", "claimed_by",
                    "claimed_at"]  # fmt: skip


def _pid_namespace() -> str:
    """This process's PID namespace (Linux: ``pid:[4026531836]``; elsewhere empty): two
    containers on one host share its name but not their process ids."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True)
class Claimant:
    """Who claims deliveries: one run of ``watch --notify`` (a token of its own, so two runs
    in one process are two claimants)."""

    host: str = field(default_factory=socket.gethostname)
    namespace: str = field(default_factory=_pid_namespace)
    pid: int = field(default_factory=os.getpid)
    token: str = field(default_factory=lambda: secrets.token_hex(8))

    def text(self) -> str:
        """The stored form, ``host pid-namespace pid token`` (spaces never occur in a host
        name or a namespace link)."""
        return f"{self.host} {self.namespace or '-'} {self.pid} {self.token}"


def gone(claimed_by: object, me: Claimant) -> bool:
    """Whether a stored claimant is a process known to be dead: only one of this host and PID
    namespace can be checked; any other, or an unreadable value, is presumed alive."""
    parts = str(claimed_by).split(" ") if isinstance(claimed_by, str) else []
    if len(parts) != 4 or (parts[0], parts[1]) != (me.host, me.namespace or "-"):
        return False
    try:
        pid = int(parts[2])
    except ValueError:
        return False
    if pid == me.pid:
        return False  # this process is alive (another run of it, or this one)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, another user's
        return False
    return False


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


def claim(
    engine: Engine, wanted: Sequence[Delivery], claimant: Claimant, *, wait: float = 0.0
) -> Claimed:
    """Take, for ``claimant``, the deliveries of ``wanted`` that are not sent and not being
    sent by a live run (see the module docstring), in one transaction under the store's
    write lock."""
    if not wanted:
        return Claimed([], [], [])
    frame = pd.DataFrame([d.__dict__ for d in wanted])
    now = utcnow()
    with write_transaction(engine, wait) as connection:
        known = _known(connection, frame["alert_key"].unique().tolist())
        merged = frame.merge(known, on=KEY, how="left")
        new = merged["status"].isna()
        since = merged["claimed_at"].where(merged["claimed_at"].notna(),
                                           merged["last_attempt_at"])  # fmt: skip
        old = pd.to_datetime(since, utc=True) < pd.Timestamp(now - STALE_CLAIM)
        sending = merged["status"] == "sending"
        dead = sending & merged["claimed_by"].map(lambda c: gone(c, claimant)).astype(bool)
        retake = (merged["status"] == "failed") | (sending & old) | dead
        _insert_claims(connection, frame.loc[new.to_numpy()], now, claimant)
        _retake(connection, merged.loc[retake.to_numpy()], now, claimant)
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
        query = select(t.alert_key, t.destination, t.channel, t.status, t.last_attempt_at,
                       t.claimed_by, t.claimed_at)  # fmt: skip
        rows.extend(
            tuple(r)
            for r in connection.execute(query.where(t.alert_key.in_(keys[first : first + CHUNK])))
        )
    columns = [*KEY, "status", "last_attempt_at", "claimed_by", "claimed_at"]
    return pd.DataFrame(rows, columns=columns).astype({"status": "object",
                                                       "claimed_by": "object"})  # fmt: skip


def _insert_claims(
    connection: Connection, frame: pd.DataFrame, now: datetime, claimant: Claimant
) -> None:
    if frame.empty:
        return
    rows = frame.assign(status="sending", attempts=0, last_error=None, first_attempt_at=now,
                        last_attempt_at=now, sent_at=None, claimed_by=claimant.text(),
                        claimed_at=now)  # fmt: skip
    connection.execute(insert(table(AlertDelivery)), rows.to_dict("records"))


def _retake(connection: Connection, frame: pd.DataFrame, now: datetime, claimant: Claimant) -> None:
    """Failed and stale deliveries back to ``sending``, claimed by ``claimant`` (only if still
    as read: the write lock makes that certain, the condition documents it)."""
    if frame.empty:
        return
    t = table(AlertDelivery)
    same = and_(*(t.c[k] == bindparam(f"b_{k}") for k in [*KEY, "status"]),
                t.c.claimed_by.is_not_distinct_from(bindparam("b_claimed_by")))  # fmt: skip
    statement = (
        update(t)
        .where(same)
        .values(status="sending", last_attempt_at=now, claimed_by=claimant.text(), claimed_at=now)
    )
    names = [*KEY, "status", "claimed_by"]
    params = [{f"b_{k}": (None if pd.isna(row[k]) else row[k]) for k in names}
              for row in frame.to_dict("records")]  # fmt: skip
    connection.execute(statement, params)


def _mine(delivery: Delivery, claimant: Claimant) -> ColumnElement[bool]:
    """The delivery's row, while ``claimant`` still holds it ``sending``."""
    t = table(AlertDelivery).c
    return and_(*(t[k] == getattr(delivery, k) for k in KEY), t.status == "sending",
                t.claimed_by == claimant.text())  # fmt: skip


def renew(engine: Engine, delivery: Delivery, claimant: Claimant, *, wait: float = 0.0) -> bool:
    """Refresh ``claimant``'s claim on ``delivery`` just before sending it; False if the
    claim is no longer its own (another run took it over: this one must not send it)."""
    t = table(AlertDelivery)
    with write_transaction(engine, wait) as connection:
        done = connection.execute(
            update(t).where(_mine(delivery, claimant)).values(claimed_at=utcnow())
        )
    return bool(done.rowcount)


def finish(
    engine: Engine,
    delivery: Delivery,
    claimant: Claimant,
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
    with write_transaction(engine, wait) as connection:
        connection.execute(update(t).where(_mine(delivery, claimant)).values(**values))


def release(
    engine: Engine,
    deliveries: Sequence[Delivery],
    claimant: Claimant,
    reason: str,
    *,
    wait: float = 0.0,
) -> None:
    """Give back the claims of a run that stops before trying them: ``failed`` with
    ``reason`` and no attempt counted, so the next run takes them at once."""
    if not deliveries:
        return
    t = table(AlertDelivery)
    values = {"status": "failed", "last_error": reason, "last_attempt_at": utcnow()}
    with write_transaction(engine, wait) as connection:
        for delivery in deliveries:
            connection.execute(update(t).where(_mine(delivery, claimant)).values(**values))


def month_deliveries(bind: Connection | Engine, month: str) -> pd.DataFrame:
    """The month's delivery rows (:data:`DELIVERY_COLUMNS`), by alert key, destination and
    channel: what was sent, what failed and why."""
    t = table(AlertDelivery)
    query = select(*(t.c[c] for c in DELIVERY_COLUMNS)).where(t.c.month == month)
    with connected(bind) as connection:
        rows = [tuple(r) for r in connection.execute(query.order_by(*(t.c[k] for k in KEY)))]
    return pd.DataFrame(rows, columns=DELIVERY_COLUMNS)


LOG_COLUMNS = ["client", "kind", "channel", "destination", "status", "attempts", "last_error",
               "last_attempt_at", "sent_at"]  # fmt: skip


def delivery_log(bind: Connection | Engine, month: str, limit: int) -> tuple[pd.DataFrame, int]:
    """The month's deliveries, latest attempt first (ties by alert key, destination and
    channel), at most ``limit`` of them, and how many there are: the month page's log of the
    alerts sent (finance and admin)."""
    from sqlalchemy import func

    t = table(AlertDelivery).c
    query = (
        select(*(t[c] for c in LOG_COLUMNS))
        .where(t.month == month)
        .order_by(t.last_attempt_at.desc(), *(t[c] for c in KEY))
        .limit(limit)
    )
    with connected(bind) as connection:
        rows = connection.execute(query).all()
        count = connection.execute(select(func.count()).where(t.month == month)).scalar() or 0
    return pd.DataFrame(rows, columns=LOG_COLUMNS), int(count)
