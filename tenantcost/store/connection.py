"""One helper every store reader shares: take a connection or an engine alike.

A query function that takes ``bind`` runs inside the caller's transaction when given a
connection (a writer's :func:`~tenantcost.store.lock.write_transaction`, so what it reads is
what the writer will commit against) and opens its own short-lived connection when given an
engine (a command that only reads). It lives here, below every store module, so the modules
that read the month's state, its statements, budgets or sheets need not import each other for
it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine


@contextmanager
def connected(bind: Connection | Engine) -> Iterator[Connection]:
    """A connection: ``bind`` itself, or a new one of an engine (closed afterwards)."""
    if isinstance(bind, Connection):
        yield bind
        return
    with bind.connect() as connection:
        yield connection


__all__ = ["connected"]
