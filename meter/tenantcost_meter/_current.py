"""Whose work runs now: the client (and service) of the request or ``record()`` block in whose
context the code runs, for what is counted during it (database time, ``add``, ``measure``).

One context variable, set by every place that knows the client: the ASGI middleware (the
request's CPU accumulator, ``_cpu.Accumulator``, is an ``Attribution``), the WSGI middleware
from the call to the close of the body, and ``record()`` blocks. asyncio copies the context
into the tasks a request creates and anyio into its worker threads, so a query run by a
child task or a sync endpoint is its request's; interleaved requests on one event loop each
see their own. Outside all of them the variable is None: the empty client.

Kept apart from ``_cpu`` (which imports asyncio) so that WSGI applications and
``import tenantcost_meter`` do not pay for asyncio.
"""

from __future__ import annotations

import contextvars
from typing import Any


class Attribution:
    """The client and service that what is counted now belongs to; ``owner`` is the meter
    that set it (another meter counts to the same client under its own service)."""

    __slots__ = ("client", "owner", "service")

    children = False  # class default; the ASGI accumulator has its own (see _cpu)

    def __init__(self, service: str, client: str, owner: Any = None) -> None:
        self.service = service
        self.client = client
        self.owner = owner


current: contextvars.ContextVar[Attribution | None] = contextvars.ContextVar(
    "tenantcost_meter_request", default=None
)
