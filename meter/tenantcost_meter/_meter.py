"""``Meter``: counts each client's requests and CPU time per UTC hour and service, and
delivers the sums to tenantcost (``POST /api/v1/usage``, ``mode: sum``).

The request path only adds to an in-memory cell (``_cells``). A daemon thread drains the cells
every ``flush_seconds`` into the delivery (``_delivery``: spooled to disk before the first
POST, retried, never counted twice); ``flush()``, ``close()``, ``atexit`` and SIGTERM do the
same at once. Unflushed cells live only in memory: SIGKILL loses at most the last
``flush_seconds`` of usage.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from time import thread_time
from types import TracebackType
from typing import Any, Union

from . import _lifecycle
from ._cells import Cells
from ._client_id import client_id_problem
from ._tenant import RefusalLog, TenantFunc, checked, logger

EXIT_SECONDS = 5.0
"""How long delivery may take at exit or on SIGTERM; what is left stays spooled."""

PathLike = Union[str, "os.PathLike[str]"]


def default_spool(service: str) -> str:
    """``$XDG_STATE_HOME/tenantcost-meter/SERVICE`` (``~/.local/state`` by default): a place
    that survives reboots, unlike a temporary folder."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                             "state")  # fmt: skip
    return os.path.join(state, "tenantcost-meter", service)


class Meter:
    """Per-client usage of one application process, delivered to tenantcost."""

    def __init__(
        self,
        service: str,
        url: str,
        token: str,
        flush_seconds: float = 60,
        spool_dir: PathLike | None = None,
        bytes_out: bool = False,
    ) -> None:
        if not isinstance(service, str) or not service or client_id_problem(service):
            raise ValueError("service must be a non-empty name without control characters, "
                             "at most 256 characters")  # fmt: skip
        if not flush_seconds > 0:
            raise ValueError(f"flush_seconds must be positive, got {flush_seconds!r}")
        self.service = service
        self.flush_seconds = float(flush_seconds)
        self.bytes_out = bool(bytes_out)
        self.exit_seconds = EXIT_SECONDS
        self._delivery_args = (url, token, spool_dir if spool_dir is not None
                               else default_spool(service))  # fmt: skip
        from ._delivery import Delivery  # urllib and http.client: not at import time

        self._delivery = Delivery(*self._delivery_args)
        self._cells = Cells(self.bytes_out)
        self._refusals = RefusalLog()
        self._flush_lock = threading.Lock()  # a drained batch is submitted before the next
        self._terminating = False
        self._closed = False
        self._open = 0  # WSGI responses begun and not yet closed (see _lifecycle's drain)
        self._open_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_flusher()
        _lifecycle.register(self)
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _after_fork(ref))

    # -- the application's API -----------------------------------------------------------

    def asgi(self, app: Any, tenant_header: str | None = None, *,
             tenant: TenantFunc | None = None) -> Any:  # fmt: skip
        """``app`` (any ASGI 3 application) with its requests counted per tenant: the tenant
        is the ``tenant_header`` request header, or what ``tenant(scope)`` returns."""
        from ._asgi import MeteredASGI  # asyncio only for applications that use it

        return MeteredASGI(self, app, *_tenant_source(tenant_header, tenant))

    def wsgi(self, app: Any, tenant_header: str | None = None, *,
             tenant: TenantFunc | None = None) -> Any:  # fmt: skip
        """``app`` (any WSGI application) with its requests counted per tenant: the tenant
        is the ``tenant_header`` request header, or what ``tenant(environ)`` returns."""
        from ._wsgi import MeteredWSGI

        return MeteredWSGI(self, app, *_tenant_source(tenant_header, tenant))

    def record(self, tenant: str | None, service: str | None = None) -> Recording:
        """One request of ``tenant`` on ``service`` (this meter's by default) around a block of
        code: ``with`` for sync code (the thread's CPU of the block), ``async with`` for
        async code (see ``Recording``)."""
        if service is not None and (not isinstance(service, str) or not service
                                    or client_id_problem(service)):  # fmt: skip
            raise ValueError("service must be a non-empty name without control characters")
        return Recording(self, checked(tenant, self._refusals), service or self.service)

    def flush(self, timeout: float | None = None) -> bool:
        """Spool the cells counted so far and deliver the spool (within ``timeout`` seconds
        if given). True when everything was delivered."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._flush_lock:
            self._spool()
        try:
            return self._delivery.deliver(deadline)
        finally:
            _lifecycle.kill_if_pending()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the flusher thread, spool what is left and deliver it within ``timeout``
        seconds; what is not delivered stays spooled for the next process."""
        self._closed = True
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        with self._flush_lock:
            self._spool()
        self._delivery.close(timeout)
        _lifecycle.unregister(self)

    # -- inside the meter ------------------------------------------------------------------

    def _opened(self) -> None:
        with self._open_lock:
            self._open += 1

    def _closed_one(self) -> None:
        with self._open_lock:
            self._open -= 1

    def _add(self, service: str, client: str, requests: int, cpu: float, nbytes: int) -> None:
        """A measurement, in the cell of the hour now (the hour the request completed)."""
        self._cells.add(int(time.time() // 3600), service, client, requests, cpu, nbytes)
        if self._terminating:  # the process is about to end: no more waiting for a flush
            # (uvicorn re-raises SIGTERM once its graceful shutdown is over, which skips
            # atexit; an app without lifespan gives no later moment to deliver)
            self._flush_at_exit()
            _lifecycle.kill_if_pending()

    def _spool(self, lock_seconds: float = -1) -> bool:
        """Drain the cells into the delivery's spool (the caller holds ``_flush_lock``)."""
        records = self._cells.drain(lock_seconds)
        if records is None:
            return False
        if records:
            self._delivery.submit(records)
        return True

    def _flush_at_exit(self, lock_seconds: float = -1) -> bool:
        """Spool and deliver within ``exit_seconds`` (SIGTERM, the end of an ASGI lifespan);
        False if the cells could not be had (a handler interrupting their own thread)."""
        if not self._flush_lock.acquire(timeout=lock_seconds):
            return False
        try:
            spooled = self._spool(lock_seconds)
        finally:
            self._flush_lock.release()
        try:
            self._delivery.deliver(time.monotonic() + self.exit_seconds)
        except Exception:
            logger().exception("tenantcost_meter: delivery at exit failed; batches stay spooled")
        return spooled

    def _start_flusher(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tenantcost-meter-flush",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _run(self) -> None:
        """Every ``flush_seconds``: drain, spool, deliver. Batches a previous process left
        in the spool are delivered first. An error is logged, never ends the thread."""
        self._guarded(self._delivery.deliver)
        while not self._stop.wait(self.flush_seconds):
            self._guarded(self.flush)

    def _guarded(self, step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception:
            logger().exception("tenantcost_meter: flush failed; the cells stay spooled or counted")


def _tenant_source(tenant_header: str | None, tenant: TenantFunc | None
                   ) -> tuple[str | None, TenantFunc | None]:  # fmt: skip
    if tenant is not None and tenant_header is not None:
        raise TypeError("give tenant_header or tenant, not both")
    if tenant is not None and not callable(tenant):
        raise TypeError("tenant must be a callable (scope or environ) -> str | None")
    if tenant is None and tenant_header is None:
        tenant_header = "x-tenant-id"
    return tenant_header, tenant


def _after_fork(ref: weakref.ref[Meter]) -> None:
    """In a forked child the parent's cells are the parent's to deliver, and the flusher
    thread did not survive the fork: start clean."""
    meter = ref()
    _lifecycle.after_fork_in_child()
    if meter is None or meter._closed:
        return
    meter._cells = Cells(meter.bytes_out)
    meter._flush_lock = threading.Lock()
    meter._stop = threading.Event()
    from ._delivery import Delivery

    meter._delivery = Delivery(*meter._delivery_args)
    meter._start_flusher()


class Recording:
    """One request of a tenant around a block of code (a background job, a queue message).

    ``with``: the thread's CPU time from the start of the block to its end.
    ``async with``: the event loop thread's CPU from the start of the block to its end, plus
    the worker threads of ``anyio.to_thread.run_sync`` calls made in it. An ``async with``
    block cannot be stepped like a request's coroutine: other tasks that run on the loop
    while the block awaits are counted too (see docs/meter.md)."""

    def __init__(self, meter: Meter, client: str, service: str) -> None:
        self.meter = meter
        self.client = client
        self.service = service
        self._start = 0.0
        self._acc: Any = None
        self._token: Any = None

    def __enter__(self) -> Recording:
        self._start = thread_time()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self.meter._add(self.service, self.client, 1, thread_time() - self._start, 0)

    async def __aenter__(self) -> Recording:
        from . import _cpu

        self._acc = _cpu.Accumulator(self.meter._add, self.service, self.client, children=False)
        self._token = _cpu.current.set(self._acc)
        self._start = thread_time()
        return self

    async def __aexit__(self, kind: type[BaseException] | None,
                        error: BaseException | None,
                        trace: TracebackType | None) -> None:  # fmt: skip
        from . import _cpu

        span = thread_time() - self._start
        _cpu.current.reset(self._token)
        acc = self._acc
        acc.cpu += span
        self.meter._add(self.service, self.client, 1, acc.finish(), 0)
