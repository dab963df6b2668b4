"""The "Usage" section of the finance month page: the month's usage totals per service and
client, as ``tenantcost status --usage`` gives them (:mod:`tenantcost.store.usage_totals`).

Why on the month page: it is where finance checks a month before closing it, and the usage
is the other half of the join (a client with costs but no requests, or requests under the
empty client, shows up here first). The page is cluster-wide (``Action.VIEW_CLUSTER``: admin
and finance, the roles that see every client), so it may list every client's usage; account
managers get 403 for the whole page and see no other client's figure.

Bounded: one page of at most :data:`USAGE_ROWS_PER_PAGE` (service, client) rows, the query
doing the paging (``LIMIT``/``OFFSET`` in DuckDB), with previous/next links like the page's
clients table (its own ``usage_page`` parameter, so both tables page independently).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from tenantcost.service.memo import remembered
from tenantcost.store.data import Store
from tenantcost.store.usage_totals import (
    shown_client,
    shown_column,
    usage_totals,
    usage_version,
)

USAGE_ROWS_PER_PAGE = 100


@dataclass(frozen=True)
class UsageRow:
    service: str
    client: str
    values: list[str]


@dataclass(frozen=True)
class UsageView:
    metrics: list[str]
    rows: list[UsageRow]
    summary: str
    prev_href: str | None
    next_href: str | None


def usage_view(store: Store | None, month: str, page: int, clients_page: int) -> UsageView | None:
    """One page of the month's usage totals; ``None`` when the service has no data
    directory (it has no stored usage to read)."""
    if store is None:
        return None
    per_page = USAGE_ROWS_PER_PAGE
    offset = (page - 1) * per_page
    totals = remembered(
        store.engine,
        "usage_totals",
        (month, per_page, offset),
        lambda: usage_totals(store, month, limit=per_page, offset=offset),
        lambda: usage_version(store.engine, month),
    )  # this month's batches
    columns = [shown_column(totals.rows[m], thousands=True) for m in totals.metrics]
    rows = [
        UsageRow(str(service), shown_client(str(client)), [column[i] for column in columns])
        for i, (service, client) in enumerate(
            zip(totals.rows["service"], totals.rows["client"], strict=True)
        )
    ]  # one page (at most 100 rows): display only, the query did the work
    pages = max(1, -(-totals.count // per_page))
    first = (page - 1) * per_page + 1
    shown = f", showing {first:,} to {first + len(rows) - 1:,}" if rows else ""

    def href(n: int) -> str:
        query = ({"page": clients_page} if clients_page > 1 else {}) | {"usage_page": n}
        return f"/months/{month}?{urlencode(query)}#usage-h"

    return UsageView(
        totals.metrics,
        rows,
        f"{totals.count:,} (service, client) totals{shown}",
        href(page - 1) if page > 1 else None,
        href(page + 1) if page < pages else None,
    )


__all__ = ["USAGE_ROWS_PER_PAGE", "UsageRow", "UsageView", "usage_view"]
