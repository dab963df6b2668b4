"""Budgets in the store: ``tenantcost budget load FILE --month M``, read by ``watch`` and
``budget plan``'s history from the issued statements.

A load is a whole version of the month's budget: the clients of the file and their bands
(a client not in the file has no budget in that version). Versions are numbered 1, 2, ... per
month and append-only, like rule versions: loading again keeps the old version, the latest is
in force (:func:`month_budgets`). Loading the rows the month's version in force already has
writes nothing. The month may be in the future; a closed month is refused (one line, exit 2,
as ``ingest`` refuses it): its statements are issued against the budget it had, so the band
a reader compared them with never changes afterwards (a reopened month takes a new version,
as it takes corrected inputs).

The plan's history (:func:`issued_history`) is each client's amount at the latest issued
revision of each of the last ``N`` issued months before the planned one (months with at least
one close), read in one query.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from sqlalchemy import Connection, Engine, func, insert, select

from tenantcost.budget import read_budgets
from tenantcost.store.catalog import store_currency
from tenantcost.store.connection import connected, result_frame
from tenantcost.store.models import (
    BudgetClient,
    BudgetVersion,
    CatalogClient,
    CatalogLoad,
    MonthEvent,
    Statement,
    table,
    utcnow,
)
from tenantcost.store.month_state import (
    MonthAction,
    MonthClosed,
    MonthState,
    issued_revision,
    month_state,
)

BAND_COLUMNS = ("client", "low", "expected", "high", "version", "currency")
""":func:`month_budgets`' columns."""


@dataclass(frozen=True)
class LoadedBudget:
    """What ``budget load`` did: the month's version in force after it."""

    month: str
    version: int
    clients: int
    sha256: str
    already_loaded: bool


def rows_digest(frame: pd.DataFrame) -> str:
    """The sha256 of a budget's canonical rows (by client: ``client,low,expected,high``), so
    the same budget loaded again from a file spelt otherwise is recognised."""
    ordered = frame.sort_values("client", kind="stable")
    lines = (ordered["client"] + "\x1f" + ordered["low"].astype(str) + "\x1f"
             + ordered["expected"].astype(str) + "\x1f" + ordered["high"].astype(str))  # fmt: skip
    if "currency" in ordered and (ordered["currency"] != "").any():  # ledger bands: as before
        lines = lines + "\x1f" + ordered["currency"]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def load_budget(connection: Connection, path: Path, month: str, actor: str) -> LoadedBudget:
    """Check ``path`` and store it as the next version of ``month``'s budget, inside the
    caller's write transaction (all or nothing); ``month`` is a checked ``YYYY-MM``."""
    frame = read_budgets(path)  # a bad file stops here, before the store is touched
    currency = store_currency(connection)
    if month_state(connection, month) == MonthState.CLOSED:
        raise MonthClosed(
            f"budget load would change {month}, closed (revision "
            f"{issued_revision(connection, month)} issued): a closed month's budget does not "
            f"change; run `tenantcost reopen --month {month} --reason TEXT` first if it must"
        )
    digest = rows_digest(frame)
    v = table(BudgetVersion).c
    latest = connection.execute(
        select(v.version, v.sha256).where(v.month == month).order_by(v.version.desc()).limit(1)
    ).first()
    if latest is not None and latest.sha256 == digest:
        return LoadedBudget(month, int(latest.version), len(frame), digest, already_loaded=True)
    version = 1 if latest is None else int(latest.version) + 1
    inserted = connection.execute(
        insert(table(BudgetVersion)).values(
            month=month,
            version=version,
            sha256=digest,
            origin=str(path),
            currency=currency,
            clients=len(frame),
            loaded_at=utcnow(),
            actor=actor,
        )
    ).inserted_primary_key
    assert inserted is not None
    if not frame.empty:
        rows = frame.assign(
            version_id=int(inserted[0]),
            # object first: a str column's missing value is NaN, which a driver may bind as text
            currency=frame["currency"]
            .astype(object)
            .where(~frame["currency"].isin(["", currency]), None),
        ).astype({"low": object, "expected": object, "high": object, "currency": object})
        # Python ints: every driver binds them as integers; NULL currency: the version's
        connection.execute(insert(table(BudgetClient)), rows.to_dict("records"))
    return LoadedBudget(month, version, len(frame), digest, already_loaded=False)


def month_budgets(bind: Engine | Connection, month: str) -> pd.DataFrame:
    """The budget in force for ``month`` (its latest version): ``client, low, expected, high``
    (int64 micro-units of ``currency``: the band's own, else the ledger's when loaded) and
    ``version`` (int64), by client; an empty frame with these columns when the month has
    none."""
    v, c = table(BudgetVersion).c, table(BudgetClient).c
    latest = select(func.max(v.id)).where(v.month == month).scalar_subquery()
    query = (
        select(
            c.client, c.low, c.expected, c.high, v.version, func.coalesce(c.currency, v.currency)
        )
        .join(table(BudgetVersion), v.id == c.version_id)
        .where(c.version_id == latest)
        .order_by(c.client)
    )
    with connected(bind) as connection:
        frame = result_frame(connection.execute(query), BAND_COLUMNS)
    return frame.astype({"client": "str", "low": "int64", "expected": "int64", "high": "int64",
                         "version": "int64", "currency": "str"})  # fmt: skip


def issued_months(bind: Engine | Connection, before: str, count: int) -> list[str]:
    """The last ``count`` months before ``before`` with an issued revision, in order."""
    e = table(MonthEvent).c
    query = (
        select(e.month)
        .where(e.action == MonthAction.CLOSE.value, e.month < before)
        .group_by(e.month)
        .order_by(e.month.desc())
        .limit(count)
    )
    with connected(bind) as connection:
        return sorted(str(m) for m in connection.execute(query).scalars())


def issued_history(bind: Engine | Connection, months: list[str]) -> pd.DataFrame:
    """``client, month, amount``: each client's amount (micro-units) at the latest issued
    revision of each of ``months`` (a client the revision has no row for is absent)."""
    s = table(Statement).c
    latest = (
        select(s.month, s.client, func.max(s.revision).label("revision"))
        .where(s.month.in_(months))
        .group_by(s.month, s.client)
        .subquery()
    )
    query = (
        select(s.client, s.month, s.amount)
        .join(
            latest,
            (latest.c.month == s.month)
            & (latest.c.client == s.client)
            & (latest.c.revision == s.revision),
        )
        .order_by(s.client, s.month)
    )
    with connected(bind) as connection:
        frame = result_frame(connection.execute(query), ["client", "month", "amount"])
    return frame.astype({"client": "str", "month": "str", "amount": "int64"})


def own_currency_history(
    bind: Engine | Connection, history: pd.DataFrame, months: list[str], ledger: str
) -> tuple[pd.DataFrame, list[str]]:
    """``history`` (:func:`issued_history`) with ``currency``: a client whose own currency in
    the store's catalog is not the ledger's has its amounts in it, as each issued revision's
    run converted them (``run_fx_client``), when every month of its history has that
    conversion (``""``: the ledger's). Also the clients left in the ledger, some month's run
    not converted into their currency: one history is never in two currencies. One query."""
    from tenantcost.store.models import CatalogClient, CatalogLoad, RunFxClient

    out = history.assign(currency="")
    s, fx = table(Statement).c, table(RunFxClient).c
    load, client = table(CatalogLoad).c, table(CatalogClient).c
    latest = (
        select(s.month, s.client, func.max(s.revision).label("revision"))
        .where(s.month.in_(months))
        .group_by(s.month, s.client)
        .subquery()
    )
    catalog = select(func.max(load.id)).scalar_subquery()
    query = (
        select(s.client, s.month, fx.amount, fx.currency)
        .join(latest, (latest.c.month == s.month) & (latest.c.client == s.client)
              & (latest.c.revision == s.revision))
        .join(table(RunFxClient), (fx.run_id == s.run_id) & (fx.client == s.client))
        .join(table(CatalogClient), (client.client == s.client)
              & (client.currency == fx.currency))
        .where(client.load_id == catalog, client.currency != ledger)
    )  # fmt: skip
    with connected(bind) as connection:
        own = result_frame(connection.execute(query), ["client", "month", "amount", "currency"])
        wanted = (
            connection.execute(
                select(client.client).where(
                    client.load_id == catalog, client.currency != "", client.currency != ledger
                )
            )
            .scalars()
            .all()
        )
    if not wanted:
        return out, []
    own = own.astype({"client": "str", "month": "str", "amount": "int64", "currency": "str"})
    had = history.groupby("client")["month"].size()
    got = own.groupby("client")["month"].size()
    whole = [c for c in got.index if got[c] == had.get(c, -1)]
    left = sorted(c for c in {str(w) for w in wanted} if c in had.index and c not in whole)
    keep = out.loc[~out["client"].isin(whole)]
    return pd.concat([keep, own.loc[own["client"].isin(whole)]], ignore_index=True).sort_values(
        ["client", "month"], kind="stable"
    ).reset_index(drop=True), left


def catalog_clients(bind: Engine | Connection) -> list[str]:
    """The clients of the store's catalog (its latest load; none without one): ``budget
    plan`` lists those without history as ``no_history``."""
    load, client = table(CatalogLoad).c, table(CatalogClient).c
    latest = select(func.max(load.id)).scalar_subquery()
    with connected(bind) as connection:
        found = connection.execute(select(client.client).where(client.load_id == latest))
        return sorted(str(c) for c in found.scalars())


__all__ = [
    "BAND_COLUMNS",
    "LoadedBudget",
    "catalog_clients",
    "issued_history",
    "issued_months",
    "load_budget",
    "month_budgets",
    "rows_digest",
]
