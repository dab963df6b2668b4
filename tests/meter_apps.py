"""Applications the meter tests run under real servers (uvicorn, waitress), each wrapped by
a ``Meter`` configured from the environment (``TC_METER_URL``, ``TC_METER_TOKEN``,
``TC_METER_SPOOL``, ``TC_METER_FLUSH``). Every endpoint burns the CPU it is asked for
(``?ms=``) with a busy loop on ``time.thread_time``, so the tests know what each tenant cost.

Async endpoints burn in several steps with an ``await`` between them, so concurrent requests
interleave on the event loop: the meter must not count another request's steps.

The database apps (``flask_db_app``, ``fastapi_db_app``) declare the metrics of
``TC_METER_METRICS`` and wait on the PostgreSQL of ``TC_METER_PG`` (a libpq URL) for a known
time: each ``/db`` request runs ``n`` queries ``SELECT pg_sleep(s)`` through the path
``via`` names and adds ``tokens`` (``meter.add``); building the app runs one query of
``OUTSIDE`` seconds outside any request (the empty client's). Each answer says how long the
app itself saw its queries take (``X-Db-Seconds``, and ``X-Outside-Seconds`` for that one):
on a loaded machine a query takes longer than its sleep, and the meter must see the same.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tenantcost_meter import Meter

STEPS = 4
OUTSIDE = 0.05
"""Seconds of the query a database app runs while it is built, outside any request."""


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _meter() -> Meter:
    metrics = [m for m in os.environ.get("TC_METER_METRICS", "").split(",") if m]
    return Meter(service=os.environ.get("TC_METER_SERVICE", "api"),
                 url=os.environ["TC_METER_URL"], token=os.environ["TC_METER_TOKEN"],
                 flush_seconds=float(os.environ.get("TC_METER_FLUSH", "1")),
                 spool_dir=os.environ["TC_METER_SPOOL"], metrics=metrics)  # fmt: skip


async def _burn_async(ms: float) -> None:
    for _ in range(STEPS):
        burn(ms / 1000 / STEPS)
        await asyncio.sleep(0)


def _ms(query: str) -> float:
    for part in query.split("&"):
        if part.startswith("ms="):
            return float(part[3:])
    return 0.0


async def plain(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A bare ASGI 3 application (lifespan supported, as uvicorn expects)."""
    if scope["type"] == "lifespan":
        if os.environ.get("TC_METER_NO_LIFESPAN"):
            return  # no lifespan support: uvicorn sends no shutdown event
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await _burn_async(_ms(scope.get("query_string", b"").decode()))
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
    await send({"type": "http.response.body", "body": b"ok"})


def _starlette() -> Any:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def burn_async(request: Request) -> PlainTextResponse:
        await _burn_async(float(request.query_params.get("ms", "0")))
        return PlainTextResponse("ok")

    def burn_sync(request: Request) -> PlainTextResponse:  # Starlette runs it in anyio's pool
        burn(float(request.query_params.get("ms", "0")) / 1000)
        return PlainTextResponse("ok")

    class Passing(BaseHTTPMiddleware):  # runs the app in a child task (anyio task group)
        async def dispatch(self, request: Request, call_next: Any) -> Any:
            return await call_next(request)

    return Starlette(routes=[Route("/async", burn_async), Route("/sync", burn_sync)],
                     middleware=[Middleware(Passing)])  # fmt: skip


def _fastapi() -> Any:
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse

    api = FastAPI()

    @api.get("/async", response_class=PlainTextResponse)
    async def burn_async(ms: float = 0) -> str:
        await _burn_async(ms)
        return "ok"

    @api.get("/sync", response_class=PlainTextResponse)
    def burn_sync(ms: float = 0) -> str:  # FastAPI runs it in anyio's thread pool
        burn(ms / 1000)
        return "ok"

    return api


def _flask() -> Any:
    from flask import Flask, request

    web = Flask(__name__)

    @web.get("/sync")
    def burn_sync() -> str:
        burn(float(request.args.get("ms", "0")) / 1000)
        return "ok"

    @web.after_request
    def slow_close(response: Any) -> Any:  # werkzeug calls it from the body's close()
        seconds = float(request.args.get("close_ms", "0")) / 1000
        if seconds:
            response.call_on_close(lambda: time.sleep(seconds))
        return response

    return web


def _db_query(args: Any) -> tuple[float, int, int]:
    """``s`` (seconds a query sleeps), ``n`` (queries) and ``tokens`` of a /db request."""
    return float(args.get("s", "0")), int(args.get("n", "1")), int(args.get("tokens", "0"))


_OUTSIDE_SEEN: list[float] = []


@contextmanager
def _watch(spent: list[float]) -> Iterator[None]:
    """The wall time of the block, appended to ``spent`` (what the app saw a query take)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        spent.append(time.perf_counter() - start)


def _seen(spent: list[float]) -> dict[str, str]:
    return {"X-Db-Seconds": f"{sum(spent):.6f}", "X-Outside-Seconds": f"{sum(_OUTSIDE_SEEN):.6f}"}


def _outside(meter: Meter) -> None:
    """One query of OUTSIDE seconds through a wrapped connection, outside any request."""
    import psycopg

    with psycopg.connect(os.environ["TC_METER_PG"], autocommit=True) as raw:
        conn = meter.wrap_dbapi(raw)
        with _watch(_OUTSIDE_SEEN):
            conn.execute("SELECT pg_sleep(%s)", (OUTSIDE,)).fetchall()


def _flask_db(meter: Meter) -> Any:
    """``/db?via=psycopg``: a wrapped psycopg connection per server thread (queries through
    ``conn.execute`` and through a cursor); ``via=sqlalchemy``: an engine the meter tracks."""
    import threading

    import psycopg
    from flask import Flask, request
    from sqlalchemy import create_engine, text

    dsn = os.environ["TC_METER_PG"]
    engine = create_engine(dsn.replace("postgresql://", "postgresql+psycopg://", 1),
                           pool_size=4)  # fmt: skip
    meter.track_sqlalchemy(engine)
    local = threading.local()
    web = Flask(__name__)

    @web.get("/db")
    def db() -> Any:
        seconds, n, tokens = _db_query(request.args)
        spent: list[float] = []
        if request.args.get("via") == "sqlalchemy":
            with engine.connect() as conn:
                for _ in range(n):
                    with _watch(spent):
                        conn.execute(text("SELECT pg_sleep(:s)"), {"s": seconds}).all()
        else:
            if not hasattr(local, "conn"):  # connecting is not counted
                local.conn = meter.wrap_dbapi(psycopg.connect(dsn, autocommit=True))
            conn = local.conn
            with _watch(spent):
                conn.execute("SELECT pg_sleep(%s)", (seconds,)).fetchone()
            with conn.cursor() as cur:
                for _ in range(n - 1):
                    with _watch(spent):
                        cur.execute("SELECT pg_sleep(%s)", (seconds,))
                        cur.fetchall()
        meter.add("tokens", tokens)
        return "ok", 200, _seen(spent)

    return web


def _fastapi_db(meter: Meter) -> Any:
    """``/db?via=psycopg``: psycopg's AsyncConnection through ``wrap_dbapi``;
    ``via=asyncpg``: a connection of an asyncpg pool through ``wrap_asyncpg``; ``/db_sync``:
    a sync endpoint (anyio's worker threads), a wrapped psycopg connection per thread.
    Connections are opened on first use and kept, as a pool does (opening is not counted).
    Concurrent requests interleave on the loop while they wait."""
    import threading

    import psycopg
    from fastapi import FastAPI
    from fastapi.responses import PlainTextResponse

    dsn = os.environ["TC_METER_PG"]
    api = FastAPI()
    idle: list[Any] = []  # psycopg AsyncConnections, wrapped, not in use
    pools: list[Any] = []  # the asyncpg pool, made in the server's loop
    local = threading.local()

    async def asyncpg_pool() -> Any:
        import asyncpg

        if not pools:
            pool = await asyncpg.create_pool(dsn, min_size=0, max_size=8)
            if pools:  # another request made one meanwhile
                await pool.close()
            else:
                pools.append(pool)
        return pools[0]

    @api.get("/db")
    async def db(s: float = 0, n: int = 1, tokens: int = 0, via: str = "psycopg") -> Any:
        spent: list[float] = []
        if via == "asyncpg":
            async with (await asyncpg_pool()).acquire() as raw:
                conn = meter.wrap_asyncpg(raw)
                with _watch(spent):
                    await conn.execute("SELECT pg_sleep($1)", s)
                for _ in range(n - 1):
                    with _watch(spent):
                        await conn.fetchval("SELECT pg_sleep($1)", s)
        else:
            conn = idle.pop() if idle else meter.wrap_dbapi(
                await psycopg.AsyncConnection.connect(dsn, autocommit=True))  # fmt: skip
            with _watch(spent):
                await (await conn.execute("SELECT pg_sleep(%s)", (s,))).fetchone()
            async with conn.cursor() as cur:
                for _ in range(n - 1):
                    with _watch(spent):
                        await cur.execute("SELECT pg_sleep(%s)", (s,))
                        await cur.fetchall()
            idle.append(conn)
        meter.add("tokens", tokens)
        return PlainTextResponse("ok", headers=_seen(spent))

    @api.get("/db_sync")
    def db_sync(s: float = 0, n: int = 1, tokens: int = 0) -> Any:  # in anyio's threads
        if not hasattr(local, "conn"):
            local.conn = meter.wrap_dbapi(psycopg.connect(dsn, autocommit=True))
        spent: list[float] = []
        for _ in range(n):
            with _watch(spent):
                local.conn.execute("SELECT pg_sleep(%s)", (s,)).fetchall()
        meter.add("tokens", tokens)
        return PlainTextResponse("ok", headers=_seen(spent))

    return api


_BUILT: dict[str, Any] = {}


def _build(name: str) -> Any:
    if name == "plain_app":
        return _meter().asgi(plain, tenant_header="x-tenant-id")
    if name == "starlette_app":
        return _meter().asgi(_starlette(), tenant_header="x-tenant-id")
    if name == "fastapi_app":
        return _meter().asgi(_fastapi(), tenant_header="x-tenant-id")
    if name == "flask_app":
        return _meter().wsgi(_flask(), tenant_header="X-Tenant-Id")
    if name in ("flask_db_app", "fastapi_db_app"):
        meter = _meter()
        _outside(meter)
        if name == "flask_db_app":
            return meter.wsgi(_flask_db(meter), tenant_header="X-Tenant-Id")
        return meter.asgi(_fastapi_db(meter), tenant_header="x-tenant-id")
    raise AttributeError(name)


def __getattr__(name: str) -> Any:
    """``uvicorn tests.meter_apps:starlette_app`` and friends: built (with their meter) on
    first access, so each server process builds only the application it serves."""
    if name not in _BUILT:
        _BUILT[name] = _build(name)
    return _BUILT[name]
