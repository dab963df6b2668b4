"""The meter's cost per database call: p50/p99 of a call through a wrapped connection (or a
tracked SQLAlchemy engine) against the same call on the bare one. Target: at most 5 µs at p50.

Each call is timed alone (``perf_counter_ns`` around it), inside ``record()`` blocks of 100
tenants in turn, as in requests. The bare and the metered call alternate call by call, so that
the machine's drift (it is shared) and the caches' state hit both alike; the figure is the
difference of the medians. The variants:

* ``null DB-API driver``: a cursor whose ``execute`` and ``fetchall`` do nothing, in Python:
  the wrapper's own cost, with no database around it;
* ``sqlite3 (in memory)``: ``execute("SELECT ?")`` and ``fetchall()``, each timed apart;
* ``SQLAlchemy + sqlite3``: ``conn.exec_driver_sql("SELECT 1")`` on an engine that
  ``track_sqlalchemy`` tracks against an untracked one; and, for scale, an engine with
  no-op ``before_cursor_execute``/``after_cursor_execute`` listeners against an untracked
  one: what SQLAlchemy itself spends per statement once an engine has cursor-event listeners
  (any, the meter's or an instrumentation's);
* ``async driver (stub)``: ``await cursor.execute`` and ``await cursor.fetchall`` of a
  cursor shaped like psycopg's AsyncCursor, and ``await conn.fetchval`` of one shaped like
  asyncpg's connection, in an event loop: the async wrappers' cost;
* ``meter.add`` and ``meter.measure``, against an empty function call and an empty ``with``;
* with ``--postgres URL`` (libpq form): ``SELECT 1`` round trips through psycopg (sync and
  async: ``cursor.execute``) and asyncpg (``fetchval``) to that server,
  the bare and the wrapped connection taking turns on one connection. Between a driver's
  system calls the meter's code runs with colder caches than in the loops above: these are
  the figures an application sees.

    python benchmarks/meter_db.py [--calls 50000] [--postgres URL] [--only TEXT]

Needs the meter installed (``pip install -e ./meter``) and SQLAlchemy (a tenantcost
dependency); psycopg and asyncpg for ``--postgres``.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from tenantcost_meter import Meter

TENANTS = [f"client-{i:03d}" for i in range(100)]
CHUNK = 1000
"""Calls per ``record()`` block (one tenant's request)."""

Call = Callable[[], Any]
Pair = Callable[[], tuple[Call, Call]]
"""Makes the bare and the metered call (async variants: coroutine functions that make them)."""


# -- the drivers ------------------------------------------------------------------------------


class NullCursor:
    """A DB-API cursor that does nothing (pure Python, as a driver's thinnest layer)."""

    def execute(self, sql: str, params: Any = None) -> NullCursor:
        return self

    def fetchall(self) -> list[Any]:
        return []


class NullConnection:
    def cursor(self) -> NullCursor:
        return NullCursor()

    def commit(self) -> None:
        return None


class AsyncStubCursor:
    """Shaped like psycopg's AsyncCursor: ``execute`` and the fetches are coroutines."""

    async def execute(self, sql: str, params: Any = None) -> AsyncStubCursor:
        return self

    async def fetchall(self) -> list[Any]:
        return []


class AsyncStubConnection:
    def cursor(self) -> AsyncStubCursor:
        return AsyncStubCursor()

    async def execute(self, sql: str, params: Any = None) -> AsyncStubCursor:
        return AsyncStubCursor()

    async def commit(self) -> None:
        return None


class AsyncpgStub:
    """Shaped like an asyncpg connection."""

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return 1

    async def prepare(self, sql: str) -> Any:
        return None


# -- timing -----------------------------------------------------------------------------------


def _sync_times(meter: Meter, bare: Call, metered: Call, calls: int
                ) -> tuple[list[float], list[float]]:  # fmt: skip
    times: tuple[list[float], list[float]] = ([], [])
    clock = time.perf_counter_ns
    for chunk in range(max(1, calls // CHUNK)):
        with meter.record(TENANTS[chunk % 100]):
            for _ in range(CHUNK):
                start = clock()
                bare()
                middle = clock()
                metered()
                end = clock()
                times[0].append((middle - start) / 1000)
                times[1].append((end - middle) / 1000)
    return times


async def _async_times(meter: Meter, bare: Callable[[], Awaitable[Any]],
                       metered: Callable[[], Awaitable[Any]], calls: int
                       ) -> tuple[list[float], list[float]]:  # fmt: skip
    times: tuple[list[float], list[float]] = ([], [])
    clock = time.perf_counter_ns
    for chunk in range(max(1, calls // CHUNK)):
        async with meter.record(TENANTS[chunk % 100]):
            for _ in range(CHUNK):
                start = clock()
                await bare()
                middle = clock()
                await metered()
                end = clock()
                times[0].append((middle - start) / 1000)
                times[1].append((end - middle) / 1000)
    return times


def _measure(meter: Meter, pair: Any, is_async: bool, calls: int
             ) -> tuple[list[float], list[float]]:  # fmt: skip
    """Both calls ``calls`` times, taking turns, after a tenth as many to warm up."""
    if not is_async:
        bare, metered = pair()
        _sync_times(meter, bare, metered, calls // 10)
        return _sync_times(meter, bare, metered, calls)

    async def run() -> tuple[list[float], list[float]]:
        bare, metered, close = await pair()
        try:
            await _async_times(meter, bare, metered, calls // 10)
            return await _async_times(meter, bare, metered, calls)
        finally:
            await close()

    return asyncio.run(run())


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


# -- the variants -----------------------------------------------------------------------------


def _nothing_async() -> Any:
    async def close() -> None:
        return None

    return close


def variants(meter: Meter, postgres: str | None) -> Iterator[tuple[str, Any, bool]]:
    """(name, pair, is_async) for each variant."""
    null = NullConnection()
    bare_null, metered_null = null.cursor(), meter.wrap_dbapi(null).cursor()
    yield ("null DB-API driver: execute",
           lambda: (lambda: bare_null.execute("SELECT 1"),
                    lambda: metered_null.execute("SELECT 1")), False)  # fmt: skip
    yield ("null DB-API driver: fetchall",
           lambda: (bare_null.fetchall, metered_null.fetchall), False)  # fmt: skip
    # two connections: cursors taking turns on one would share (and re-prepare) statements
    bare_lite = sqlite3.connect(":memory:").cursor()
    metered_lite = meter.wrap_dbapi(sqlite3.connect(":memory:")).cursor()
    yield ("sqlite3 (in memory): execute",
           lambda: (lambda: bare_lite.execute("SELECT ?", (1,)),
                    lambda: metered_lite.execute("SELECT ?", (1,))), False)  # fmt: skip
    yield ("sqlite3 (in memory): fetchall",
           lambda: (bare_lite.fetchall, metered_lite.fetchall), False)  # fmt: skip

    from sqlalchemy import create_engine, event

    bare_engine, tracked = create_engine("sqlite://"), create_engine("sqlite://")
    meter.track_sqlalchemy(tracked)
    listened = create_engine("sqlite://")
    event.listen(listened, "before_cursor_execute", _same, retval=True)
    event.listen(listened, "after_cursor_execute", _nothing)
    bare_conn, tracked_conn, listened_conn = (e.connect() for e in (bare_engine, tracked,
                                                                   listened))  # fmt: skip

    def statement(conn: Any) -> Call:
        return lambda: conn.exec_driver_sql("SELECT 1").all()

    yield ("SQLAlchemy + sqlite3: exec_driver_sql",
           lambda: (statement(bare_conn), statement(tracked_conn)), False)  # fmt: skip
    yield ("SQLAlchemy + sqlite3, no-op cursor-event listeners instead of the meter",
           lambda: (statement(bare_conn), statement(listened_conn)), False)  # fmt: skip

    stub = AsyncStubConnection()
    bare_async, metered_async = stub.cursor(), meter.wrap_dbapi(stub).cursor()

    async def async_execute() -> tuple[Call, Call, Any]:
        return (lambda: bare_async.execute("SELECT 1"),
                lambda: metered_async.execute("SELECT 1"), _nothing_async())  # fmt: skip

    async def async_fetchall() -> tuple[Call, Call, Any]:
        return bare_async.fetchall, metered_async.fetchall, _nothing_async()

    pg_stub = AsyncpgStub()
    metered_pg = meter.wrap_asyncpg(pg_stub)

    async def asyncpg_fetchval() -> tuple[Call, Call, Any]:
        return (lambda: pg_stub.fetchval("SELECT 1"), lambda: metered_pg.fetchval("SELECT 1"),
                _nothing_async())  # fmt: skip

    yield "async driver (stub): await execute", async_execute, True
    yield "async driver (stub): await fetchall", async_fetchall, True
    yield "asyncpg-shaped (stub): await fetchval", asyncpg_fetchval, True

    def nothing(metric: str, value: float) -> None:
        return None

    def adding() -> tuple[Call, Call]:
        return lambda: nothing("tokens", 3), lambda: meter.add("tokens", 3)

    yield "meter.add (against an empty call)", adding, False

    fast = _Fast()

    def with_block(measure: Any) -> Call:
        def call() -> None:
            with measure("tokens"):
                pass

        return call

    yield ("meter.measure (against an empty with)",
           lambda: (with_block(fast), with_block(meter.measure)), False)  # fmt: skip
    if postgres:
        yield from _postgres_variants(meter, postgres)


def _same(conn: Any, cursor: Any, statement: Any, parameters: Any, context: Any,
          executemany: bool) -> tuple[Any, Any]:  # fmt: skip
    return statement, parameters


def _nothing(*args: Any) -> None:
    return None


class _Fast:
    """The cheapest context manager there is, called like ``meter.measure``."""

    def __call__(self, metric: str) -> _Fast:
        return self

    def __enter__(self) -> _Fast:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _postgres_variants(meter: Meter, url: str) -> Iterator[tuple[str, Any, bool]]:
    """One connection per variant; the bare and the wrapped one are the same connection."""
    import psycopg

    sync = psycopg.connect(url, autocommit=True)
    bare_cur, metered_cur = sync.cursor(), meter.wrap_dbapi(sync).cursor()
    yield ("psycopg (PostgreSQL): cursor.execute",
           lambda: (lambda: bare_cur.execute("SELECT 1"),
                    lambda: metered_cur.execute("SELECT 1")), False)  # fmt: skip

    async def psycopg_async() -> tuple[Call, Call, Any]:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        bare, metered = conn.cursor(), meter.wrap_dbapi(conn).cursor()
        return (lambda: bare.execute("SELECT 1"), lambda: metered.execute("SELECT 1"),
                conn.close)  # fmt: skip

    yield "psycopg async (PostgreSQL): await cursor.execute", psycopg_async, True

    async def asyncpg_fetchval() -> tuple[Call, Call, Any]:
        import asyncpg

        conn = await asyncpg.connect(url)
        metered = meter.wrap_asyncpg(conn)
        return (lambda: conn.fetchval("SELECT 1"), lambda: metered.fetchval("SELECT 1"),
                conn.close)  # fmt: skip

    yield "asyncpg (PostgreSQL): await fetchval", asyncpg_fetchval, True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=50000, help="calls per variant and side")
    parser.add_argument("--postgres", default="", help="libpq URL of a PostgreSQL to call too")
    parser.add_argument("--only", default="", help="only the variants whose name holds this")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as spool:
        meter = Meter("api", "http://127.0.0.1:9", "tc_bench", flush_seconds=3600,
                      spool_dir=spool, metrics=["db_seconds", "tokens"])  # fmt: skip
        for name, pair, is_async in variants(meter, args.postgres or None):
            if args.only in name:
                calls = args.calls if "PostgreSQL" not in name else min(args.calls, 20000)
                rows.append((name, *_measure(meter, pair, is_async, calls)))
        counted = {r["client"] for r in meter._cells.drain() or []}
        meter.close(timeout=0.1)
    print(f"{platform.node()} ({platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{args.calls} calls per variant and side (20,000 at most with PostgreSQL), "
          f"{len(counted)} clients counted")  # fmt: skip
    print("\n| call | bare p50 | metered p50 | overhead p50 | bare p99 | metered p99 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, bare_t, metered_t in rows:
        b50, m50 = statistics.median(bare_t), statistics.median(metered_t)
        print(
            f"| {name} | {b50:.2f} µs | {m50:.2f} µs | {m50 - b50:+.2f} µs | "
            f"{_p(bare_t, 99):.2f} µs | {_p(metered_t, 99):.2f} µs |"
        )


if __name__ == "__main__":
    main()
