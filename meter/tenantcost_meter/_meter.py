"""``Meter``: counts each client's requests and CPU time per UTC hour and service, and the
metrics the application declares (database time, tokens...), and delivers the sums to
tenantcost (``POST /api/v1/usage``, ``mode: sum``).

The declared metrics are counted for the client of the context they are counted in
(``_current``: the request, the ``record()`` block, else the empty client): ``add`` a value,
``measure`` a block's wall time, or the database calls of a wrapped connection (``_db``).

The request path only adds to an in-memory cell (``_cells``). A daemon thread drains the cells
every ``flush_seconds`` into the delivery (``_delivery``: spooled to disk before the first
POST, retried, never counted twice); ``flush()``, ``close()``, ``atexit`` and SIGTERM do the
same at once. Unflushed cells live only in memory: SIGKILL loses at most the last
``flush_seconds`` of usage.

When the spool cannot be written (its filesystem full, its folder removed), the drained cells
go back into memory, merged with the new ones, and the next flush writes them again; at most
``max_cells`` cells are kept (past it the oldest hours are dropped, counted and logged at
ERROR), and once the spool is writable again everything kept is spooled and delivered once.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from enum import Enum
from time import perf_counter, thread_time
from types import TracebackType
from typing import Any, Union

from . import _lifecycle
from ._cells import FIRST_METRIC, MAX_CELLS, Cells, Dropped, Taken
from ._client_id import client_id_problem
from ._current import Attribution, current
from ._metrics import declared, undeclared, value_problem
from ._tenant import RefusalLog, TenantFunc, checked, logger

EXIT_SECONDS = 5.0
"""How long delivery may take at exit or on SIGTERM; what is left stays spooled."""

PathLike = Union[str, "os.PathLike[str]"]


class Spooling(Enum):
    """What one attempt to move the cells into the spool came to."""

    SPOOLED = "spooled"  # every cell is on disk (or there was none)
    KEPT = "kept"  # the spool could not be written: the cells are back in memory
    BUSY = "busy"  # the cells' lock could not be had in time (a signal handler)


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
        max_cells: int = MAX_CELLS,
        metrics: Iterable[str] = (),
    ) -> None:
        """``max_cells``: the cells (one per hour, service and client) kept in memory at
        most while the spool cannot be written; past it the oldest hours are dropped.
        ``metrics``: the columns every batch carries besides ``requests`` and
        ``cpu_seconds`` (``db_seconds``, ``tokens``...), 0 where nothing was counted."""
        if not isinstance(service, str) or not service or client_id_problem(service):
            raise ValueError("service must be a non-empty name without control characters, "
                             "at most 256 characters")  # fmt: skip
        if not flush_seconds > 0:
            raise ValueError(f"flush_seconds must be positive, got {flush_seconds!r}")
        if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
            raise ValueError(f"max_cells must be a positive integer, got {max_cells!r}")
        self.metrics = declared(metrics)
        self._metric_index = {name: FIRST_METRIC + i for i, name in enumerate(self.metrics)}
        self.service = service
        self.flush_seconds = float(flush_seconds)
        self.bytes_out = bool(bytes_out)
        self.max_cells = max_cells
        self.exit_seconds = EXIT_SECONDS
        self._delivery_args = (url, token, spool_dir if spool_dir is not None
                               else default_spool(service))  # fmt: skip
        from ._delivery import Delivery  # urllib and http.client: not at import time

        self._delivery = Delivery(*self._delivery_args)
        self._cells = Cells(self.bytes_out, max_cells, self.metrics)
        self._unspooled = ""  # the spool's last write error, while it lasts (logged once)
        self._lost = ""  # the write error logged as a loss at exit (logged once)
        self._refusals = RefusalLog()
        self._value_refusals = RefusalLog(message="metric value refused: %s; not counted%s")
        self._tracked: weakref.WeakSet[Any] = weakref.WeakSet()  # SQLAlchemy engines
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

    def add(self, metric: str, value: float) -> None:
        """Add ``value`` to ``metric`` (a name declared in ``metrics=``) for the current
        client: the request's (ASGI, WSGI, including its child tasks and anyio worker
        threads), the ``record()`` block's, else the empty client.

        An undeclared or invalid name raises ValueError (a mistake in the code). A value
        that is not a finite number >= 0 (at most 1e15) is not counted and is logged at
        WARNING, at most once a minute: it is data, and must not fail the request."""
        index = self._declared_index(metric)
        number, problem = value_problem(value)
        if problem is not None:
            self._value_refusals.refused(f"{metric}: {problem}")
        elif number:
            self._count(index, number, current.get())

    def measure(self, metric: str) -> Measurement:
        """A block's wall time (``time.perf_counter``) added to ``metric`` for the current
        client, as ``add`` does: ``with meter.measure("cache_seconds"): redis.get(key)``
        (``async with`` too). The block is counted when it ends, also by an exception."""
        return Measurement(self, self._declared_index(metric))

    def wrap_dbapi(self, connection: Any, metric: str = "db_seconds") -> Any:
        """``connection`` (DB-API 2.0: sqlite3, psycopg, pymysql...; or psycopg's
        ``AsyncConnection``) with the wall time of its ``execute``, ``executemany`` and
        fetches added to ``metric`` for the current client. Use the returned object in its
        place; everything else passes through (see docs/meter.md)."""
        from ._db import wrap_connection

        return wrap_connection(connection, self, self._declared_index(metric))

    def wrap_asyncpg(self, connection: Any, metric: str = "db_seconds") -> Any:
        """An asyncpg connection (or a pool's connection) with the wall time of its
        ``execute``, ``executemany`` and fetches (``fetch``, ``fetchrow``, ``fetchval``,
        ``fetchmany``, prepared statements and cursors) added to ``metric``."""
        from ._db import wrap_asyncpg

        return wrap_asyncpg(connection, self, self._declared_index(metric))

    def track_sqlalchemy(self, engine: Any, metric: str = "db_seconds") -> None:
        """Add the wall time of every cursor execution of ``engine`` (a SQLAlchemy
        ``Engine``, or an ``AsyncEngine``) to ``metric``, from its ``before_cursor_execute``
        to its ``after_cursor_execute`` (or ``handle_error``) events. Once per engine."""
        index = self._declared_index(metric)
        target = getattr(engine, "sync_engine", engine)  # an AsyncEngine's events are there
        if target in self._tracked:
            return
        from sqlalchemy import event  # the application's own SQLAlchemy: it gave an engine

        from ._db import sqlalchemy_listeners

        for name, listener, retval in sqlalchemy_listeners(self, index):
            event.listen(target, name, listener, retval=retval)
        self._tracked.add(target)

    def flush(self, timeout: float | None = None) -> bool:
        """Spool the cells counted so far and deliver the spool (within ``timeout`` seconds
        if given).

        True means tenantcost stored all of it: the cells were written to the spool, and
        every batch of the spool (these and any left before) was posted and answered 2xx
        by the time the call returns. False when anything is not stored: the spool could
        not be written (the cells stay in memory for the next flush), a batch waits in the
        spool (tenantcost unreachable, a backoff, the timeout, another process posting it),
        or a batch was refused for good during the call and moved to ``rejected/`` (logged
        at WARNING, with its ``.reason`` file)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        rejected = self._delivery.rejected
        if not self._flush_lock.acquire(timeout=_left(deadline)):
            return False
        try:
            spooling = self._spool()
        finally:
            self._flush_lock.release()
        try:
            delivered = self._delivery.deliver(deadline)
        finally:
            _lifecycle.kill_if_pending()
        return spooling is Spooling.SPOOLED and delivered and self._delivery.rejected == rejected

    def close(self, timeout: float = 10.0) -> None:
        """Stop the flusher thread, spool what is left and deliver it, all within ``timeout``
        seconds (a POST under way is cut at the end); what is not delivered stays spooled
        for the next process."""
        deadline = time.monotonic() + timeout
        self._closed = True
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_left(deadline))
        if self._flush_lock.acquire(timeout=_left(deadline)):
            try:
                self._spool(final=True)
            finally:
                self._flush_lock.release()
        self._delivery.close(_left(deadline))
        _lifecycle.unregister(self)

    # -- inside the meter ------------------------------------------------------------------

    def _opened(self) -> None:
        with self._open_lock:
            self._open += 1

    def _closed_one(self) -> None:
        with self._open_lock:
            self._open -= 1

    def _declared_index(self, metric: str) -> int:
        """The cell position of ``metric``; ValueError naming the declared ones if none."""
        index = self._metric_index.get(metric) if isinstance(metric, str) else None
        if index is None:
            raise undeclared(metric, self.metrics)
        return index

    def _count(self, index: int, value: float, attribution: Attribution | None) -> None:
        """``value`` added to the metric at cell position ``index`` for ``attribution``'s
        client (None: the empty client), in the cell of the hour now. The hot path of every
        database call: keep it short."""
        hour = int(time.time() // 3600)
        if attribution is None:
            key = (hour, self.service, "")
        elif attribution.owner is self:
            key = (hour, attribution.service, attribution.client)
        else:  # another meter's request: its client, this meter's service
            key = (hour, self.service, attribution.client)
        cells = self._cells
        with cells.lock:  # Cells.add_value's common case, inlined: a call less per query
            cell = cells._cells.get(key)
            if cell is not None:
                cell[index] += value
                return
        dropped = cells.add_value(key, index, value)
        if dropped is not None:
            self._log_dropped(dropped)

    def _add(self, service: str, client: str, requests: int, cpu: float, nbytes: int) -> None:
        """A measurement, in the cell of the hour now (the hour the request completed)."""
        dropped = self._cells.add(int(time.time() // 3600), service, client, requests, cpu,
                                  nbytes)  # fmt: skip
        if dropped is not None:
            self._log_dropped(dropped)
        if self._terminating:  # the process is about to end: no more waiting for a flush
            # (uvicorn re-raises SIGTERM once its graceful shutdown is over, which skips
            # atexit; an app without lifespan gives no later moment to deliver)
            self._flush_at_exit()
            _lifecycle.kill_if_pending()

    def _spool(self, lock_seconds: float = -1, final: bool = False) -> Spooling:
        """Drain the cells into the delivery's spool (the caller holds ``_flush_lock``).

        If the spool cannot be written, the cells not written go back into memory, merged
        with those counted meanwhile, for the next flush to write (``final``: there will be
        none, the loss is logged at ERROR)."""
        cells = self._cells.take(lock_seconds)
        if cells is None:
            return Spooling.BUSY
        records, keys = self._cells.records(cells)
        if not records:
            return Spooling.SPOOLED
        from ._delivery import Unspooled

        try:
            self._delivery.submit(records)
        except Unspooled as exc:
            key_of = {id(record): key for record, key in zip(records, keys)}
            self._keep({key_of[id(r)]: cells[key_of[id(r)]] for r in exc.records},
                       exc.cause, final)  # fmt: skip
            return Spooling.KEPT
        except BaseException:  # nothing reached the spool: keep it all
            self._keep(cells, None, final)
            raise
        if self._unspooled:
            logger().warning("tenantcost_meter: usage spool %s is writable again; the usage "
                             "kept in memory is spooled", self._delivery.folder)  # fmt: skip
            self._unspooled = ""
        return Spooling.SPOOLED

    def _keep(self, cells: Taken, cause: OSError | None, final: bool) -> None:
        """Cells the spool refused, back into memory (logged once while the fault lasts)."""
        dropped = self._cells.put_back(cells)
        if dropped is not None:
            self._log_dropped(dropped)
        problem = "an error" if cause is None else f"{type(cause).__name__}: {_reason(cause)}"
        if final and problem != self._lost:
            self._lost = problem
            logger().error("tenantcost_meter: usage could not be spooled to %s at close (%s): "
                           "%d cells in memory are lost when the process ends",
                           self._delivery.folder, problem, len(self._cells))  # fmt: skip
        elif problem != self._unspooled:
            logger().warning("tenantcost_meter: usage could not be spooled to %s (%s): %d "
                             "cells kept in memory (at most max_cells=%d, then the oldest "
                             "hours are dropped) and written at the next flush",
                             self._delivery.folder, problem, len(self._cells),
                             self.max_cells)  # fmt: skip
        self._unspooled = problem

    def _log_dropped(self, dropped: Dropped) -> None:
        logger().error("tenantcost_meter: more than max_cells=%d cells in memory (the spool "
                       "cannot be written): dropped %s; %d cells dropped in all",
                       self.max_cells, dropped.describe(), self._cells.dropped_cells)  # fmt: skip

    def _flush_at_exit(self, lock_seconds: float = -1) -> bool:
        """Spool and deliver within ``exit_seconds`` (SIGTERM, the end of an ASGI lifespan);
        False if the cells could not be had (a handler interrupting their own thread)."""
        if not self._flush_lock.acquire(timeout=lock_seconds):
            return False
        try:
            spooling = self._spool(lock_seconds, final=True)
        finally:
            self._flush_lock.release()
        try:
            self._delivery.deliver(time.monotonic() + self.exit_seconds)
        except Exception:
            logger().exception("tenantcost_meter: delivery at exit failed; batches stay spooled")
        return spooling is not Spooling.BUSY

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
            logger().exception("tenantcost_meter: flush failed; its cells are spooled or "
                               "kept in memory for the next flush")  # fmt: skip


def _reason(error: OSError) -> str:
    """An OSError's reason without the file name (a new temporary name at every flush would
    make every failure look new)."""
    return error.strerror or str(error)


def _left(deadline: float | None) -> float:
    """Seconds until ``deadline`` (-1, for ever, without one): a lock's or a join's wait."""
    return -1.0 if deadline is None else max(0.0, deadline - time.monotonic())


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
    meter._cells = Cells(meter.bytes_out, meter.max_cells, meter.metrics)
    meter._unspooled = ""
    meter._flush_lock = threading.Lock()
    meter._stop = threading.Event()
    from ._delivery import Delivery

    meter._delivery = Delivery(*meter._delivery_args)
    meter._start_flusher()


class Measurement:
    """A block's wall time, added to a metric when it ends (``Meter.measure``)."""

    __slots__ = ("_index", "_meter", "_start")

    def __init__(self, meter: Meter, index: int) -> None:
        self._meter = meter
        self._index = index
        self._start = 0.0

    def __enter__(self) -> Measurement:
        self._start = perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self._meter._count(self._index, perf_counter() - self._start, current.get())

    async def __aenter__(self) -> Measurement:
        self._start = perf_counter()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:  # fmt: skip
        self._meter._count(self._index, perf_counter() - self._start, current.get())


class Recording:
    """One request of a tenant around a block of code (a background job, a queue message).
    What the declared metrics count in the block (database time, ``add``) is its tenant's.

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
        self._token = current.set(Attribution(self.service, self.client, self.meter))
        self._start = thread_time()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        cpu = thread_time() - self._start
        current.reset(self._token)
        self.meter._add(self.service, self.client, 1, cpu, 0)

    async def __aenter__(self) -> Recording:
        from . import _cpu

        self._acc = _cpu.Accumulator(self.meter._add, self.service, self.client, children=False,
                                     owner=self.meter)  # fmt: skip
        self._token = current.set(self._acc)
        self._start = thread_time()
        return self

    async def __aexit__(self, kind: type[BaseException] | None,
                        error: BaseException | None,
                        trace: TracebackType | None) -> None:  # fmt: skip
        span = thread_time() - self._start
        current.reset(self._token)
        acc = self._acc
        acc.cpu += span
        self.meter._add(self.service, self.client, 1, acc.finish(), 0)
