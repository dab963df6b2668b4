"""Which client a request belongs to: a header or a callable, checked by the store's rule.

Refusing to count is never an option: a request without a tenant, or with an id the store
would refuse, is counted with the empty client (usage without a client, reported as
unattributed). A refused id is logged on the ``tenantcost_meter`` logger, at most once a
minute (a hostile client could send millions), naming what is wrong by code point and never
echoing the value: it may hold control characters, and it may be another client's name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Optional

from ._client_id import client_id_problem


def logger() -> Any:
    """The ``tenantcost_meter`` logger; ``logging`` is imported the first time something is
    logged, not by ``import tenantcost_meter`` (it is a third of the import time)."""
    import logging

    return logging.getLogger("tenantcost_meter")


TenantFunc = Callable[[Any], Optional[str]]
"""``(scope or environ) -> str | None``: the tenant of a request, chosen by the application."""

LOG_EVERY = 60.0
"""Seconds between two log lines about refused tenant ids."""
REFUSED_ID = "tenant id refused: %s; counted without a client%s"


class RefusalLog:
    """Rate-limited warnings about refused tenant ids (one line a minute, with a count);
    ``message`` (``%s``: the problem, then the count of those not logged) for other input."""

    def __init__(self, every: float = LOG_EVERY, message: str = REFUSED_ID) -> None:
        self.every = every
        self.message = message
        self._lock = threading.Lock()
        self._next = 0.0
        self._suppressed = 0

    def refused(self, problem: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                self._suppressed += 1
                return
            suppressed, self._suppressed = self._suppressed, 0
            self._next = now + self.every
        more = f" ({suppressed} more since the last message)" if suppressed else ""
        logger().warning(self.message, problem, more)


def checked(value: object, log: RefusalLog) -> str:
    """``value`` if the store accepts it as a client id, else the empty client (logged)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        log.refused(f"the tenant function returned {type(value).__name__}, not str")
        return ""
    problem = client_id_problem(value)
    if problem is None:
        return value
    log.refused(problem)
    return ""


CACHE_SIZE = 4096
"""Header values remembered with their client id: most requests come from a few tenants, and
a hit skips the decoding and the rule. Emptied when full, so hostile values bound it."""
_seen: dict[bytes, str] = {}


def from_header_bytes(raw: bytes | None, log: RefusalLog) -> str:
    """An ASGI header value (bytes) as a client id: strict UTF-8, then the store's rule."""
    if raw is None:
        return ""
    client = _seen.get(raw)
    if client is not None:
        return client
    client = _decoded(raw, log)
    if client or not raw:  # a refused value is checked (and logged) again next time
        if len(_seen) >= CACHE_SIZE:
            _seen.clear()
        _seen[raw] = client
    return client


def _decoded(raw: bytes, log: RefusalLog) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        log.refused(f"client id is not valid UTF-8 (byte {error.start + 1})")
        return ""
    return checked(text, log)


REPEATED = ", "
"""What a WSGI server such as waitress puts between the values of a header sent several
times, in the one environ entry it makes of them (wsgiref, werkzeug's development server and
gunicorn put a bare "," there, which this does not split: a comma alone may be part of an id)."""


def from_environ_text(raw: str | None, log: RefusalLog) -> str:
    """A WSGI header value (PEP 3333: bytes decoded as latin-1) as a client id: the part
    before the first ", " (a header sent several times arrives joined: the first counts, as
    on ASGI; a client id holding ", " needs a tenant function), then its bytes again, then
    as an ASGI value (one cache for both)."""
    if raw is None:
        return ""
    raw = raw.split(REPEATED, 1)[0]
    try:
        data = raw.encode("latin-1")
    except UnicodeEncodeError:  # a server that decoded differently: take its text as it is
        return checked(raw, log)
    return from_header_bytes(data, log)


def from_callable(func: TenantFunc, request: Any, log: RefusalLog) -> str:
    """The application's tenant function; an exception in it counts the request without a
    client rather than failing the request."""
    try:
        value = func(request)
    except Exception as error:  # the app's code: never let the meter fail a request
        log.refused(f"the tenant function raised {type(error).__name__}")
        return ""
    return checked(value, log)
