"""Applications the meter tests run under real servers (uvicorn, waitress), each wrapped by
a ``Meter`` configured from the environment (``TC_METER_URL``, ``TC_METER_TOKEN``,
``TC_METER_SPOOL``, ``TC_METER_FLUSH``). Every endpoint burns the CPU it is asked for
(``?ms=``) with a busy loop on ``time.thread_time``, so the tests know what each tenant cost.

Async endpoints burn in several steps with an ``await`` between them, so concurrent requests
interleave on the event loop: the meter must not count another request's steps.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from tenantcost_meter import Meter

STEPS = 4


def burn(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _meter() -> Meter:
    return Meter(service=os.environ.get("TC_METER_SERVICE", "api"),
                 url=os.environ["TC_METER_URL"], token=os.environ["TC_METER_TOKEN"],
                 flush_seconds=float(os.environ.get("TC_METER_FLUSH", "1")),
                 spool_dir=os.environ["TC_METER_SPOOL"])  # fmt: skip


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
    raise AttributeError(name)


def __getattr__(name: str) -> Any:
    """``uvicorn tests.meter_apps:starlette_app`` and friends: built (with their meter) on
    first access, so each server process builds only the application it serves."""
    if name not in _BUILT:
        _BUILT[name] = _build(name)
    return _BUILT[name]
