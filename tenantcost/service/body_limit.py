"""A byte limit on every request body, enforced while the body streams in (``serve --max-body``).

A limit that reads only ``Content-Length`` lets a chunked body through whole: a 200 MB client
id was once stored that way, and the server grew by 2 GB parsing it. So the limit is pure ASGI
middleware around ``receive()``, not a check in each route, and not Starlette's
``BaseHTTPMiddleware`` (its ``dispatch`` cannot replace the ``receive`` that the application
reads the body from):

* a ``Content-Length`` over the limit is answered 413 before the application runs, so not one
  byte of the body is read (nor is ``100 Continue`` sent);
* a body without one (chunked) is counted chunk by chunk; the chunk that passes the limit is
  never handed on: the client gets 413 at once, and the application sees the client
  disconnect (whatever it then answers is dropped).

The 413 is ``{"detail": ...}`` like every API error, and says ``Connection: close``: uvicorn
then closes the connection instead of reading (and discarding) the rest of a 1 GB upload, so
the server's memory holds at most the limit of any one body and the client's upload ends
early. An answer given before the body was read to its end (a CSRF refusal, a 401) says
``Connection: close`` too, for the same reason: uvicorn would otherwise read the unread rest,
however long, to keep the connection. Routes that keep a body read it under this limit
(``request.body()`` for JSON) or stream it to a temporary file (``POST
/api/v1/usage.parquet``)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """ASGI middleware: 413 for a request body of more than ``max_body`` bytes."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body:
            await _refuse(send, self._detail(declared))
            return
        guard = _Guard(self.max_body, receive, send, self._detail(None))
        guard.finished = not declared and not _chunked(scope)  # no body at all
        try:
            await self.app(scope, guard.receive, guard.send)
        except Exception:
            if not guard.refused:  # the application's own failure: not ours to hide
                raise
            # The application saw the client "disconnect" (Starlette raises ClientDisconnect
            # while reading the body); the client already has its 413.

    def _detail(self, declared: int | None) -> str:
        size = f" ({declared} bytes)" if declared is not None else ""
        return (
            f"the request body{size} is over this service's limit of {self.max_body} bytes "
            "(tenantcost serve --max-body)"
        )


@dataclass
class _Guard:
    """One request's byte count: the ``receive`` and ``send`` the application is given."""

    limit: int
    inner_receive: Receive
    inner_send: Send
    detail: str
    seen: int = 0
    started: bool = False
    """The application has started its response (a 413 can no longer be sent)."""
    refused: bool = False
    """The 413 was sent: every later message of the application is dropped."""
    finished: bool = False
    """The body was received to its end (or there is none)."""

    async def receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self.inner_receive()
        if message["type"] != "http.request":
            return message
        self.seen += len(message.get("body", b""))
        if self.seen <= self.limit:
            self.finished = not message.get("more_body", False)
            return message
        if not self.started:
            self.refused = True
            await _refuse(self.inner_send, self.detail)
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.started = True
            if not self.finished:  # do not let uvicorn read the rest to keep the connection
                message = {**message, "headers": [*message.get("headers", []), _CLOSE]}
        await self.inner_send(message)


_CLOSE = (b"connection", b"close")


def _chunked(scope: Scope) -> bool:
    return any(
        name == b"transfer-encoding" and b"chunked" in value.lower()
        for name, value in scope["headers"]
    )


def _content_length(scope: Scope) -> int | None:
    """The declared body length, if any (uvicorn has refused a malformed one already)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


async def _refuse(send: Send, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        _CLOSE,
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
