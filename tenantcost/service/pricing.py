"""The pricing page, ``/pricing?month=M&by=plan|segment``, and its JSON twin.

Product teams price plans on what clients cost. The figures are exactly those of
``tenantcost unit-economics --from-db --format json`` (:mod:`tenantcost.economics`, the
document of :func:`tenantcost.writers.economics.document`), computed from the run the viewer
sees for the month (:func:`tenantcost.service.figures.month_source`): product reads the
latest *issued* revision only; finance and admin read an open month's latest run, marked
draft. Nothing is allocated again: the run is read back as recorded, with the rules it ran
with and the store's client catalog; the requests (for the price floor per 1,000 requests)
come from the month's stored usage.

A month still in progress at ``as_of`` (default now) also gets the projection to its end at
the current run rate; the page labels it an **estimate**, never an issued figure.

Who may open it is the permission module's (:attr:`~tenantcost.service.permissions.Action.
VIEW_PRICING`: product, finance, admin). The page names clients side by side, so account
managers never see it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pandas as pd
from sqlalchemy import Engine

from tenantcost.economics import GroupBy
from tenantcost.report.display import format_amount
from tenantcost.service.figures import MonthSource, month_source
from tenantcost.service.permissions import Principal
from tenantcost.store.data import Store

CLIENTS_PER_PAGE = 50
"""The pricing page's client table is paged (a month may have 10,000 clients)."""


@dataclass(frozen=True)
class PricedMonth:
    """A month's unit economics as one viewer sees them."""

    source: MonthSource
    doc: dict[str, Any]


def priced_month(
    engine: Engine,
    store: Store | None,
    principal: Principal,
    month: str,
    by: GroupBy,
    as_of: pd.Timestamp,
) -> PricedMonth | None:
    """The ``unit-economics --format json`` document of the run ``principal`` sees for
    ``month`` (None: no such run). No catalog in the store, or an ``as_of`` before the month
    starts, is an :class:`~tenantcost.errors.InputError` (one line, said as the CLI says it)."""
    from tenantcost.economics import REQUESTS, compute, month_costs, policy_for, project
    from tenantcost.split import connect
    from tenantcost.store.catalog import stored_catalog
    from tenantcost.store.report_figures import load_run_figures
    from tenantcost.store.stored import stored_usage
    from tenantcost.usage_source import client_sums
    from tenantcost.windows import Period
    from tenantcost.writers.economics import document

    source = month_source(engine, principal, month)
    if source is None:
        return None
    catalog = stored_catalog(engine)
    with engine.connect() as connection:
        stored = load_run_figures(connection, source.run_id)
    period = Period.month(month)
    requests = None
    if store is not None:
        con = connect()
        requests = client_sums(stored_usage(store, period, con), period, con, REQUESTS)
    policy = policy_for(stored.ruleset.pricing, by)
    economics = compute(month_costs(stored.result, period, requests), catalog.frame, policy)
    economics.projection = project(economics, as_of)
    return PricedMonth(source, document(economics))


def as_of_time(text: str | None) -> pd.Timestamp:
    """``as_of`` (ISO 8601; naive is UTC), default now: as ``unit-economics --as-of``."""
    from tenantcost.errors import InputError
    from tenantcost.windows import parse_utc

    if text is None or not text.strip():
        return pd.Timestamp.now(tz="UTC")
    at = parse_utc(text.strip(), "as_of")
    if pd.isna(at):
        raise InputError(f"as_of: not an ISO 8601 time: '{text}'")
    return pd.Timestamp(at)


def page_context(priced: PricedMonth, months: list[str], page: int, as_of: str) -> dict[str, Any]:
    """What ``service/pricing.html`` shows: the document, the charts, one page of clients
    (lowest margin first: the clients a price must move), the month and grouping choices."""
    from tenantcost.service.urls import client_href
    from tenantcost.writers.pricing_charts import cost_chart, margin_chart

    doc = priced.doc
    by = str(doc["by"])
    groups = doc[f"{by}s"]
    places = _places(doc, groups)
    clients = sorted(
        doc["clients"],
        key=lambda c: (c["margin_pct"] is None, c["margin_pct"] or 0.0, c["client"]),
    )  # one sort of the document's clients, in C
    pages = max(1, math.ceil(len(clients) / CLIENTS_PER_PAGE))
    page = min(page, pages)
    shown = [
        c | {"href": client_href(str(c["client"]), str(doc["month"]))}
        for c in clients[(page - 1) * CLIENTS_PER_PAGE : page * CLIENTS_PER_PAGE]
    ]  # one page (50): the link to each client's page

    def href(**change: Any) -> str:
        query = {"month": doc["month"], "by": by} | ({"as_of": as_of} if as_of else {})
        return "/pricing?" + urlencode(query | change)

    return {
        "doc": doc,
        "by": by,
        "groups": groups,
        "source": priced.source,
        "places": places,
        "money": lambda micros: "–" if micros is None else format_amount(int(micros), places),
        "pct": _pct,
        "cost_svg": cost_chart(groups, by, str(doc["currency"])),
        "margin_svg": margin_chart(groups, by, doc["pricing"]["margin_floor"]),
        "clients": shown,
        "page": page,
        "pages": pages,
        "prev_href": href(page=page - 1) if page > 1 else None,
        "next_href": href(page=page + 1) if page < pages else None,
        "months": months,
        "by_choices": [str(g) for g in GroupBy],
        "under_floor": [c for c in doc["clients"] if c["under_margin_floor"]],
        "no_group": "(none)",
    }


def _places(doc: dict[str, Any], groups: list[dict[str, Any]]) -> int:
    """Decimals for the whole page (never per line): the currency's, raised until a mean
    cost per client and a price floor show two digits (:func:`~tenantcost.report.display.
    auto_places`, as the sheets do), so a small month's figures do not all read 0.00."""
    from tenantcost.report.display import auto_places

    amounts = [doc["totals"]["all_in_cost"]]
    for g in groups:  # a handful of groups
        floor = g["price_floor"]
        amounts += [g["cost_per_client"]["mean"], g["all_in_cost_per_client"]["mean"],
                    floor["per_client"], floor["per_1000_requests"] or 0]  # fmt: skip
    return auto_places(str(doc["currency"]), amounts)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"
