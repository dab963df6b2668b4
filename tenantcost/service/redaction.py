"""Other clients' names out of the free text the service shows a client's reader.

The rule is :mod:`tenantcost.report.privacy`'s, the one every surface uses; here it runs over
every client the store knows (:func:`tenantcost.store.clients.known_clients`), compiled once
per change of that set and shared by every request and reader: a request costs one query of
counts (:func:`~tenantcost.store.clients.clients_version`) and a lookup of spans already
scanned. Compiling 10,000 ids takes about a second, once after each run or close.
"""

from __future__ import annotations

import threading

from sqlalchemy import Engine

from tenantcost.report.privacy import Redaction
from tenantcost.store.clients import clients_version, known_clients

_lock = threading.Lock()
_compiled: dict[str, tuple[tuple[int, int], Redaction]] = {}


def store_redaction(engine: Engine) -> Redaction:
    """The store's ids compiled (again only when a run or a close was recorded since)."""
    key = engine.url.render_as_string(hide_password=False)
    version = clients_version(engine)
    with _lock:  # one compile per change, whichever request comes first
        found = _compiled.get(key)
        if found is None or found[0] != version:
            found = (version, Redaction(known_clients(engine)))
            _compiled[key] = found
        return found[1]


__all__ = ["store_redaction"]
