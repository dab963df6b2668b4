"""The client list of a month: ``GET /api/v1/clients`` and the ``/clients`` page.

Every role opens the list first ("which of my clients costs what, and what moved?"), so it
answers from one month: each client's figure of the month as the viewer sees it, the
previous month's beside it, the change, and where the figure lands in the month's budget.
Why one module: the JSON, its CSV and the page must list the same rows in the same order,
so the query, its sort rule and its filters live here once and the routes only call it.

The rows (one per client with a figure in the month or in the previous one):

* ``amount``: the month's figure by :func:`tenantcost.service.figures.month_source` (the
  latest issued revision, ``issued`` or ``restated`` per client; finance and admin also a
  draft of an open month); ``previous_amount``: the calendar month before, by the same rule.
  Either is ``null`` where the client has no figure (new, or ended);
* ``change`` = ``amount`` − ``previous_amount``, a missing one counting 0 (as the movers
  count a new or ended client), so a new client's change is its amount; ``change_pct`` =
  ``change / previous_amount`` rounded to :data:`~tenantcost.economics.RATIO_PLACES`
  decimals, ``null`` where the previous amount is 0 or missing;
* ``budget_status``: the month's figure against the band of the month's budget in force
  (:func:`tenantcost.store.budgets.month_budgets`), as :func:`tenantcost.watch.band_status`
  compares (``below``, ``within``, ``above``, ``no_budget``). A draft of an open month holds
  only the hours run so far, so for it the latest watch's projection of the month is compared
  instead, when the watch has the client; ``null`` without a figure in the month.

Filters (``plan``, ``segment``, ``manager``: exact catalog values; ``q``: part of the id or
the catalog name, any case), the sort (:class:`SortField`, nulls last, ties by id, text by
code point), the count and the totals apply to the month's rows, which come from one SQL
query (a ``UNION ALL`` of the two months' figures, joined to the catalog, the budget band and
the watch's projection) on SQLite and PostgreSQL alike. That query's frame is kept per pair
of runs, reader scope and store generation (:mod:`tenantcost.service.memo`), and each
request filters, sorts and pages it with vectorised pandas. With 8 readers on 2 cores, one
SQL scan with window functions per request (70 ms alone) made the list's p95 0.4–0.9 s at
10,000 clients; a kept frame of 10,000 rows sorts in milliseconds. An account manager's
scope is a ``WHERE client IN (...)`` of its own clients in that query, so neither a row nor
a catalog value of another client (a plan, a manager's name) reaches it. Finance and admin
also list the clients known from usage alone (:mod:`tenantcost.service.usage_clients`: no
figure, ``statement`` false), merged and sorted with them by the same rule (:func:`_sorted`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import (
    BigInteger,
    Engine,
    Float,
    Numeric,
    Select,
    String,
    case,
    cast,
    func,
    literal,
    null,
    select,
    union_all,
)

from tenantcost.economics import RATIO_PLACES
from tenantcost.errors import InputError
from tenantcost.service.figures import FigureStatus, MonthSource, month_source
from tenantcost.service.permissions import (
    Principal,
    client_scope,
    sees_drafts,
    sees_usage_clients,
)
from tenantcost.store.data import Store
from tenantcost.store.models import (
    BudgetClient,
    BudgetVersion,
    CatalogClient,
    CatalogLoad,
    Run,
    RunClient,
    RunFxClient,
    Statement,
    WatchEntry,
    WatchSnapshot,
    table,
)
from tenantcost.watch import BudgetStatus


class SortField(StrEnum):
    """What the list sorts on (``?sort=``): any field of an item."""

    ID = "id"
    NAME = "name"
    PLAN = "plan"
    SEGMENT = "segment"
    ACCOUNT_MANAGER = "account_manager"
    STATUS = "status"
    AMOUNT = "amount"
    PREVIOUS_AMOUNT = "previous_amount"
    CHANGE = "change"
    CHANGE_PCT = "change_pct"
    BUDGET_STATUS = "budget_status"
    """By what needs a look first: ``above``, ``below``, ``within``, ``no_budget``."""


class SortOrder(StrEnum):
    ASC = "asc"
    DESC = "desc"


DEFAULT_SORT = SortField.AMOUNT
DEFAULT_ORDER = SortOrder.DESC
FIELDS = tuple(f.value for f in SortField)
"""An item's fields, in order (and the CSV's columns)."""
AMOUNTS = ("amount", "previous_amount", "change")
NUMERIC_FIELDS = frozenset({SortField.AMOUNT, SortField.PREVIOUS_AMOUNT, SortField.CHANGE,
                            SortField.CHANGE_PCT})  # fmt: skip
BUDGET_RANK = {BudgetStatus.ABOVE.value: 0, BudgetStatus.BELOW.value: 1,
               BudgetStatus.WITHIN.value: 2, BudgetStatus.NO_BUDGET.value: 3}  # fmt: skip
"""The order of ``sort=budget_status`` (ascending), as the month page's watch sorts."""


def _choice(enum: type[StrEnum], text: str | None, default: StrEnum, what: str) -> Any:
    if text is None or text == "":
        return default
    try:
        return enum(text)
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise InputError(f"{what}: expected one of {allowed}; got '{text[:40]}'") from None


def parse_sort(sort: str | None, order: str | None) -> tuple[SortField, SortOrder]:
    """``?sort=`` and ``?order=`` checked (the order by default :func:`natural_order`): one
    :class:`InputError` line naming the allowed values (the routes answer 422)."""
    field = _choice(SortField, sort, DEFAULT_SORT, "sort")
    return field, _choice(SortOrder, order, natural_order(field), "order")


def natural_order(field: SortField) -> SortOrder:
    """The order of ``?sort=`` without ``?order=``: largest first for amounts and the
    change, A to Z for the rest."""
    return SortOrder.DESC if field in NUMERIC_FIELDS else SortOrder.ASC


@dataclass(frozen=True)
class ListQuery:
    """What a reader asked the list for."""

    month: str | None = None
    """None: the latest month the reader sees (:func:`latest_month`)."""
    q: str = ""
    plan: str = ""
    segment: str = ""
    manager: str = ""
    sort: SortField = DEFAULT_SORT
    order: SortOrder = DEFAULT_ORDER
    page: int = 1
    per_page: int = 50


@dataclass(frozen=True)
class ClientList:
    """The rows of a list (one page, or all of them for the CSV) and what frames them."""

    month: str | None
    previous_month: str | None
    currency: str | None
    rows: pd.DataFrame
    """Columns :data:`FIELDS` and ``statement``; amounts nullable Int64."""
    total: int
    totals: dict[str, int]
    """``amount``, ``previous_amount`` and ``change`` over every matching row."""
    run_id: str | None = None
    """The run whose figures ``amount`` shows (its display rounding: the page's)."""
    previous_run_id: str | None = None


def previous_month(month: str) -> str:
    """``2026-01`` → ``2025-12``."""
    year, number = int(month[:4]), int(month[5:])
    return f"{year - 1}-12" if number == 1 else f"{year}-{number - 1:02d}"


def latest_month(engine: Engine, principal: Principal) -> str | None:
    """The newest month with a figure the reader may see: with a run for finance and admin
    (drafts included), with an issued statement (of its own clients, for an account manager)
    for the others."""
    if sees_drafts(principal):
        query = select(func.max(table(Run).c.month))
    else:
        s = table(Statement).c
        query = select(func.max(s.month))
        scope = client_scope(principal)
        if scope is not None:
            query = query.where(s.client.in_(sorted(scope)))
    with engine.connect() as connection:
        value = connection.execute(query).scalar()
    return None if value is None else str(value)


def _figures(source: MonthSource, scope: frozenset[str] | None) -> Select[Any]:
    """``client, amount, status`` of the month ``source`` names, in the reader's scope."""
    if source.status is FigureStatus.DRAFT:
        rc = table(RunClient).c
        query = select(rc.client, rc.amount, literal(FigureStatus.DRAFT.value).label("status"))
        query = query.where(rc.run_id == source.run_id)
        return query if scope is None else query.where(rc.client.in_(sorted(scope)))
    s = table(Statement).c
    newest = select(s.client, func.max(s.revision).label("revision")).where(
        s.month == source.month, s.revision <= (source.revision or 1)
    )
    if scope is not None:
        newest = newest.where(s.client.in_(sorted(scope)))
    latest = newest.group_by(s.client).subquery()
    status = case((s.revision > 1, FigureStatus.RESTATED.value),
                  else_=FigureStatus.ISSUED.value).label("status")  # fmt: skip
    return (
        select(s.client, s.amount, status)
        .join(latest, (latest.c.client == s.client) & (latest.c.revision == s.revision))
        .where(s.month == source.month)
    )


def _catalog() -> Select[Any]:
    """The store's catalog (latest load): ``client, name, plan, segment, account_manager``,
    an empty text as NULL."""
    load, c = table(CatalogLoad).c, table(CatalogClient).c
    latest = select(func.max(load.id)).scalar_subquery()
    return select(
        c.client,
        func.nullif(c.name, "").label("name"),
        func.nullif(c.plan, "").label("plan"),
        func.nullif(c.segment, "").label("segment"),
        func.nullif(c.account_manager, "").label("account_manager"),
    ).where(c.load_id == latest)


def _band(month: str) -> Select[Any]:
    """``client, low, high, currency`` of the month's budget in force (its latest version);
    ``currency`` NULL: the ledger's, else the client's own."""
    v, c = table(BudgetVersion).c, table(BudgetClient).c
    latest = select(func.max(v.id)).where(v.month == month).scalar_subquery()
    return select(c.client, c.low, c.high, c.currency).where(c.version_id == latest)


def _in_band_currency(source: MonthSource) -> Select[Any]:
    """``client, currency, amount``: the month's figures as its run converted them
    (:mod:`tenantcost.store.run_fx`), for a band set in a client's own currency."""
    f = table(RunFxClient).c
    if source.status is FigureStatus.DRAFT:
        return select(f.client, f.currency, f.amount).where(f.run_id == source.run_id)
    s = table(Statement).c
    newest = (
        select(s.client, func.max(s.revision).label("revision"))
        .where(s.month == source.month, s.revision <= (source.revision or 1))
        .group_by(s.client)
        .subquery()
    )
    issued = (
        select(s.client, s.run_id)
        .join(newest, (newest.c.client == s.client) & (newest.c.revision == s.revision))
        .where(s.month == source.month)
        .subquery()
    )
    return select(f.client, f.currency, f.amount).join(
        issued, (issued.c.client == f.client) & (issued.c.run_id == f.run_id)
    )


def _watch_status(month: str) -> Select[Any]:
    """``client, status`` of the month's latest watch run (its band, its currency)."""
    s, e = table(WatchSnapshot).c, table(WatchEntry).c
    latest = select(func.max(s.id)).where(s.month == month).scalar_subquery()
    return select(e.client, e.status).where(e.snapshot_id == latest)


def _projection(month: str) -> Select[Any]:
    """``client, projected`` of the month's latest watch run."""
    s, e = table(WatchSnapshot).c, table(WatchEntry).c
    latest = select(func.max(s.id)).where(s.month == month).scalar_subquery()
    return select(e.client, e.projected).where(e.snapshot_id == latest)


def _both_months(
    source: MonthSource, previous: MonthSource | None, scope: frozenset[str] | None
) -> Any:
    """``client, amount, previous_amount, status``: one row per client with a figure in the
    month or the one before, by one ``UNION ALL`` and one ``GROUP BY`` (each client has at
    most one figure per month, so ``MAX`` picks it): a join of the two months' subqueries
    made SQLite scan one for each row of the other (seconds at 10,000 clients)."""
    nothing = cast(null(), BigInteger)
    current = _figures(source, scope).subquery()
    parts: Any = select(current.c.client, current.c.amount.label("amount"),
                        nothing.label("previous_amount"), current.c.status)  # fmt: skip
    if previous is not None:
        before = _figures(previous, scope).subquery()
        parts = union_all(parts, select(before.c.client, nothing, before.c.amount,
                                        cast(null(), String)))  # fmt: skip
    both = parts.subquery()
    return (
        select(
            both.c.client,
            func.max(both.c.amount).label("amount"),
            func.max(both.c.previous_amount).label("previous_amount"),
            func.max(both.c.status).label("status"),
        )
        .group_by(both.c.client)
        .subquery()
    )


def _rows(
    engine: Engine, principal: Principal, source: MonthSource, previous: MonthSource | None
) -> Select[Any]:
    """Every row of the month in the reader's scope, its fields as columns (unfiltered)."""
    figures = _both_months(source, previous, client_scope(principal))
    catalog, band = _catalog().subquery(), _band(source.month).subquery()
    amount, prior = figures.c.amount, figures.c.previous_amount
    change = func.coalesce(amount, 0) - func.coalesce(prior, 0)
    measured: Any = amount
    query = select(figures.c.client)
    if source.status is FigureStatus.DRAFT:  # the hours so far: the watch's projection
        projected = _projection(source.month).subquery()
        query = query.outerjoin(projected, projected.c.client == figures.c.client)
        measured = case((amount.is_(None), None),
                        else_=func.coalesce(projected.c.projected, amount))  # fmt: skip
    query = query.outerjoin(catalog, catalog.c.client == figures.c.client)
    query = query.outerjoin(band, band.c.client == figures.c.client)
    own = _in_band_currency(source).subquery()
    query = query.outerjoin(
        own, (own.c.client == figures.c.client) & (own.c.currency == band.c.currency)
    )
    if source.status is FigureStatus.DRAFT:  # the watch compared it in the band's currency
        watched = _watch_status(source.month).subquery()
        query = query.outerjoin(watched, watched.c.client == figures.c.client)
        in_own: Any = watched.c.status
    else:
        in_own = case(
            (own.c.amount.is_(None), None),
            (own.c.amount < band.c.low, BudgetStatus.BELOW.value),
            (own.c.amount > band.c.high, BudgetStatus.ABOVE.value),
            else_=BudgetStatus.WITHIN.value,
        )
    budget = case(
        (measured.is_(None), None),
        (band.c.low.is_(None), BudgetStatus.NO_BUDGET.value),
        (band.c.currency.is_not(None), in_own),
        (measured < band.c.low, BudgetStatus.BELOW.value),
        (measured > band.c.high, BudgetStatus.ABOVE.value),
        else_=BudgetStatus.WITHIN.value,
    )
    return query.with_only_columns(
        figures.c.client.label("id"),
        catalog.c.name,
        catalog.c.plan,
        catalog.c.segment,
        catalog.c.account_manager,
        figures.c.status,
        amount,
        prior,
        change.label("change"),
        _ratio(engine, change, prior).label("change_pct"),
        budget.label("budget_status"),
    )


def _ratio(engine: Engine, change: Any, prior: Any) -> Any:
    """``change / prior`` rounded in SQL (so the sort and the shown value agree), NULL where
    ``prior`` is 0 or NULL."""
    fraction = cast(change, Float) / cast(func.nullif(prior, 0), Float)
    if engine.dialect.name == "postgresql":  # round(double, int) is numeric-only there
        return cast(func.round(cast(fraction, Numeric), RATIO_PLACES), Float)
    return func.round(fraction, RATIO_PLACES)


def _month_rows(
    engine: Engine, principal: Principal, source: MonthSource, previous: MonthSource | None
) -> pd.DataFrame:
    """Every row of the month in the reader's scope (:func:`_rows`), typed, one SQL query
    kept per pair of runs, scope and store generation (do not mutate)."""
    from tenantcost.service.memo import remembered

    def load() -> pd.DataFrame:
        query = _rows(engine, principal, source, previous)
        with engine.connect() as connection:
            result = connection.execute(query)
            frame = pd.DataFrame(result.all(), columns=list(result.keys()))
        return _typed(frame.assign(statement=True)) if not frame.empty else _empty()

    scope = client_scope(principal)
    return remembered(engine, "client_rows", (source, previous, scope), load)


def _filtered(frame: pd.DataFrame, query: ListQuery) -> pd.DataFrame:
    """The rows ``query``'s search and filters keep: ``q`` in the id or the catalog name in
    any case, ``plan``, ``segment`` and ``manager`` exactly."""
    keep = pd.Series(True, index=frame.index)
    if query.q:
        wanted = query.q.lower()
        keep &= frame["id"].str.lower().str.contains(wanted, regex=False) | frame["name"].fillna(
            ""
        ).astype(str).str.lower().str.contains(wanted, regex=False)
    for field, value in (("plan", query.plan), ("segment", query.segment),
                         ("account_manager", query.manager)):  # fmt: skip
        if value:
            keep &= frame[field] == value
    return frame[keep]


def client_list(
    engine: Engine,
    principal: Principal,
    query: ListQuery,
    store: Store | None = None,
    *,
    paged: bool = True,
) -> ClientList:
    """The list ``query`` asks for: one page (``paged``), or every matching row (the CSV)."""
    from tenantcost.service.usage_clients import usage_only_clients

    month = query.month or latest_month(engine, principal)
    usage_only = usage_only_clients(engine, store) if sees_usage_clients(principal) else ()
    source = None if month is None else month_source(engine, principal, month)
    frame, currency, before = _empty(), None, None
    run_ids: tuple[str | None, str | None] = (None, None)
    if month is not None and source is not None:
        before = previous_month(month)
        previous = month_source(engine, principal, before)
        run_ids = (source.run_id, None if previous is None else previous.run_id)
        frame = _month_rows(engine, principal, source, previous)
        r = table(Run).c
        with engine.connect() as connection:
            currency = connection.execute(select(r.currency).where(r.id == source.run_id)).scalar()
    if usage_only:
        frame = pd.concat([frame, _usage_rows(engine, usage_only)], ignore_index=True)
    frame = _sorted(_filtered(frame, query), query)
    totals = {a: int(frame[a].sum()) for a in AMOUNTS}  # NULLs skipped, as SQL's SUM
    total = len(frame)
    if paged:
        start = (query.page - 1) * query.per_page
        frame = frame.iloc[start : start + query.per_page].reset_index(drop=True)
    return ClientList(month, before, None if currency is None else str(currency), frame, total,
                      totals, *run_ids)  # fmt: skip


def _empty() -> pd.DataFrame:
    return _typed(pd.DataFrame({f: [] for f in (*FIELDS, "statement")}))


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Amounts as nullable Int64 (PostgreSQL's sums arrive as Decimal), the ratio as float,
    text as object with None for missing."""
    out = frame.astype({a: "Int64" for a in AMOUNTS})
    out["change_pct"] = pd.to_numeric(out["change_pct"], errors="coerce").astype("float64")
    for column in ("id", "name", "plan", "segment", "account_manager", "status",
                   "budget_status"):  # fmt: skip
        out[column] = out[column].astype(object).where(out[column].notna(), None)
    out["statement"] = out["statement"].astype(bool)
    return out


def _usage_rows(engine: Engine, clients: tuple[str, ...]) -> pd.DataFrame:
    """The clients of usage alone as rows (catalog fields, no figure)."""
    with engine.connect() as connection:
        result = connection.execute(_catalog())
        catalog = pd.DataFrame(result.all(), columns=list(result.keys()))
    rows = pd.DataFrame({"id": list(clients)}).merge(
        catalog.rename(columns={"client": "id"}), on="id", how="left"
    )
    rows = rows.assign(status=None, amount=pd.NA, previous_amount=pd.NA, change=pd.NA,
                       change_pct=np.nan, budget_status=None, statement=False)  # fmt: skip
    return _typed(rows[[*FIELDS, "statement"]].reset_index(drop=True))


def _sorted(frame: pd.DataFrame, query: ListQuery) -> pd.DataFrame:
    """The order the reader asked for (nulls last, ties by id, text by code point)."""
    column = frame[query.sort.value]
    if query.sort is SortField.BUDGET_STATUS:
        column = column.map(BUDGET_RANK)
    keyed = frame.assign(_null=column.isna(), _key=column)
    ascending = query.order is SortOrder.ASC
    ordered = keyed.sort_values(["_null", "_key", "id"], ascending=[True, ascending, True],
                                kind="stable", na_position="last")  # fmt: skip
    return ordered.drop(columns=["_null", "_key"]).reset_index(drop=True)


def items(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as JSON items (one page: at most 500)."""
    out = []
    for row in frame.to_dict("records"):  # one page, display only
        item: dict[str, Any] = {}
        for field in FIELDS:
            value = row[field]
            if pd.isna(value):
                item[field] = None
            elif field in AMOUNTS:
                item[field] = int(value)
            elif field == "change_pct":
                item[field] = float(value)
            else:
                item[field] = str(value)
        item["statement"] = bool(row["statement"])
        out.append(item)
    return out


def filter_values(engine: Engine, principal: Principal) -> dict[str, list[str]]:
    """The catalog's plans, segments and account managers of the clients the reader may
    list (an account manager: its own clients' only), for the page's filter selects."""
    catalog = _catalog().subquery()
    scope = client_scope(principal)
    values: dict[str, list[str]] = {}
    with engine.connect() as connection:
        for field in ("plan", "segment", "account_manager"):
            column = catalog.c[field]
            query = select(column).where(column.is_not(None)).distinct().order_by(column)
            if scope is not None:
                query = query.where(catalog.c.client.in_(sorted(scope)))
            values[field] = sorted(str(v) for v in connection.execute(query).scalars())
    return values


def document(found: ClientList, query: ListQuery) -> dict[str, Any]:
    """``GET /api/v1/clients``: a page of items, the count and the totals of every match, the
    month shown and the one before, the sort, and the ``money`` header (``null`` with no
    month to show)."""
    from tenantcost.money import money_header

    return {
        "items": items(found.rows),
        "page": query.page,
        "per_page": query.per_page,
        "total": found.total,
        "month": found.month,
        "previous_month": found.previous_month,
        "money": None if found.currency is None else money_header(found.currency),
        "sort": query.sort.value,
        "order": query.order.value,
        "totals": found.totals,
    }


def csv_name(found: ClientList) -> str:
    """``clients-2026-11.csv`` (``clients.csv`` with no month to show)."""
    return "clients.csv" if found.month is None else f"clients-{found.month}.csv"


def csv_frame(found: ClientList) -> pd.DataFrame:
    """Every matching row with the items' fields as columns, for :mod:`csv_table`."""
    return found.rows[list(FIELDS)]
