"""Opening the store's database: one engine per command, with the same guarantees everywhere.

SQLite (the default, embedded) is set up for a store several processes share:

* ``journal_mode=WAL``: readers never block the writer and the writer never blocks readers
  (``status`` during an hourly ``ingest``);
* ``busy_timeout``: a writer waits this long for another one instead of failing at once;
* ``foreign_keys=ON``: SQLite ignores foreign keys unless asked (off only while migrating,
  where a table rebuilt by Alembic's batch mode must not cascade into its children);
* transactions begin where SQLAlchemy says (pysqlite's own implicit ``BEGIN`` is turned
  off), so DDL is transactional too and a failed migration or batch leaves nothing behind.

PostgreSQL goes through psycopg 3 (``postgresql+psycopg://``). A store that cannot be opened
(no such file, server down, wrong password) is one ``error:`` line, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError

from tenantcost.errors import InputError
from tenantcost.store.lock import SQLITE_BEGIN_KEY
from tenantcost.store.settings import StoreSettings

BUSY_TIMEOUT_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 10


def open_engine(
    settings: StoreSettings,
    *,
    create: bool = False,
    foreign_keys: bool = True,
    busy_timeout: float = BUSY_TIMEOUT_SECONDS,
) -> Engine:
    """The engine of the store ``settings`` names.

    ``create``: a missing SQLite file may be created (``db upgrade``); every other command
    refuses it, since SQLite would otherwise create an empty file for a mistyped path.
    """
    path = settings.sqlite_path
    if path is not None:
        if not path.parent.is_dir():
            raise InputError(f"folder '{path.parent}' does not exist", file=settings.db_origin)
        if not create and not path.exists():
            raise InputError(
                f"no store at '{path}': run `tenantcost db upgrade --db {settings.display_db}` "
                "to create it",
                file=settings.db_origin,
            )
    if settings.db.startswith("sqlite"):
        engine = create_engine(settings.db, connect_args={"timeout": busy_timeout})
        _sqlite_pragmas(engine, foreign_keys=foreign_keys, busy_timeout=busy_timeout)
        return engine
    return create_engine(
        settings.db,
        connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS},
        pool_pre_ping=True,
    )


def _sqlite_pragmas(engine: Engine, *, foreign_keys: bool, busy_timeout: float) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN, below
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        # BEGIN IMMEDIATE (the write lock at once) when store.lock.write_transaction asks.
        connection.exec_driver_sql(connection.info.pop(SQLITE_BEGIN_KEY, "BEGIN"))


@contextmanager
def store_errors(settings: StoreSettings) -> Iterator[None]:
    """Turn "cannot reach or use the database" into one ``error:`` line (exit 2)."""
    try:
        yield
    except OperationalError as exc:
        raise InputError(
            f"cannot use the store {settings.display_db}: {_first_line(exc)}",
            file=settings.db_origin,
        ) from None


def _first_line(exc: DBAPIError) -> str:
    text = str(exc.orig) if exc.orig is not None else str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc.orig).__name__
