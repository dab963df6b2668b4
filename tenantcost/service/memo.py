"""Summaries of the store kept per worker until the store changes.

Why: the pages and ``GET /api/v1/months`` summarise the store (coverage per month, a run's
cascade and key tables, the month's usage totals from Parquet), which took tens to hundreds
of milliseconds of pandas and DuckDB per request, and 8 readers at a time on 2 cores turned
that into p95s of half a second. The store changes a few times a day, so each summary is
computed once per store generation (:func:`tenantcost.store.generation.store_generation`,
one query of counters) and kept in a small LRU; any write that could change it (a batch, a
withdrawal, a run, a close or reopen, a catalog) starts a new generation. Values are shared
between requests: callers must not mutate them.

One computation per key at a time: 8 readers arriving together on a cold summary (the
pricing document takes about 2 s at 10,000 clients) each computed it, sharing 2 cores, so
each waited 8 times as long (p95 7.5 s). The first computes; the others wait on that key's
lock and take its value (a failure is not kept: the next reader tries again).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqlalchemy import Engine

from tenantcost.store.generation import store_generation

T = TypeVar("T")
KEPT = 128
_lock = threading.Lock()
_kept: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_flights: dict[tuple[Any, ...], threading.Lock] = {}
"""The lock of each key being computed (removed once no reader holds it)."""


def remembered(
    engine: Engine,
    name: str,
    args: tuple[Hashable, ...],
    compute: Callable[[], T],
    version: Callable[[], Hashable] | None = None,
) -> T:
    """``compute()``, or what it gave for the same ``name`` and ``args`` in this store
    generation (requests arriving together wait for one computation; a computation must not
    ask for its own key). ``version``: what the value depends on, when that is narrower than
    the whole store's generation (one query too), so writes elsewhere in the store keep it
    (a closed month's usage totals are kept while the open month's usage streams in)."""
    stamp = version() if version is not None else store_generation(engine)
    key = (id(engine), name, args, stamp)
    found, value = _lookup(key)
    if found:
        return value
    with _lock:
        flight = _flights.setdefault(key, threading.Lock())
    try:
        with flight:  # one computation per key; the others wait for it
            found, value = _lookup(key)
            if found:
                return value
            value = compute()
            with _lock:
                _kept[key] = value
                while len(_kept) > KEPT:
                    _kept.popitem(last=False)
            return value
    finally:
        with _lock:
            if _flights.get(key) is flight and not flight.locked():
                del _flights[key]


def _lookup(key: tuple[Any, ...]) -> tuple[bool, Any]:
    with _lock:
        if key in _kept:
            _kept.move_to_end(key)
            return True, _kept[key]
    return False, None


def month_status(engine: Engine, month: str | None = None) -> list[dict[str, Any]]:
    """:func:`tenantcost.store.status.month_status`, kept per generation (a copy: callers
    may change it)."""
    import copy

    from tenantcost.store.status import month_status as compute

    kept = remembered(engine, "month_status", (month,), lambda: compute(engine, month))
    return copy.deepcopy(kept)


__all__ = ["month_status", "remembered"]
