"""A client's bridge against the previous month, as the API and the client page show it.

The figures are :mod:`tenantcost.store.month_bridge`'s (``explain``'s parts, computed from the
stored runs against the previous month's latest issued revision). Both surfaces name the
revision compared with, since a restated previous month changes the bridge.

* ``GET /api/v1/clients/{id}/months/{M}`` gains ``bridge``: ``previous_month``,
  ``previous_revision``, ``previous_amount``, ``difference`` (this month's amount minus the
  previous one: the statement's own ``difference`` stays revision against revision) and
  ``parts``, one per effect and source (``part`` in ``explain``'s vocabulary), exact
  micro-units that add up to ``difference``; ``null`` without a previous month.
* The client page's "What changed" block (:mod:`tenantcost.service.what_changed`) reads the
  same parts, rounded as the sheet rounds them.

Source names reach a client-scoped reader through the store's redaction (other clients' ids
out of them), like every other free text (:func:`tenantcost.service.figures.reader_text`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Engine

from tenantcost.report.changes import PackBridges
from tenantcost.service.figures import reader_text
from tenantcost.service.permissions import Principal
from tenantcost.store.data import DataDir
from tenantcost.store.month_bridge import ClientBridge, client_bridge


def bridge_document(
    engine: Engine,
    principal: Principal,
    client: str,
    month: str,
    run_id: str,
    data: DataDir | None = None,
) -> dict[str, Any] | None:
    """The API's ``bridge`` object of ``client`` for the run shown (``None``: no previous
    month, or the client has no figure in it). Parts of one effect and source over several
    keys are summed (the key is not in the contract), zero parts left out."""
    found = client_bridge(engine, month, run_id, client, data)
    if found is None:
        return None
    redact = reader_text(engine, principal, client)
    parts = found.parts.groupby(["effect", "source"], sort=False, as_index=False)["amount"].sum()
    parts = parts.loc[parts["amount"] != 0]
    return {
        "previous_month": found.previous.month,
        "previous_revision": found.previous.revision,
        "previous_amount": found.previous_amount,
        "difference": found.difference,
        "parts": [
            {"part": str(e), "source": redact(str(s)), "amount": int(a)}
            for e, s, a in zip(parts["effect"], parts["source"], parts["amount"], strict=True)
        ],  # one client's parts: a handful
    }


def one_client_bridges(found: ClientBridge, client: str, month: str, currency: str) -> PackBridges:
    """The client's stored bridge in the report's form, for its display rounding
    (:func:`tenantcost.report.changes.shown_bridge`)."""
    amounts = pd.DataFrame(
        {"early": [found.previous_amount], "late": [found.amount],
         "change": [found.difference]}, index=[client],
    )  # fmt: skip
    parts = found.parts.assign(client=client)
    return PackBridges(found.previous.month, month, currency, amounts, parts,
                       {client: (0, len(parts))}, found.previous.revision)  # fmt: skip


def cache_in_background(engine: Engine, month: str, data: DataDir | None) -> None:
    """After a close through the service: cache the bridges its sheets will show
    (:func:`tenantcost.store.month_bridge.cache_after_close`) in a thread, so the close
    answers at once; a reader meanwhile gets its own client's bridge computed alone."""
    import logging
    import threading

    from tenantcost.store.month_bridge import cache_after_close

    def work() -> None:
        try:
            cache_after_close(engine, month, data)
        except Exception:  # a cache: the next reader computes it; never lose the error
            logging.getLogger("tenantcost.service").exception("caching the bridges failed")

    threading.Thread(target=work, name=f"bridges-{month}", daemon=True).start()


__all__ = ["bridge_document", "cache_in_background", "one_client_bridges"]
