"""What a fresh worker prepares before it answers its first request.

Why: the first read a worker answered paid for what every later one reuses: the store's
client ids compiled for redaction (about a second for 10,000 clients: every account
manager's statement, page and sheet needs it) and the sheet templates. A worker does it in
its startup, before uvicorn gives it a request, so the first read of a month costs what the
others do. The month's pack is not loaded here: issued sheets are read from the store
(:mod:`tenantcost.service.prerender`). A store that cannot be read yet (empty, unreachable)
only makes this a no-op: the requests then answer as they would have.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine

log = logging.getLogger("tenantcost.warm")


def warm_up(engine: Engine) -> None:
    """Compile the store's redaction and load the sheet templates (errors are logged)."""
    try:
        from tenantcost.service.redaction import store_redaction
        from tenantcost.service.sheets import _environment, render_version

        store_redaction(engine)
        for kind in ("html", "md"):
            _environment(kind).get_template(f"client_sheet.{kind}")
        render_version()
    except Exception:  # the first request will do it (or answer the error) instead
        log.exception("warming the worker up failed")


__all__ = ["warm_up"]
