"""The meter's cost per request: p50/p99 of a metered app against the same bare app.

Each app is called in process, in a loop, with a request of one of 100 tenants: a bare ASGI
app, Starlette with an async and with a sync endpoint (anyio's thread pool), and Flask (WSGI).
Bare and metered runs alternate in blocks so that the machine's drift (it is shared) hits
both alike; the figure is the difference of the medians. Called in process, the figures hold
no server or socket work: that is the same with or without the meter, so the difference is
the meter's own cost (a server's request costs far more than either).

    python benchmarks/meter_overhead.py [--requests 20000] [--blocks 10]

Needs the meter installed (``pip install -e ./meter``), Starlette and Flask (the test extra).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tenantcost_meter import Meter

TENANTS = [f"client-{i:03d}".encode() for i in range(100)]


def _scope(i: int, path: str) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
            "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 5000),
            "headers": [(b"host", b"127.0.0.1"), (b"x-tenant-id", TENANTS[i % 100])]}  # fmt: skip


async def plain(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def starlette_app() -> Any:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def fast(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    def sync(request: Any) -> PlainTextResponse:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/async", fast), Route("/sync", sync)])


async def _asgi_times(app: Any, path: str, n: int, out: list[float]) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        return None

    clock = time.perf_counter_ns
    for i in range(n):
        scope = _scope(i, path)
        start = clock()
        await app(scope, receive, send)
        out.append((clock() - start) / 1000)


def flask_app() -> Any:
    from flask import Flask

    web = Flask(__name__)

    @web.get("/sync")
    def ok() -> str:
        return "ok"

    return web


def _wsgi_times(app: Any, n: int, out: list[float]) -> None:
    def start_response(status: str, headers: list[Any], exc_info: Any = None) -> None:
        return None

    clock = time.perf_counter_ns
    base = {"REQUEST_METHOD": "GET", "PATH_INFO": "/sync", "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
            "QUERY_STRING": "", "wsgi.input": None, "wsgi.errors": None}  # fmt: skip
    for i in range(n):
        environ = dict(base, HTTP_X_TENANT_ID=TENANTS[i % 100].decode())
        start = clock()
        body = app(environ, start_response)
        for _ in body:
            pass
        close = getattr(body, "close", None)
        if close is not None:
            close()
        out.append((clock() - start) / 1000)


def _measure(run: Callable[[Any, int, list[float]], None], bare: Any, metered: Any,
             requests: int, blocks: int) -> tuple[list[float], list[float]]:  # fmt: skip
    times: tuple[list[float], list[float]] = ([], [])
    per_block = max(1, requests // blocks)
    run(bare, per_block // 5, [])  # warm both (imports, caches)
    run(metered, per_block // 5, [])
    for _ in range(blocks):
        run(bare, per_block, times[0])
        run(metered, per_block, times[1])
    return times


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--only", default="", help="only the variants whose name holds this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as spool:
        meter = Meter("api", "http://127.0.0.1:9", "tc_bench", flush_seconds=3600,
                      spool_dir=spool)  # fmt: skip
        rows = []
        star = starlette_app()
        variants = [("bare ASGI app", plain, "/"), ("Starlette, async endpoint", star, "/async"),
                    ("Starlette, sync endpoint (thread pool)", star, "/sync")]  # fmt: skip
        for name, bare, path in [v for v in variants if args.only in v[0]]:
            def run(app: Any, n: int, out: list[float], path: str = path) -> None:
                asyncio.run(_asgi_times(app, path, n, out))

            rows.append((name, *_measure(run, bare, meter.asgi(bare), args.requests,
                                         args.blocks)))  # fmt: skip
        if args.only in "Flask (WSGI)":
            web = flask_app()
            rows.append(("Flask (WSGI)", *_measure(_wsgi_times, web, meter.wsgi(web),
                                                   args.requests, args.blocks)))  # fmt: skip
        counted = sum(r["requests"] for r in meter._cells.drain() or [])
        meter.close(timeout=0.1)
    print(f"{platform.node()} ({platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{args.requests} requests per variant, {counted} counted by the meter")  # fmt: skip
    print("\n| app | bare p50 | metered p50 | overhead p50 | bare p99 | metered p99 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, bare_t, metered_t in rows:
        b50, m50 = statistics.median(bare_t), statistics.median(metered_t)
        print(f"| {name} | {b50:.1f} µs | {m50:.1f} µs | {m50 - b50:+.1f} µs | "
              f"{_p(bare_t, 99):.1f} µs | {_p(metered_t, 99):.1f} µs |")


if __name__ == "__main__":
    main()
