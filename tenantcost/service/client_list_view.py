"""The ``/clients`` page's view model: the client list of a month as people read it.

The rows and their order come from :mod:`tenantcost.service.client_list` (the API's own
query), so the page, its JSON twin and its CSV never disagree. This module only words them:
each amount as the run's pages and sheets show it (:func:`tenantcost.store.shown.run_shown`,
the run's one rounding), the change with its sign and fraction in words (a rise and a fall
differ by text, ``+`` and ``−``, not by colour alone), column headers as sort links (the page
runs no JavaScript: a header is a link to the same list sorted by it, ``aria-sort`` on the
sorted one), filters as a GET form, the totals row, the paging links and the CSV link with
the same filters.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pandas as pd
from sqlalchemy import Engine

from tenantcost.report.display import auto_places, format_amount, format_units
from tenantcost.report.rounding import half_even
from tenantcost.service.client_list import (
    DEFAULT_SORT,
    NUMERIC_FIELDS,
    ClientList,
    ListQuery,
    SortField,
    SortOrder,
    natural_order,
)
from tenantcost.service.urls import client_href
from tenantcost.store.shown import run_shown

PER_PAGE_CHOICES = (25, 50, 100, 200, 500)
LABELS = {
    SortField.ID: "Client",
    SortField.PLAN: "Plan",
    SortField.SEGMENT: "Segment",
    SortField.ACCOUNT_MANAGER: "Account manager",
    SortField.STATUS: "Status",
    SortField.AMOUNT: "Amount",
    SortField.PREVIOUS_AMOUNT: "Previous month",
    SortField.CHANGE: "Change",
    SortField.CHANGE_PCT: "Change %",
    SortField.BUDGET_STATUS: "Budget",
}
"""The table's columns, in order (the name sits beside the id, in the first column)."""
BUDGET_WORDS = {"above": "above budget", "below": "below budget", "within": "within budget",
                "no_budget": "no budget"}  # fmt: skip


@dataclass(frozen=True)
class Column:
    field: str
    label: str
    href: str
    sorted: str | None
    """``ascending`` / ``descending`` on the column the list is sorted by (``aria-sort``)."""
    numeric: bool


@dataclass(frozen=True)
class Row:
    id: str
    href: str | None
    """None: a client of usage alone (no page before a run)."""
    name: str | None
    plan: str
    segment: str
    manager: str
    status: str | None
    amount: str
    previous: str
    change: str
    change_pct: str
    direction: str
    """``up``, ``down`` or ``same`` (a class beside the signed text)."""
    budget: str | None
    budget_text: str
    own: str = ""
    """The amount in the client's currency as the run converted it (``138.63 EUR``), or
    ``""`` when shown in the ledger (:mod:`tenantcost.service.currency_view`)."""


@dataclass(frozen=True)
class ClientListView:
    month: str | None
    previous_month: str | None
    currency: str
    months: list[str]
    q: str
    plan: str
    segment: str
    manager: str
    choices: dict[str, list[str]]
    """The filters' values (the catalog's, in the reader's scope)."""
    per_page: int
    per_page_choices: tuple[int, ...]
    columns: list[Column]
    rows: list[Row]
    totals: dict[str, str]
    csv_href: str
    page: int
    pages: int
    total: int
    summary: str
    prev_href: str | None
    next_href: str | None
    hint: str | None
    own_notes: list[str] = dataclasses.field(default_factory=list)
    """How the amounts shown in clients' own currencies were converted, per currency."""


def _params(query: ListQuery, month: str | None, **changed: Any) -> dict[str, Any]:
    """The list's URL parameters: ``q``, ``page``, ``per_page``, then only what differs from
    the defaults (a shared link stays short)."""
    values = {"q": query.q, "page": query.page, "per_page": query.per_page}
    optional = {"month": query.month, "plan": query.plan, "segment": query.segment,
                "manager": query.manager,
                "sort": None if query.sort is DEFAULT_SORT else query.sort.value,
                "order": (None if query.order is natural_order(query.sort)
                          else query.order.value)}  # fmt: skip
    values |= {k: v for k, v in optional.items() if v}
    for key, value in changed.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    return values


def _href(params: dict[str, Any]) -> str:
    return "/clients?" + urlencode(params)


def _signed(micros: int, places: int) -> str:
    text = format_amount(abs(micros), places)
    return f"+{text}" if micros > 0 else (f"−{text}" if micros < 0 else text)


def _percent(fraction: float) -> str:
    if math.isnan(fraction):
        return "–"
    text = f"{abs(fraction) * 100:.2f} %"
    return f"+{text}" if fraction > 0 else (f"−{text}" if fraction < 0 else text)


def _shown(engine: Engine, run_id: str | None) -> Any:
    return None if run_id is None else run_shown(engine, run_id)


def _amount(shown: Any, client: str, micros: Any, places: int) -> str:
    if pd.isna(micros):
        return "–"
    units = None if shown is None else shown.amount(client)
    return (
        format_units(units, shown.places)
        if units is not None
        else format_amount(int(micros), places)
    )


def _shown_units(shown: Any, client: str, micros: Any, places: int) -> tuple[int, int] | None:
    """(units, places) of the amount as the page shows it: the run's one rounding, else the
    amount rounded alone; None without an amount."""
    if pd.isna(micros):
        return None
    units = None if shown is None else shown.amount(client)
    if units is not None:
        return int(units), int(shown.places)
    return half_even(int(micros), places), places


def _shown_change(now: tuple[int, int] | None, before: tuple[int, int] | None) -> str:
    """The change as the difference of the two shown amounts (at the finer of their decimals),
    so the list reads "0.1234, +0.1234" for a new client, never a change rounded on its own."""
    places = max(p for _, p in (now or (0, 0), before or (0, 0)))
    a = 0 if now is None else now[0] * 10 ** (places - now[1])
    b = 0 if before is None else before[0] * 10 ** (places - before[1])
    text = format_units(abs(a - b), places)
    return f"+{text}" if a > b else (f"−{text}" if a < b else text)


def _own(found: dict[str, Any] | None) -> str:
    if found is None:
        return ""
    amount, code = int(found["amount"]), str(found["currency"])
    return f"{format_amount(amount, auto_places(code, [amount]))} {code}"


def client_list_view(
    engine: Engine,
    found: ClientList,
    query: ListQuery,
    months: list[str],
    choices: dict[str, list[str]],
    hint: str | None,
    converted: dict[str, dict[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> ClientListView:
    """The page of ``found`` (one page of the list ``query`` asked for); ``converted``: each
    client's amount in its currency, where the run converted it."""
    current, before = _shown(engine, found.run_id), _shown(engine, found.previous_run_id)
    places = current.places if current is not None else 2
    rows = []
    for r in found.rows.to_dict("records"):  # one page (at most 500 rows): display only
        change = r["change"]
        has_change = not pd.isna(change) and r["statement"]
        rows.append(Row(
            id=str(r["id"]),
            href=client_href(str(r["id"]), found.month) if r["statement"] else None,
            name=r["name"], plan=r["plan"] or "–", segment=r["segment"] or "–",
            manager=r["account_manager"] or "–", status=r["status"],
            amount=_amount(current, str(r["id"]), r["amount"], places),
            previous=_amount(before, str(r["id"]), r["previous_amount"], places),
            change=(_shown_change(_shown_units(current, str(r["id"]), r["amount"], places),
                                  _shown_units(before, str(r["id"]), r["previous_amount"], places))
                    if has_change else "–"),
            change_pct=_percent(float(r["change_pct"])),
            direction=("up" if has_change and change > 0 else
                       "down" if has_change and change < 0 else "same"),
            budget=r["budget_status"],
            budget_text=BUDGET_WORDS.get(str(r["budget_status"]), "–"),
            own=_own((converted or {}).get(str(r["id"]))),
        ))  # fmt: skip
    month = found.month
    columns = []
    for field, label in LABELS.items():
        active = query.sort is field
        flip = SortOrder.ASC if query.order is SortOrder.DESC else SortOrder.DESC
        order = flip if active else natural_order(field)
        href = _href(_params(query, month, sort=field.value, order=order.value, page=1))
        state = (("ascending" if query.order is SortOrder.ASC else "descending")
                 if active else None)  # fmt: skip
        columns.append(Column(field.value, label, href, state, field in NUMERIC_FIELDS))
    pages = max(1, math.ceil(found.total / query.per_page))
    first = (query.page - 1) * query.per_page + 1
    summary = (f"{found.total:,} client{'s' if found.total != 1 else ''}"
               + (f" matching “{query.q}”" if query.q else "")
               + (f", showing {first:,} to {first + len(rows) - 1:,}" if rows else ""))  # fmt: skip
    totals = {
        "amount": format_amount(found.totals["amount"], places),
        "previous": format_amount(found.totals["previous_amount"], places),
        "change": _signed(found.totals["change"], places),
    }
    csv_params = {k: v for k, v in _params(query, month).items() if k not in ("page", "per_page")}
    csv_href = "/api/v1/clients?" + urlencode(csv_params | {"format": "csv"})
    return ClientListView(
        month=month, previous_month=found.previous_month, currency=found.currency or "",
        months=months, q=query.q, plan=query.plan, segment=query.segment,
        manager=query.manager, choices=choices, per_page=query.per_page,
        per_page_choices=PER_PAGE_CHOICES, columns=columns, rows=rows, totals=totals,
        csv_href=csv_href, page=query.page, pages=pages, total=found.total, summary=summary,
        prev_href=_href(_params(query, month, page=query.page - 1)) if query.page > 1 else None,
        next_href=(_href(_params(query, month, page=query.page + 1))
                   if query.page < pages else None),
        hint=hint, own_notes=notes or [],
    )  # fmt: skip
