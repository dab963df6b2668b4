"""Database time: the wall time (``time.perf_counter``) of each call that waits on the database,
added to the metric (``db_seconds``) of the client whose context makes the call (``_current``).

Three ways in, none of which imports a driver (the objects are duck-typed):

* ``wrap_dbapi``: a proxy around a DB-API 2.0 connection (sqlite3, psycopg, pymysql...) or
  psycopg's ``AsyncConnection``. Timed: ``execute``, ``executemany``, ``executescript`` and
  ``callproc`` of the connection and of its cursors, the cursors' ``fetchone``,
  ``fetchmany`` and ``fetchall``, their iteration and psycopg's ``stream``. Everything else
  (attributes included) passes through to the wrapped object untouched.
* ``wrap_asyncpg``: a proxy around an asyncpg connection (or a pool's connection). Timed:
  ``execute``, ``executemany``, ``fetch``, ``fetchrow``, ``fetchval``, ``fetchmany``, the
  same of its prepared statements, and its cursors (awaiting one, iterating one, ``fetch``,
  ``fetchrow``, ``forward``).
* ``sqlalchemy_listeners``: SQLAlchemy's ``before_cursor_execute`` / ``after_cursor_execute``
  events (``handle_error`` for a statement that failed).

The hot path per call is two ``perf_counter`` readings, a context-variable read and one
addition to the meter's cells under their lock (``Meter._count``). A call that raises is
counted too: the request waited for it. Iterating a cursor adds each step to a local sum and
counts the sum at the end of the iteration (or once a second for a long one), in the context
the iteration began in.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import suppress
from time import perf_counter
from typing import TYPE_CHECKING, Any

from ._current import Attribution, current

if TYPE_CHECKING:
    from ._meter import Meter

FLUSH_EVERY = 1.0
"""Seconds of iteration summed before they are counted (a long server-side cursor)."""


class _Proxy:
    """Every attribute of the wrapped object, read and written through; subclasses time the
    calls that wait on the database."""

    __slots__ = ("_index", "_meter", "_target")

    _target: Any
    _meter: Meter
    _index: int

    def __init__(self, target: Any, meter: Meter, index: int) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_meter", meter)
        object.__setattr__(self, "_index", index)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_target"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._target, name)

    def __repr__(self) -> str:
        return f"<metered {self._target!r}>"

    # the context-manager protocols are looked up on the type: passed through explicitly,
    # returning the proxy (``with conn.cursor() as cur``: ``cur`` is timed too)

    def __enter__(self) -> Any:
        entered = self._target.__enter__()
        return self if entered is self._target else entered

    def __exit__(self, *exc: Any) -> Any:
        return self._target.__exit__(*exc)

    async def __aenter__(self) -> Any:
        entered = await self._target.__aenter__()
        return self if entered is self._target else entered

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._target.__aexit__(*exc)


def _timed(name: str) -> Callable[..., Any]:
    """A method that calls the target's ``name`` and counts its wall time; a result that is
    the target itself (``cursor.execute`` returns the cursor) is the proxy."""

    def method(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
        target = self._target
        start = perf_counter()
        try:
            result = getattr(target, name)(*args, **kwargs)
        finally:
            self._meter._count(self._index, perf_counter() - start, current.get())
        return self if result is target else result

    method.__name__ = method.__qualname__ = name
    return method


def _timed_cursor(name: str) -> Callable[..., Any]:
    """A connection method that returns a new cursor (``conn.execute``): timed, and the
    cursor wrapped so that its fetches are timed too."""

    def method(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
        start = perf_counter()
        try:
            result = getattr(self._target, name)(*args, **kwargs)
        finally:
            self._meter._count(self._index, perf_counter() - start, current.get())
        return _Cursor(result, self._meter, self._index)

    method.__name__ = method.__qualname__ = name
    return method


def _timed_async(name: str, wrap: type[_Proxy] | None = None) -> Callable[..., Any]:
    """An async method: the wall time of awaiting the target's ``name`` (the request's task
    waits for it; other requests' steps run meanwhile, and are theirs); ``wrap``: the kind of
    proxy its result gets, if any; a result that is the target itself is the proxy."""

    async def method(self: _Proxy, *args: Any, **kwargs: Any) -> Any:
        target = self._target
        start = perf_counter()
        try:
            result = await getattr(target, name)(*args, **kwargs)
        finally:
            self._meter._count(self._index, perf_counter() - start, current.get())
        if result is target:
            return self
        return result if wrap is None else wrap(result, self._meter, self._index)

    method.__name__ = method.__qualname__ = name
    return method


class _Iterating:
    """Time spent in the steps of an iteration, counted at its end (or at least once a
    second), to the context it began in."""

    __slots__ = ("_attribution", "_index", "_meter", "_spent", "_steps")

    def __init__(self, steps: Any, meter: Meter, index: int) -> None:
        self._steps = steps
        self._meter = meter
        self._index = index
        self._attribution: Attribution | None = current.get()
        self._spent = 0.0

    def _add(self, seconds: float) -> None:
        self._spent += seconds
        if self._spent >= FLUSH_EVERY:
            self._flush()

    def _flush(self) -> None:
        spent, self._spent = self._spent, 0.0
        if spent:
            self._meter._count(self._index, spent, self._attribution)

    def __del__(self) -> None:  # an iteration left before its end: its steps still count
        with suppress(Exception):  # at interpreter exit, the meter may be gone
            self._flush()


class _TimedIterator(_Iterating):
    """A cursor's iteration (rows a server-side cursor fetches as it goes, SQLite's rows
    computed as they are read), step by step."""

    __slots__ = ()

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        start = perf_counter()
        try:
            item = next(self._steps)
        except BaseException:  # StopIteration (the end) or an error: count what it took
            self._spent += perf_counter() - start
            self._flush()
            raise
        self._spent += perf_counter() - start
        if self._spent >= FLUSH_EVERY:
            self._flush()
        return item

    def close(self) -> None:
        self._flush()
        close = getattr(self._steps, "close", None)
        if close is not None:
            close()


class _TimedAsyncIterator(_Iterating):
    """An async cursor's iteration, step by step (the wall time of each ``__anext__``)."""

    __slots__ = ()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        start = perf_counter()
        try:
            item = await self._steps.__anext__()
        except BaseException:  # StopAsyncIteration (the end) or an error
            self._spent += perf_counter() - start
            self._flush()
            raise
        self._spent += perf_counter() - start
        if self._spent >= FLUSH_EVERY:
            self._flush()
        return item

    async def aclose(self) -> None:
        self._flush()
        close = getattr(self._steps, "aclose", None)
        if close is not None:
            await close()


# -- DB-API 2.0, sync ----------------------------------------------------------------------


class _Cursor(_Proxy):
    """A DB-API cursor (sqlite3, psycopg's client-side and server-side cursors...)."""

    __slots__ = ()

    execute = _timed("execute")
    executemany = _timed("executemany")
    executescript = _timed("executescript")  # sqlite3
    callproc = _timed("callproc")
    fetchone = _timed("fetchone")
    fetchmany = _timed("fetchmany")
    fetchall = _timed("fetchall")
    __next__ = _timed("__next__")  # sqlite3's cursor is its own iterator

    def __iter__(self) -> Iterator[Any]:
        return _TimedIterator(iter(self._target), self._meter, self._index)

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """psycopg's ``stream``: the query and its rows, as they arrive."""
        return _TimedIterator(self._target.stream(*args, **kwargs), self._meter, self._index)


class _Connection(_Proxy):
    """A DB-API connection: its cursors are wrapped, its shortcuts (``conn.execute``, which
    psycopg and sqlite3 have) timed and their cursors wrapped."""

    __slots__ = ()

    execute = _timed_cursor("execute")
    executemany = _timed_cursor("executemany")  # sqlite3
    executescript = _timed_cursor("executescript")  # sqlite3

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return _Cursor(self._target.cursor(*args, **kwargs), self._meter, self._index)


# -- psycopg's AsyncConnection (and drivers shaped like it) -----------------------------------


class _AsyncCursor(_Proxy):
    __slots__ = ()

    execute = _timed_async("execute")
    executemany = _timed_async("executemany")
    fetchone = _timed_async("fetchone")
    fetchmany = _timed_async("fetchmany")
    fetchall = _timed_async("fetchall")

    def __aiter__(self) -> AsyncIterator[Any]:
        return _TimedAsyncIterator(self._target.__aiter__(), self._meter, self._index)

    def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return _TimedAsyncIterator(self._target.stream(*args, **kwargs), self._meter,
                                   self._index)  # fmt: skip


class _AsyncConnection(_Proxy):
    __slots__ = ()

    execute = _timed_async("execute", _AsyncCursor)

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return _AsyncCursor(self._target.cursor(*args, **kwargs), self._meter, self._index)


def wrap_connection(connection: Any, meter: Meter, index: int) -> Any:
    """The proxy that fits ``connection``: async when its ``execute`` or ``commit`` is a
    coroutine function (psycopg's AsyncConnection), else DB-API's sync one."""
    if isinstance(connection, _Proxy):  # wrapped again: one proxy, counting once
        connection = connection._target
    commit = getattr(connection, "commit", None)
    execute = getattr(connection, "execute", None)
    if commit is None and hasattr(connection, "fetchval") and hasattr(connection, "prepare"):
        raise TypeError("this looks like an asyncpg connection: use meter.wrap_asyncpg(conn)")
    if not callable(getattr(connection, "cursor", None)):
        raise TypeError(f"not a DB-API connection (no cursor() method): "
                        f"{type(connection).__name__}")  # fmt: skip
    if inspect.iscoroutinefunction(commit) or inspect.iscoroutinefunction(execute):
        return _AsyncConnection(connection, meter, index)
    return _Connection(connection, meter, index)


# -- asyncpg -----------------------------------------------------------------------------------


class _AsyncpgCursor(_Proxy):
    """An open asyncpg cursor (``await conn.cursor(...)``)."""

    __slots__ = ()

    fetch = _timed_async("fetch")
    fetchrow = _timed_async("fetchrow")
    forward = _timed_async("forward")


class _AsyncpgCursorFactory(_Proxy):
    """``conn.cursor(...)``: iterated (``async for``: rows prefetched in chunks, each fetch
    timed) or awaited (the cursor opened, timed, then its fetches)."""

    __slots__ = ()

    def __aiter__(self) -> AsyncIterator[Any]:
        return _TimedAsyncIterator(self._target.__aiter__(), self._meter, self._index)

    def __await__(self) -> Any:
        return self._open().__await__()

    async def _open(self) -> Any:
        start = perf_counter()
        try:
            cursor = await self._target
        finally:
            self._meter._count(self._index, perf_counter() - start, current.get())
        return _AsyncpgCursor(cursor, self._meter, self._index)


class _AsyncpgStatement(_Proxy):
    """A prepared statement (``await conn.prepare(...)``)."""

    __slots__ = ()

    fetch = _timed_async("fetch")
    fetchrow = _timed_async("fetchrow")
    fetchval = _timed_async("fetchval")
    fetchmany = _timed_async("fetchmany")
    executemany = _timed_async("executemany")

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return _AsyncpgCursorFactory(self._target.cursor(*args, **kwargs), self._meter,
                                     self._index)  # fmt: skip


class _AsyncpgConnection(_Proxy):
    """An asyncpg connection, or a pool's connection proxy."""

    __slots__ = ()

    execute = _timed_async("execute")
    executemany = _timed_async("executemany")
    fetch = _timed_async("fetch")
    fetchrow = _timed_async("fetchrow")
    fetchval = _timed_async("fetchval")
    fetchmany = _timed_async("fetchmany")

    async def prepare(self, *args: Any, **kwargs: Any) -> Any:
        """Not timed (a round trip once per statement); its executions are."""
        statement = await self._target.prepare(*args, **kwargs)
        return _AsyncpgStatement(statement, self._meter, self._index)

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return _AsyncpgCursorFactory(self._target.cursor(*args, **kwargs), self._meter,
                                     self._index)  # fmt: skip


def wrap_asyncpg(connection: Any, meter: Meter, index: int) -> Any:
    if isinstance(connection, _Proxy):
        connection = connection._target
    if not (hasattr(connection, "fetchval") and hasattr(connection, "prepare")):
        raise TypeError(f"not an asyncpg connection (no fetchval() and prepare()): "
                        f"{type(connection).__name__}")  # fmt: skip
    return _AsyncpgConnection(connection, meter, index)


# -- SQLAlchemy ------------------------------------------------------------------------------


def sqlalchemy_listeners(meter: Meter, index: int) -> list[tuple[str, Callable[..., Any], bool]]:
    """``(event, listener, retval)`` of SQLAlchemy's engine events: the start of a cursor
    execution kept under the cursor's id (a cursor runs one statement at a time; a start
    left by a failure that reached no handler is overwritten by the cursor's next one), its
    end counted. ``retval``: the listener returns the statement and parameters itself, which
    spares SQLAlchemy's adapter around it (a call per statement)."""
    starts: dict[int, float] = {}
    count = meter._count

    def before(conn: Any, cursor: Any, statement: Any, parameters: Any, context: Any,
               executemany: bool) -> tuple[Any, Any]:  # fmt: skip
        starts[id(cursor)] = perf_counter()
        return statement, parameters

    def after(conn: Any, cursor: Any, statement: Any, parameters: Any, context: Any,
              executemany: bool) -> None:  # fmt: skip
        start = starts.pop(id(cursor), None)
        if start is not None:
            count(index, perf_counter() - start, current.get())

    def failed(error: Any) -> None:
        end = perf_counter()
        # the cursor: the error context's, else its execution context's (SQLAlchemy 2.1
        # declares ExceptionContext.cursor without setting it); a listener never raises
        cursor = getattr(error, "cursor", None)
        if cursor is None:
            cursor = getattr(getattr(error, "execution_context", None), "cursor", None)
        start = None if cursor is None else starts.pop(id(cursor), None)
        if start is not None:
            count(index, end - start, current.get())

    return [("before_cursor_execute", before, True), ("after_cursor_execute", after, False),
            ("handle_error", failed, False)]  # fmt: skip
