"""The ASGI middleware: one request counted per HTTP request (or WebSocket session), with
the CPU of its own coroutine steps (see ``_cpu``), in the UTC hour it completes.

Lifespan events pass through; when the server reports the application's shutdown complete,
the meter flushes first (uvicorn sends it after the requests in flight finished, so their
usage is delivered before the process exits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from . import _cpu
from ._tenant import TenantFunc, from_callable, from_header_bytes

if TYPE_CHECKING:
    from ._meter import Meter

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

METERED = ("http", "websocket")


class MeteredASGI:
    """``app`` with every HTTP request and WebSocket session counted for its tenant."""

    def __init__(self, meter: Meter, app: ASGIApp, header: str | None,
                 tenant: TenantFunc | None) -> None:  # fmt: skip
        self.meter = meter
        self.app = app
        self.header = header.lower().encode("latin-1") if header is not None else None
        self.tenant = tenant
        self._loop: asyncio.AbstractEventLoop | None = None
        _cpu.install_anyio()

    def client(self, scope: Scope) -> str:
        log = self.meter._refusals
        if self.tenant is not None:
            return from_callable(self.tenant, scope, log)
        name = self.header
        for key, value in scope.get("headers") or ():
            if key == name:
                return from_header_bytes(bytes(value), log)
        return ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in METERED:
            if kind == "lifespan":
                send = self._lifespan_send(send)
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            _cpu.install_task_factory(loop)
            _cpu.install_anyio()
            self._loop = loop
        meter = self.meter
        acc = _cpu.Accumulator(meter._add, meter.service, self.client(scope), owner=meter)
        if meter.bytes_out:
            send = _counting(send, acc)
        token = _cpu.current.set(acc)
        try:
            await _cpu.stepped(self.app(scope, receive, send), acc)
        finally:
            _cpu.current.reset(token)
            meter._add(acc.service, acc.client, 1, acc.finish(), acc.nbytes)

    def _lifespan_send(self, send: Send) -> Send:
        meter = self.meter

        async def lifespan_send(message: Message) -> None:
            if message.get("type") in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                meter._flush_at_exit()
            await send(message)

        return lifespan_send


def _counting(send: Send, acc: _cpu.Accumulator) -> Send:
    """``send`` that adds the body bytes of the response (or of WebSocket messages)."""

    async def counting_send(message: Message) -> None:
        body = message.get("body") or message.get("bytes") or message.get("text")
        if body:
            acc.nbytes += len(body.encode("utf-8") if isinstance(body, str) else body)
        await send(message)

    return counting_send
