"""The meter's database time and declared metrics (``db_seconds``, ``tokens``), with real parts.

Under real servers, delivering to a real ``tenantcost serve``: Flask under waitress with a
sync psycopg connection (``wrap_dbapi``) and a SQLAlchemy engine (``track_sqlalchemy``);
FastAPI under uvicorn with psycopg's AsyncConnection (``wrap_dbapi``), asyncpg
(``wrap_asyncpg``) and a sync endpoint in anyio's thread pool. Concurrent clients of three
tenants run queries that wait a known time on a real PostgreSQL (``SELECT pg_sleep(s)``):
each tenant's stored ``db_seconds`` must be within 10 % of what it waited, its ``tokens``
(``meter.add``) exactly what it sent, and the query the app ran while it was built (outside
any request) is the empty client's. On the event loop the requests wait interleaved: a
request's database time must not be another's.

What a tenant waited is what the app (or the test, in process) saw around the same calls with
its own ``perf_counter``: on a loaded machine (the suite runs two workers on two cores) a
50 ms sleep takes 55 or 60 ms of wall time, and the meter must count those. The sleeps asked
for are a floor: the meter's figure is never below them.

In process: SQLite through ``wrap_dbapi`` (a function that sleeps per row), asyncpg's
prepared statements and cursors, SQLAlchemy's failed statements, and the rules for metric
names and values. Every batch of the module's store carries the same columns (a meter
declares its metrics once; the store would also take a batch that adds one, the earlier rows
reading 0 in it).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from tenantcost_meter import Meter

from .meter_apps import OUTSIDE
from .service_server import create_token, running_service, tenantcost
from .test_meter_servers import PROBES, App, Store, start_app, stop

CLOSED = "http://127.0.0.1:9"  # in-process meters deliver nothing
METRICS = ["db_seconds", "tokens"]
SLEEP = {"client-a": 0.08, "client-b": 0.04, "client-c": 0.06}
"""Seconds each of a tenant's queries waits on the database (``pg_sleep`` itself overshoots
by about half a millisecond, and a round trip on the loopback adds a tenth: the sleeps are
long enough for the 10 % tolerance)."""
TOKENS = {"client-a": 1000, "client-b": 7, "client-c": 123_457}
"""Tokens each request of a tenant adds."""
QUERIES = 2
REQUESTS = 3
"""Requests per tenant and path."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp = tmp_path_factory.mktemp("meter-db-store")
    db, data = f"sqlite:///{tmp / 'store.db'}", tmp / "data"
    tenantcost("db", "upgrade", "--db", db, "--data", str(data))
    token = create_token(db, "ingest", "meter")
    with running_service(db, str(data), tmp / "serve.log") as service:
        yield Store(db, data, token, service)


@pytest.fixture
def pg(postgres_admin_url: str) -> str:
    """The libpq URL of the test cluster's ``postgres`` database (only pg_sleep runs there)."""
    return postgres_admin_url.replace("postgresql+psycopg://", "postgresql://") + "postgres"


@dataclass
class Traffic:
    """What the test sent, per tenant: the sleeps it asked for, the seconds the app saw its
    queries take, the tokens; and the seconds the app saw its query outside any request."""

    asked: dict[str, float]
    seen: dict[str, float]
    tokens: dict[str, int]
    outside: float


def drive(app: App, paths: list[str]) -> Traffic:
    """REQUESTS requests per tenant and path from 6 concurrent clients."""
    calls = [(tenant, path) for _ in range(REQUESTS) for path in paths for tenant in SLEEP]
    local = threading.local()

    def call(item: tuple[str, str]) -> tuple[float, float]:
        tenant, path = item
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=60)
        query = f"s={SLEEP[tenant]}&n={QUERIES}&tokens={TOKENS[tenant]}"
        answer = local.client.get(f"{app.url}{path}{'&' if '?' in path else '?'}{query}",
                                  headers={"X-Tenant-Id": tenant})  # fmt: skip
        assert answer.status_code == 200, answer.text
        return float(answer.headers["X-Db-Seconds"]), float(answer.headers["X-Outside-Seconds"])

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(call, calls))
    traffic = Traffic({t: 0.0 for t in SLEEP}, {t: 0.0 for t in SLEEP}, {t: 0 for t in SLEEP},
                      answers[0][1])  # fmt: skip
    for (tenant, _), (seen, _) in zip(calls, answers, strict=True):
        traffic.asked[tenant] += QUERIES * SLEEP[tenant]
        traffic.seen[tenant] += seen
        traffic.tokens[tenant] += TOKENS[tenant]
    return traffic


def assert_waited(db: float, seen: float, asked: float, what: Any = "") -> None:
    """The meter's database seconds: within 10 % of what the app saw around the same calls,
    and not below the sleeps asked for (less would be time it did not see)."""
    assert abs(db - seen) <= 0.1 * seen, (what, db, seen, asked)
    assert db >= asked - 1e-6, (what, db, seen, asked)


def stored(store: Store, service: str, expected: int, wait: float = 60) -> pd.DataFrame:
    """The store's usage of ``service`` per client once ``expected`` requests arrived."""
    deadline = time.monotonic() + wait
    while True:
        rows = store.usage()
        rows = rows[rows["service"] == service]
        if rows["requests"].sum() >= expected or time.monotonic() > deadline:
            return rows.groupby("client")[["requests", "cpu_seconds", *METRICS]].sum()
        time.sleep(0.3)


def check(rows: pd.DataFrame, traffic: Traffic, per_tenant: int) -> None:
    assert sorted(rows.index) == ["", *sorted(SLEEP)], rows
    # the app's query while it was built: outside any request, the empty client's
    assert rows.loc["", "requests"] == PROBES, rows
    assert_waited(rows.loc["", "db_seconds"], traffic.outside, OUTSIDE, rows)
    assert rows.loc["", "tokens"] == 0, rows
    for tenant in SLEEP:
        assert rows.loc[tenant, "requests"] == per_tenant, rows
        assert_waited(rows.loc[tenant, "db_seconds"], traffic.seen[tenant],
                      traffic.asked[tenant], (tenant, rows))  # fmt: skip
        assert rows.loc[tenant, "tokens"] == traffic.tokens[tenant], rows


def test_flask_under_waitress_counts_each_clients_database_time_and_tokens(
    store: Store, tmp_path: Path, pg: str
) -> None:
    """A psycopg connection per server thread (``wrap_dbapi``) and a pooled SQLAlchemy engine
    (``track_sqlalchemy``), four waitress threads serving six concurrent clients."""
    paths = ["/db?via=psycopg", "/db?via=sqlalchemy"]
    served = start_app(store, tmp_path, "flask_db_app", service="flask-db", server="waitress",
                       TC_METER_METRICS=",".join(METRICS), TC_METER_PG=pg)  # fmt: skip
    try:
        traffic = drive(served, paths)
        rows = stored(store, "flask-db", REQUESTS * len(paths) * len(SLEEP) + PROBES)
    finally:
        stop(served)
    check(rows, traffic, REQUESTS * len(paths))


def test_fastapi_under_uvicorn_counts_each_clients_database_time_and_tokens(
    store: Store, tmp_path: Path, pg: str
) -> None:
    """psycopg's AsyncConnection (``wrap_dbapi``) and asyncpg (``wrap_asyncpg``): six
    requests wait at once on one event loop, each its own queries; and a sync endpoint, whose
    queries run in anyio's worker threads."""
    paths = ["/db?via=psycopg", "/db?via=asyncpg", "/db_sync"]
    served = start_app(store, tmp_path, "fastapi_db_app", service="fastapi-db",
                       TC_METER_METRICS=",".join(METRICS), TC_METER_PG=pg)  # fmt: skip
    try:
        traffic = drive(served, paths)
        rows = stored(store, "fastapi-db", REQUESTS * len(paths) * len(SLEEP) + PROBES)
    finally:
        stop(served)
    check(rows, traffic, REQUESTS * len(paths))


# -- in process ------------------------------------------------------------------------------


@pytest.fixture
def meter(tmp_path: Path) -> Iterator[Meter]:
    m = Meter("api", CLOSED, "tc_test", flush_seconds=3600, spool_dir=tmp_path / "spool",
              metrics=METRICS)  # fmt: skip
    yield m
    m._cells.drain()
    m.close(timeout=0.1)


def cells(meter: Meter) -> dict[str, dict[str, Any]]:
    return {r["client"]: r for r in meter._cells.drain() or []}


def _nap(ms: float) -> float:
    time.sleep(ms / 1000)
    return ms


def _nap_then_fail(ms: float) -> float:
    _nap(ms)
    raise RuntimeError("the statement fails after waiting")


def _sleeping_sqlite() -> sqlite3.Connection:
    """SQLite with ``nap(ms)``: sleeps, returns ms (called once per row it is computed for),
    and ``nap_then_fail(ms)``: sleeps, then fails the statement."""
    raw = sqlite3.connect(":memory:", check_same_thread=False)
    raw.create_function("nap", 1, _nap)
    raw.create_function("nap_then_fail", 1, _nap_then_fail)
    return raw


class Seen:
    """The wall time the test saw around the calls the meter times, per client: what the
    meter's figures are compared with (``assert_waited``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    @contextmanager
    def around(self, client: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            with self._lock:
                self.seconds[client] = self.seconds.get(client, 0.0) + spent

    def check(self, got: dict[str, dict[str, Any]], asked: dict[str, float]) -> None:
        for client, seconds in asked.items():
            assert_waited(got[client]["db_seconds"], self.seconds[client], seconds, client)


def test_sqlite_through_wrap_dbapi_counts_executes_fetches_and_iteration(meter: Meter) -> None:
    """SQLite computes rows as they are fetched: ``execute`` runs to the first row, the rest
    is the fetches' and the iteration's. A failed statement's time counts too."""
    conn = meter.wrap_dbapi(_sleeping_sqlite())
    seen = Seen()
    three_rows = "SELECT nap(20) FROM (VALUES (1), (2), (3))"
    with meter.record("client-a"):
        with seen.around("client-a"):
            cur = conn.execute(three_rows)  # the connection's shortcut: a wrapped cursor
            rows = [cur.fetchone(), *cur.fetchall()]
        with conn, seen.around("client-a"):  # sqlite3's transaction block, wrapped
            conn.execute("CREATE TABLE t (x)")
            conn.executemany("INSERT INTO t VALUES (nap(?))", [(10,), (10,)])
    assert rows == [(20,)] * 3
    with meter.record("client-b"):
        cur = conn.cursor()
        with seen.around("client-b"):
            executed = cur.execute(three_rows)
            rows = [row for row in cur]
        assert executed is cur and rows == [(20,)] * 3  # execute returns the wrapper
        with seen.around("client-b"):
            cur.execute(three_rows)
            rows = [*cur.fetchmany(2), next(cur)]
        assert rows == [(20,)] * 3
        with pytest.raises(sqlite3.OperationalError), seen.around("client-b"):
            cur.execute("SELECT nap_then_fail(30)")
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (2,)  # outside: empty client
    got = cells(meter)
    seen.check(got, {"client-a": 0.080, "client-b": 0.150})
    assert 0 < got[""]["db_seconds"] < 0.01 and got[""]["requests"] == 0
    assert got["client-a"]["tokens"] == 0  # every declared column, 0 where nothing counted


def test_sqlite_in_wsgi_requests_goes_to_each_request_s_client(meter: Meter) -> None:
    """Two WSGI requests in parallel threads: each one's queries are its own, until its body
    is closed; the thread's next work outside a request is the empty client's."""
    conn = meter.wrap_dbapi(_sleeping_sqlite())
    seen = Seen()
    lock = threading.Lock()  # one sqlite3 connection: one statement at a time

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        with lock, seen.around(environ["HTTP_X_TENANT_ID"]):
            conn.execute(f"SELECT nap({environ['QUERY_STRING']})").fetchall()
        start_response("200 OK", [])
        return [b"ok"]

    wsgi = meter.wsgi(app, tenant_header="X-Tenant-Id")

    def request(tenant: str, ms: int) -> None:
        body = wsgi({"HTTP_X_TENANT_ID": tenant, "QUERY_STRING": str(ms)}, lambda *a: None)
        b"".join(body)
        body.close()
        with lock, seen.around(""):  # after the request, in its thread: nobody's
            conn.execute("SELECT nap(20)").fetchall()

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(request, ["client-a", "client-b"] * 3, [40, 20] * 3))
    seen.check(cells(meter), {"client-a": 0.120, "client-b": 0.060, "": 0.120})


def test_asyncpg_interleaved_requests_statements_and_cursors(meter: Meter, pg: str) -> None:
    """Interleaved ASGI requests on one loop, each waiting on its own connection: fetches,
    a prepared statement, a cursor in a transaction (awaited and iterated), and a failed
    query, each counted to its request's client."""
    import asyncpg

    seen = Seen()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        tenant, seconds = headers[b"x-tenant-id"].decode(), float(headers[b"x-seconds"])
        conn = meter.wrap_asyncpg(await asyncpg.connect(pg))
        try:
            with seen.around(tenant):
                assert await conn.fetchval("SELECT pg_sleep($1)::text", seconds) == ""
            statement = await conn.prepare("SELECT $1::float8 AS s, pg_sleep($1)")  # not timed
            with seen.around(tenant):
                assert (await statement.fetchrow(seconds))["s"] == seconds
            async with conn.transaction():  # BEGIN and COMMIT: not timed
                with seen.around(tenant):
                    rows = [r async for r in conn.cursor("SELECT pg_sleep($1)", seconds)]
                    cursor = await conn.cursor("SELECT pg_sleep($1) FROM generate_series(1, 2)",
                                               seconds / 2)  # fmt: skip
                    fetched = await cursor.fetch(2)
            assert len(rows) == 1 and len(fetched) == 2
            with pytest.raises(asyncpg.PostgresError), seen.around(tenant):  # waited, failed
                await conn.execute("SELECT length(pg_sleep($1)::text) / 0", seconds)
        finally:
            await conn.close()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    metered = meter.asgi(app, tenant_header="x-tenant-id")

    async def request(tenant: bytes, seconds: float) -> None:
        scope = {"type": "http", "headers": [(b"x-tenant-id", tenant),
                                             (b"x-seconds", str(seconds).encode())]}  # fmt: skip

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(message: dict[str, Any]) -> None:
            return None

        await metered(scope, receive, send)

    async def main() -> None:
        await asyncio.gather(*[request(b"heavy", 0.06) for _ in range(2)],
                             *[request(b"light", 0.03) for _ in range(2)])  # fmt: skip

    asyncio.run(main())
    got = cells(meter)
    # each request: fetchval, the statement, the iterated cursor, the fetched cursor (two
    # rows of half the time) and the failed query: five waits of `seconds`
    seen.check(got, {"heavy": 2 * 5 * 0.06, "light": 2 * 5 * 0.03})
    assert got["heavy"]["requests"] == 2 and "" not in got


def test_sqlalchemy_counts_failed_statements_and_async_engines(meter: Meter, pg: str) -> None:
    """``handle_error`` ends a failed statement's time; an AsyncEngine's events are those of
    its sync engine, in the request's context; tracking twice counts once."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(pg.replace("postgresql://", "postgresql+psycopg://", 1))
    meter.track_sqlalchemy(engine)
    meter.track_sqlalchemy(engine.sync_engine)
    seen = Seen()

    async def main() -> None:
        async with engine.connect() as conn:  # the dialect's first queries: nobody's
            await conn.execute(text("SELECT 1"))
        cells(meter)

        async def one(tenant: str, seconds: float) -> None:
            async with meter.record(tenant), engine.connect() as conn:
                with seen.around(tenant):
                    await conn.execute(text("SELECT pg_sleep(:s)"), {"s": seconds})
                with pytest.raises(DBAPIError), seen.around(tenant):
                    await conn.execute(text("SELECT length(pg_sleep(:s)::text) / 0"),
                                       {"s": seconds})  # fmt: skip

        await asyncio.gather(one("client-a", 0.06), one("client-b", 0.03))
        await engine.dispose()

    asyncio.run(main())
    seen.check(cells(meter), {"client-a": 0.12, "client-b": 0.06})


def test_psycopg_server_side_cursors_and_streams_are_counted(meter: Meter, pg: str) -> None:
    """A named (server-side) cursor computes its rows as they are fetched (DECLARE at
    execute, a FETCH round trip per chunk), and so does ``stream``: iterating is waiting.
    Sync, and async in two concurrent tasks of one loop (``async for``)."""
    import psycopg

    seen = Seen()
    rows = "SELECT pg_sleep(%s) FROM generate_series(1, 3)"
    with psycopg.connect(pg) as raw, meter.record("client-a"):
        conn = meter.wrap_dbapi(raw)
        with conn.cursor(name="rows") as cur:
            cur.itersize = 1  # one FETCH per row: each waits 30 ms
            with seen.around("client-a"):
                cur.execute(rows, (0.03,))
                assert len(list(cur)) == 3
        with seen.around("client-a"):
            assert len(list(conn.cursor().stream(rows, (0.02,)))) == 3

    async def one(tenant: str, seconds: float) -> None:
        raw = await psycopg.AsyncConnection.connect(pg)
        async with meter.record(tenant), meter.wrap_dbapi(raw) as conn:
            async with conn.cursor(name="rows") as cur:
                cur.itersize = 1
                with seen.around(tenant):
                    await cur.execute(rows, (seconds,))
                    assert len([row async for row in cur]) == 3
            with seen.around(tenant):
                assert len([r async for r in conn.cursor().stream(rows, (seconds,))]) == 3

    async def both() -> None:
        await asyncio.gather(one("client-b", 0.03), one("client-c", 0.01))

    asyncio.run(both())
    seen.check(cells(meter), {"client-a": 0.15, "client-b": 0.18, "client-c": 0.06})


def test_metric_names_values_and_columns(
    meter: Meter, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for metrics, problem in [("db_seconds", "not one string"), (["Tokens"], "lower-case"),
                             (["db seconds"], "usage column"), (["requests"], "itself"),
                             (["client"], "reserved"), (["even"], "reserved"),
                             (["tokens", "tokens"], "twice"), ([7], "str")]:  # fmt: skip
        with pytest.raises(ValueError, match=problem):
            Meter("api", CLOSED, "tc_x", spool_dir=tmp_path, metrics=metrics)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"'gpu_seconds' is not declared.*'db_seconds', 'tokens'"):
        meter.add("gpu_seconds", 1)
    with pytest.raises(ValueError, match="not declared"):
        meter.measure("gpu_seconds")
    with pytest.raises(ValueError, match="not a usage column"):
        meter.add("GPU", 1)
    with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
        for bad in (-1, float("nan"), float("inf"), 1e16, "3", True, None):
            meter.add("tokens", bad)  # type: ignore[arg-type]
    lines = [r.getMessage() for r in caplog.records if r.name == "tenantcost_meter"]
    assert len(lines) == 1 and "tokens: -1.0 is negative; not counted" in lines[0], lines
    with meter.record("client-a"):
        meter.add("tokens", 3)
        meter.add("tokens", 2.5)
        with meter.measure("db_seconds"):
            time.sleep(0.01)
    bare = Meter("api", CLOSED, "tc_x", spool_dir=tmp_path / "bare")
    try:
        with pytest.raises(ValueError, match="'db_seconds' is not declared"):
            bare.wrap_dbapi(sqlite3.connect(":memory:"))
    finally:
        bare.close(timeout=0.1)
    (record,) = meter._cells.drain() or []
    assert record["tokens"] == 5.5 and record["db_seconds"] == pytest.approx(0.01, rel=0.5)
    assert list(record)[-2:] == METRICS and record["requests"] == 1
