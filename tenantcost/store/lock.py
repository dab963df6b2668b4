"""The store's write lock: one writing command at a time, the others wait or exit 4.

Every command that writes (``db upgrade``, ``rules load``, ``ingest``...) does all its
writing inside :func:`write_transaction`: one database transaction that holds the store's
lock from its first statement to its commit. Whoever comes second waits up to ``--wait``
seconds (default 0) and then stops with :class:`StoreLocked` (exit 4), so two processes
never interleave a batch, a migration or a rule load.

* **PostgreSQL**: a transaction-scoped advisory lock (``pg_try_advisory_xact_lock``), polled
  until the wait runs out. The server releases it at commit, at rollback, and when the
  holder's connection dies (a killed process never leaves the store locked).
* **SQLite**: the transaction starts with ``BEGIN IMMEDIATE``, which takes SQLite's own write
  lock at once, with ``busy_timeout`` = the wait. WAL mode lets readers go on meanwhile; the
  operating system releases the lock of a killed process.

Readers take no lock: they read committed rows only, and a batch's files become visible when
its row commits.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError

STORE_LOCK = 7_240_911_002
"""PostgreSQL advisory lock key of the store's writers (migrations also take 7_240_911_001)."""
POLL_SECONDS = 0.1
SQLITE_BEGIN_KEY = "tenantcost_sqlite_begin"
"""``connection.info`` key the SQLite engine's ``begin`` hook reads (see store.engine)."""


class StoreLocked(Exception):
    """Another process holds the store's write lock and ``--wait`` ran out (exit 4)."""


@contextmanager
def write_transaction(engine: Engine, wait: float = 0.0) -> Iterator[Connection]:
    """A connection in a transaction holding the store's write lock; commits on success,
    rolls back on any exception. Raises :class:`StoreLocked` after ``wait`` seconds."""
    if wait < 0:
        raise ValueError(f"wait must be >= 0, got {wait}")
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        restore = _begin_sqlite(connection, engine, wait) if sqlite else None
        if not sqlite:
            connection.begin()
            _lock_postgres(connection, engine, wait)
        try:
            yield connection
        except BaseException:
            connection.rollback()
            raise
        else:
            connection.commit()
        finally:
            if restore is not None:
                with contextlib.suppress(SQLAlchemyError):  # a lost connection is not reused
                    connection.exec_driver_sql(f"PRAGMA busy_timeout={restore}")


def _begin_sqlite(connection: Connection, engine: Engine, wait: float) -> int:
    """``BEGIN IMMEDIATE`` with the busy timeout set to ``wait``; returns the timeout to
    restore afterwards (the connection goes back to the pool)."""
    before = int(connection.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0)
    connection.rollback()  # the PRAGMA above began SQLAlchemy's transaction: end it
    connection.exec_driver_sql(f"PRAGMA busy_timeout={int(wait * 1000)}")
    connection.rollback()
    connection.info[SQLITE_BEGIN_KEY] = "BEGIN IMMEDIATE"
    try:
        connection.begin()
    except OperationalError as exc:
        connection.info.pop(SQLITE_BEGIN_KEY, None)
        connection.exec_driver_sql(f"PRAGMA busy_timeout={before}")
        connection.rollback()
        if "locked" in str(exc.orig) or "busy" in str(exc.orig):
            raise StoreLocked(_message(engine, wait)) from None
        raise
    return before


def _lock_postgres(connection: Connection, engine: Engine, wait: float) -> None:
    deadline = time.monotonic() + wait
    query = text("SELECT pg_try_advisory_xact_lock(:key)")
    while not connection.execute(query, {"key": STORE_LOCK}).scalar():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            connection.rollback()
            raise StoreLocked(_message(engine, wait))
        time.sleep(min(POLL_SECONDS, remaining))


def _message(engine: Engine, wait: float) -> str:
    name = engine.url.render_as_string(hide_password=True)
    return (
        f"the store {name} is locked by another process writing to it (waited {wait:g} s); "
        "try again later or pass --wait SECONDS"
    )
