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

**Basis.** A month's revenue is the whole month's; its cost is only what the cost data covers.
On an open month, or a closed one whose cost data covers less than the month, comparing the
two would show a margin no month will have. So there the headline, the plan margins, the price
floors and the client list use the month's cost projected at the current run rate
(:func:`tenantcost.economics.projected_costs`, the watch's formula), marked "projected": the
document's ``basis`` is ``projected`` and ``coverage`` the fraction of the month's hours the
cost data covers; a complete closed month has ``basis: month``.

**One figure.** Wherever a client's own amount for the month is shown (the client list's cost
on a ``month`` basis) it is the run's displayed string (:mod:`tenantcost.store.shown`), the
one every other page and the sheet show, at the decimals the revision's close froze; the
page's own column decimals are for the aggregates.

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

from tenantcost.economics import Basis, GroupBy
from tenantcost.report.display import format_amount, format_units
from tenantcost.service.figures import MonthSource, month_source
from tenantcost.service.permissions import Principal
from tenantcost.store.data import Store
from tenantcost.store.shown import RunShown, run_shown

CLIENTS_PER_PAGE = 50
"""The pricing page's client table is paged (a month may have 10,000 clients)."""


@dataclass(frozen=True)
class PricedMonth:
    """A month's unit economics as one viewer sees them."""

    source: MonthSource
    doc: dict[str, Any]
    shown: RunShown
    """The run's displayed figures: a client's amount as every page shows it."""


def priced_month(
    engine: Engine,
    store: Store | None,
    principal: Principal,
    month: str,
    by: GroupBy,
    as_of: pd.Timestamp,
    currency: str | None = None,
) -> PricedMonth | None:
    """The ``unit-economics --format json`` document of the run ``principal`` sees for
    ``month`` (None: no such run). No catalog in the store, or an ``as_of`` before the month
    starts, is an :class:`~tenantcost.errors.InputError` (one line, said as the CLI says it).
    ``currency``: price in it (default the stored ``presentation:``) when the run converted
    into it (:func:`tenantcost.store.run_fx.converted_month_costs`), else in the ledger's."""
    from tenantcost.service.currency_view import stored_presentation
    from tenantcost.service.memo import remembered
    from tenantcost.windows import Period

    source = month_source(engine, principal, month)
    if source is None:
        return None
    shown_in = currency or stored_presentation(engine)
    period = Period.month(month)
    if as_of < period.start:  # refused with project's one line; nothing kept
        doc = _document(engine, store, source, by, as_of, shown_in)
    else:
        during = bool(as_of < period.end)
        key = (source.run_id, str(by), during, store is not None, shown_in)  # no store: no requests
        doc = remembered(engine, "priced_month", key,
                         lambda: _document(engine, store, source, by, as_of, shown_in))  # fmt: skip
        if during and doc["projection"] is not None:  # the kept projection, as of now
            from tenantcost.timefmt import iso_z

            doc = doc | {"projection": doc["projection"] | {"as_of": iso_z(as_of)}}
    return PricedMonth(source, doc, run_shown(engine, source.run_id))


def _document(
    engine: Engine,
    store: Store | None,
    source: MonthSource,
    by: GroupBy,
    as_of: pd.Timestamp,
    currency: str | None = None,
) -> dict[str, Any]:
    """The unit-economics document of ``source``'s run: a second or more of pandas at 10,000
    clients, so :func:`priced_month` keeps it per store generation (a batch, a run, a close or
    a catalog starts a new one). A month in progress's projection depends on ``as_of`` only
    through whether it falls inside the month (its figures scale by the hours the cost data
    covers), so one document serves every ``as_of`` inside the month, its ``as_of`` replaced."""
    from tenantcost.economics import (
        REQUESTS,
        compute,
        coverage,
        month_costs,
        policy_for,
        project,
        projected_costs,
    )
    from tenantcost.presentation import revenue_rates
    from tenantcost.split import connect
    from tenantcost.store.catalog import stored_catalog
    from tenantcost.store.report_figures import load_run_figures
    from tenantcost.store.run_fx import converted_month_costs, run_conversions, store_rates
    from tenantcost.store.stored import stored_usage
    from tenantcost.usage_source import client_sums
    from tenantcost.windows import Period
    from tenantcost.writers.economics import document

    catalog = stored_catalog(engine)
    with engine.connect() as connection:
        stored = load_run_figures(connection, source.run_id)
        rates = store_rates(connection, stored.ruleset)
    period = Period.month(source.month)
    requests = None
    if store is not None:
        con = connect()
        requests = client_sums(stored_usage(store, period, con), period, con, REQUESTS)
    policy = policy_for(stored.ruleset.pricing, by)
    costs = month_costs(stored.result, period, requests)
    fx = None
    if currency and currency != costs.currency:  # as the run converted it, if it did
        with engine.connect() as connection:
            converted = converted_month_costs(connection, source.run_id, currency, costs)
            if converted is not None:
                costs = converted
                fx = run_conversions(connection, source.run_id)[currency].document
    covered = coverage(costs)
    basis = Basis.MONTH if source.state == "closed" and covered >= 1 else Basis.PROJECTED
    revenue = revenue_rates(  # a client's own currency, at the month's rate
        catalog.frame, stored.ruleset, costs.currency, period, (rates.table, rates.source)
    )
    economics = compute(costs, revenue, policy)
    projection = project(economics, as_of)
    if basis is Basis.PROJECTED:  # never a partial cost against a full month's revenue
        economics = compute(projected_costs(costs), revenue, policy)
    economics.projection = projection
    extra = {"fx": fx} if fx is not None else {}  # the CLI's document otherwise, as ever
    return document(economics) | {"basis": basis.value, "coverage": covered} | extra


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
    projected = doc["basis"] == Basis.PROJECTED
    own_strings = not projected and doc.get("fx") is None  # the run's ledger strings

    def cost_text(client: str, cost: int) -> str:  # the one displayed string, on a month basis
        units = priced.shown.amount(client) if own_strings else None
        if units is None:
            return format_amount(int(cost), places)
        return format_units(units, priced.shown.places)

    shown = [
        c
        | {
            "href": client_href(str(c["client"]), str(doc["month"])),
            "cost_text": cost_text(str(c["client"]), int(c["cost"])),
        }
        for c in clients[(page - 1) * CLIENTS_PER_PAGE : page * CLIENTS_PER_PAGE]
    ]  # fmt: skip  (one page (50): the link to each client's page, its displayed cost)

    group_texts = _group_cost_texts(doc, by, priced.shown if own_strings else None, places)
    groups_shown = [
        g | {"cost_text": group_texts.get(g[by], format_amount(int(g["cost"]), places))}
        for g in groups
    ]  # fmt: skip  (a handful of plans or segments)

    def href(**change: Any) -> str:
        query = {"month": doc["month"], "by": by} | ({"as_of": as_of} if as_of else {})
        query |= {"currency": doc["currency"]} if doc.get("fx") else {}
        return "/pricing?" + urlencode(query | change)

    return {
        "doc": doc,
        "by": by,
        "groups": groups_shown,
        "cost_total_text": group_texts.get(_ALL, format_amount(int(doc["totals"]["cost"]), places)),
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
        "projected": projected,
        "coverage": _pct(doc["coverage"]),
        "fx": doc.get("fx"),
        "fx_note": _fx_note(doc.get("fx")),
    }


def _fx_note(fx: dict[str, Any] | None) -> str:
    """How a priced month was converted: the policy, the rates' span and their source."""
    if fx is None:
        return ""
    from tenantcost.report.exchange_view import POLICY_TEXT, rate_span

    policy = POLICY_TEXT.get(str(fx["policy"]), str(fx["policy"])).split(":")[0]
    return f"{policy} rates, {rate_span(fx)}; rates from {fx['source']}"


_ALL = ("all",)
"""The key of the whole month's displayed cost in :func:`_group_cost_texts` (no group's)."""


def _group_cost_texts(
    doc: dict[str, Any], by: str, shown: RunShown | None, places: int
) -> dict[Any, str]:
    """Each group's displayed cost, the sum of its clients' displayed figures (the strings the
    close froze), so a plan of client-a alone reads as client-a does (0.1234, never the
    0.1235 of its own rounding); :data:`_ALL`: the month's. Empty on a projected basis (no
    client's figure is shown there) or when a client of the document has no displayed figure.
    One reindex and one group-by over the document's clients (10,000: milliseconds)."""
    if shown is None or not doc["clients"]:
        return {}
    clients = pd.DataFrame(doc["clients"], columns=["client", by, "cost"])
    units = pd.Series(shown.rule, dtype="int64").reindex(clients["client"].astype(str))
    units = units.where(units.notna() | (clients["cost"].to_numpy() != 0), 0)  # none: 0
    if units.isna().any():  # a client with a cost but no displayed figure: not this run's
        return {}
    clients["units"] = units.to_numpy()
    sums = clients.groupby(by, dropna=False, sort=False)["units"].sum()
    texts: dict[Any, str] = {
        (None if pd.isna(k) else k): format_units(int(v), shown.places) for k, v in sums.items()
    }  # a handful of groups
    texts[_ALL] = format_units(int(clients["units"].sum()), shown.places)
    return texts


def _places(doc: dict[str, Any], groups: list[dict[str, Any]]) -> int:
    """Decimals for the whole page (never per line): the currency's, raised until a mean
    cost per client and a price floor show two digits (:func:`~tenantcost.report.display.
    auto_places`, as the sheets do), so a small month's figures do not all read 0.00. A plan
    of the catalog with no client with a figure in the month has no mean nor floor (None),
    and adds nothing."""
    from tenantcost.report.display import auto_places

    amounts = [doc["totals"]["all_in_cost"]]
    for g in groups:  # a handful of groups
        floor = g["price_floor"]
        amounts += [g["cost_per_client"]["mean"], g["all_in_cost_per_client"]["mean"],
                    floor["per_client"], floor["per_1000_requests"]]  # fmt: skip
    return auto_places(str(doc["currency"]), [int(a) for a in amounts if a is not None])


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"
