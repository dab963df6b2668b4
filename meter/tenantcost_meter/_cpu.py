"""CPU time of one request on an event loop: its own coroutine steps, measured step by step.

Why step by step: an event loop thread runs many requests interleaved, so the thread's CPU
between a request's start and end holds the other requests' work too. The meter drives the
request's coroutine itself (``send``/``throw``, as a Task does) and reads ``time.thread_time``
around each step, so only the request's own steps are summed.

What else is the request's, and how it is caught:

* Tasks created while the request runs (``asyncio.create_task``, anyio task groups, which
  Starlette's ``BaseHTTPMiddleware`` and ``StreamingResponse`` use): a task factory on the
  loop wraps every task created in a request's context with the same stepper.
* Sync endpoints and dependencies Starlette/FastAPI run with ``anyio.to_thread.run_sync``:
  a wrapper around that function (installed once, only when the application imported anyio)
  reads ``thread_time`` in the worker thread around the call.
* CPU that arrives after the request completed (a child task or a worker thread that outlives
  it) goes to the same tenant and service, with no request, in the hour it arrives.

The request's accumulator travels in a context variable: asyncio copies the context into the
tasks it creates and anyio into its worker threads, so nothing else needs to know the request.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import types
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator
from time import thread_time
from typing import Any

from ._current import Attribution, current

__all__ = ["Accumulator", "current", "install_anyio", "install_task_factory", "stepped"]

Sink = Callable[[str, str, int, float, int], None]
"""``(service, client, requests, cpu_seconds, bytes_out)``: adds to the meter's cells."""


class Accumulator(Attribution):
    """The CPU seconds of one request while it runs; after it completed, late CPU goes to
    the sink directly (no request, the hour it arrives). It is also the request's
    ``Attribution`` (``_current``): what else is counted in its context is its client's."""

    __slots__ = ("children", "cpu", "nbytes", "open", "sink", "threads")

    def __init__(self, sink: Sink, service: str, client: str, children: bool = True,
                 owner: Any = None) -> None:  # fmt: skip
        super().__init__(service, client, owner)
        self.sink = sink
        self.children = children  # step the tasks it creates (False: a span counts them)
        self.cpu = 0.0
        self.nbytes = 0
        self.threads: list[float] = []  # list.append is atomic: worker threads add here
        self.open = True

    def step(self, seconds: float) -> None:
        if self.open:
            self.cpu += seconds
        else:
            self.sink(self.service, self.client, 0, seconds, 0)

    def in_thread(self, seconds: float) -> None:
        if self.open:
            self.threads.append(seconds)
        else:
            self.sink(self.service, self.client, 0, seconds, 0)

    def finish(self) -> float:
        """Close the request; its CPU seconds (loop steps plus worker threads)."""
        self.open = False
        return self.cpu + sum(self.threads)


@types.coroutine
def stepped(awaitable: Awaitable[Any], acc: Accumulator) -> Generator[Any, Any, Any]:
    """Drive ``awaitable`` (a coroutine, or any awaitable an ASGI app returns) to its end,
    adding the CPU of each of its steps to ``acc``.

    Whatever it yields (a future) goes up to the Task unchanged, and what the Task sends or
    throws comes down unchanged: the coroutine cannot tell it is wrapped."""
    clock = thread_time
    coro = awaitable.__await__()
    send = coro.send
    value: Any = None
    error: BaseException | None = None
    while True:
        start = clock()
        try:
            if error is None:
                signal = send(value)
            else:
                thrown, error = error, None
                signal = coro.throw(thrown)
        except StopIteration as done:
            acc.step(clock() - start)
            return done.value
        except BaseException:
            acc.step(clock() - start)
            raise
        acc.step(clock() - start)
        try:
            value = yield signal
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as thrown:  # cancellation and the like: into the coroutine
            value, error = None, thrown


async def _child(coro: Coroutine[Any, Any, Any], acc: Accumulator) -> Any:
    return await stepped(coro, acc)


_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def install_task_factory(loop: asyncio.AbstractEventLoop) -> None:
    """Wrap the tasks created in a request's context with the stepper (once per loop;
    an existing task factory is kept and called)."""
    if loop in _loops:
        return
    _loops.add(loop)
    previous = loop.get_task_factory()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        context = kwargs.get("context")
        acc = current.get() if context is None else context.get(current)
        if isinstance(acc, Accumulator) and acc.children and asyncio.iscoroutine(coro):
            coro = _child(coro, acc)
        if previous is None:
            return asyncio.Task(coro, loop=loop, **kwargs)
        return previous(loop, coro, **kwargs)

    loop.set_task_factory(factory)


def _measured(func: Callable[..., Any], acc: Accumulator) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        start = thread_time()
        try:
            return func(*args)
        finally:
            acc.in_thread(thread_time() - start)

    return run


def install_anyio() -> bool:
    """Count the worker-thread CPU of ``anyio.to_thread.run_sync`` calls made in a request.

    Installed only if the application imported anyio (the meter never imports it for an app
    that does not use it), once; calls outside a request go straight to anyio's function."""
    if "anyio" not in sys.modules:
        return False
    import anyio.to_thread

    original = anyio.to_thread.run_sync
    if getattr(original, "_tenantcost_meter", False):
        return True

    @functools.wraps(original)
    def run_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # not a coroutine function of its own: it returns anyio's coroutine, so no extra
        # frame sits between the caller and anyio at every step of the wait
        acc = current.get()
        if isinstance(acc, Accumulator):  # not a WSGI request's or a sync record()'s
            func = _measured(func, acc)
        return original(func, *args, **kwargs)

    run_sync._tenantcost_meter = True  # type: ignore[attr-defined]
    anyio.to_thread.run_sync = run_sync  # type: ignore[assignment]
    return True
