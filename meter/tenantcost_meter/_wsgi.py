"""The WSGI middleware: the thread's CPU time from the call to the end of the response body.

A WSGI request runs in one thread from the call to the end of the body iteration (the server
writes the body in that thread too), so ``time.thread_time`` around the whole of it is the
request's CPU and nobody else's. The body iterable is wrapped: the request is counted when
the server closes it (PEP 3333 obliges servers to call ``close``; Flask runs its teardown
there), or when the app raises.

The request's client is also the current one (``_current``) from the call to the close of the
body, in that thread: what the declared metrics count meanwhile (database time, ``add``) is
its client's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from time import thread_time
from typing import TYPE_CHECKING, Any

from ._current import Attribution, current
from ._tenant import TenantFunc, from_callable, from_environ_text

if TYPE_CHECKING:
    from ._meter import Meter

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class MeteredWSGI:
    """``app`` with every request counted for its tenant."""

    def __init__(self, meter: Meter, app: WSGIApp, header: str | None,
                 tenant: TenantFunc | None) -> None:  # fmt: skip
        self.meter = meter
        self.app = app
        self.key = "HTTP_" + header.upper().replace("-", "_") if header is not None else None
        self.tenant = tenant

    def client(self, environ: dict[str, Any]) -> str:
        log = self.meter._refusals
        if self.tenant is not None:
            return from_callable(self.tenant, environ, log)
        return from_environ_text(environ.get(self.key), log)  # type: ignore[arg-type]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        start = thread_time()
        meter = self.meter
        client = self.client(environ)
        meter._opened()
        attribution = Attribution(meter.service, client, meter)
        token = current.set(attribution)
        try:
            body = self.app(environ, start_response)
        except BaseException:
            current.reset(token)
            meter._add(meter.service, client, 1, thread_time() - start, 0)
            meter._closed_one()
            raise
        return _Body(meter, client, body, start, (token, attribution))


class _Body:
    """The response body, counted once: at ``close`` (a server that never calls it: when the
    body is garbage collected, with no CPU if that happens in another thread)."""

    __slots__ = ("body", "client", "done", "entered", "meter", "nbytes", "start", "thread")

    def __init__(self, meter: Meter, client: str, body: Iterable[bytes], start: float,
                 entered: tuple[Any, Attribution]) -> None:  # fmt: skip
        self.meter = meter
        self.entered = entered  # the token that set the request's client, and the client
        self.client = client
        self.body = body
        self.start = start
        self.thread = threading.get_ident()
        self.nbytes = 0
        self.done = False

    def __iter__(self) -> Iterator[bytes]:
        if self.meter.bytes_out:
            return self._counting()
        return iter(self.body)  # counted at close(), which every server calls

    def _counting(self) -> Iterator[bytes]:
        for chunk in self.body:
            self.nbytes += len(chunk)
            yield chunk

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self._count()

    def __del__(self) -> None:  # a server that never closed the body: still counted
        self._count()

    def _count(self) -> None:
        if self.done:
            return
        self.done = True
        # thread_time is per thread: a server that ended the body in another thread than the
        # call's would give a meaningless difference, so only the same thread's is counted
        same = threading.get_ident() == self.thread
        cpu = thread_time() - self.start if same else 0.0
        token, attribution = self.entered
        # the thread's next request sets its own client; until then, none (unless this runs
        # late, from the garbage collector, while the thread serves another request)
        if same and current.get() is attribution:
            with suppress(ValueError, RuntimeError):  # another context (a greenlet's)
                current.reset(token)
        try:
            self.meter._add(self.meter.service, self.client, 1, cpu, self.nbytes)
        finally:
            self.meter._closed_one()
