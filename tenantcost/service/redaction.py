"""Other clients' names out of the free text the service shows a client's reader.

The rule is :mod:`tenantcost.report.privacy`'s, the one every surface uses; here it runs over
every client the store knows (:func:`tenantcost.store.clients.known_clients`) and every
catalog name (:func:`tenantcost.store.catalog.all_names`: a reason may name another client as
"Bolt Imports" as well as by its id), compiled once per change of either and shared by every
request and reader: a request costs two queries of counts
(:func:`~tenantcost.store.clients.clients_version`, the latest catalog load) and a lookup of
spans already scanned. Compiling 10,000 ids takes about a second, once after each run or close.
"""

from __future__ import annotations

import threading

from sqlalchemy import Engine

from tenantcost.report.privacy import Redaction
from tenantcost.store.catalog import all_names, catalog_version
from tenantcost.store.clients import clients_version, known_clients

_lock = threading.Lock()
_compiled: dict[str, tuple[tuple[int, int, int], Redaction]] = {}


def store_redaction(engine: Engine) -> Redaction:
    """The store's ids and catalog names compiled (again only when a run, a close or a
    catalog load was recorded since)."""
    key = engine.url.render_as_string(hide_password=False)
    version = (*clients_version(engine), catalog_version(engine))
    with _lock:  # one compile per change, whichever request comes first
        found = _compiled.get(key)
        if found is None or found[0] != version:
            found = (version, Redaction(known_clients(engine), all_names(engine)))
            _compiled[key] = found
        return found[1]


__all__ = ["store_redaction"]
