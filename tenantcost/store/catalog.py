"""The client catalog in the store: ``tenantcost catalog load FILE``, read back by
``unit-economics --from-db``.

A load is checked by the same reader as ``unit-economics --catalog FILE``
(:func:`tenantcost.catalog.read_catalog`, against the currency of the latest stored rule
file), then written as one ``catalog_load`` row and its ``catalog_client`` rows in one
transaction, under the store's write lock: all or nothing. The latest load is the store's
catalog; loading the file it came from again writes nothing. Reading it back gives the same
:class:`~tenantcost.catalog.Catalog` frame the file gives, so figures from the store and from
the file are the same.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from sqlalchemy import Connection, Engine, Select, func, insert, select

from tenantcost.catalog import CATALOG_COLUMNS, Catalog, read_catalog
from tenantcost.errors import InputError
from tenantcost.store.connection import connected, result_frame
from tenantcost.store.models import CatalogClient, CatalogLoad, RuleFile, table, utcnow

_STORED = ["client", "name", "plan", "segment", "account_manager", "monthly_revenue",
           "has_revenue", "currency"]  # fmt: skip


@dataclass(frozen=True)
class LoadedCatalog:
    """What ``catalog load`` did."""

    load_id: int
    sha256: str
    clients: int
    already_loaded: bool


def store_currency(connection: Connection) -> str:
    """The currency of the latest stored rule file (the catalog's revenue must be in it)."""
    r = table(RuleFile).c
    currency = connection.execute(
        select(r.currency).order_by(r.loaded_at.desc(), r.id.desc()).limit(1)
    ).scalar()
    if currency is None:
        raise InputError("the store has no rules: `tenantcost rules load RULES.yaml` first")
    return str(currency)


def _latest(connection: Connection) -> tuple[int, str] | None:
    c = table(CatalogLoad).c
    row = connection.execute(select(c.id, c.sha256).order_by(c.id.desc()).limit(1)).first()
    return None if row is None else (int(row.id), str(row.sha256))


def load_catalog(connection: Connection, path: Path, actor: str) -> LoadedCatalog:
    """Check ``path`` and make it the store's catalog (inside the caller's write
    transaction); the store's current catalog loaded again writes nothing."""
    catalog = read_catalog(path, store_currency(connection))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    latest = _latest(connection)
    if latest is not None and latest[1] == digest:
        return LoadedCatalog(latest[0], digest, len(catalog.frame), already_loaded=True)
    load_id = connection.execute(
        insert(table(CatalogLoad)).values(
            sha256=digest,
            origin=str(path),
            currency=store_currency(connection),
            clients=len(catalog.frame),
            loaded_at=utcnow(),
            actor=actor,
        )
    ).inserted_primary_key
    assert load_id is not None
    frame = catalog.frame
    rows = frame[_STORED].assign(
        load_id=int(load_id[0]),
        contract_start=frame["start"].dt.date.astype(object).where(frame["start"].notna(), None),
        contract_end=frame["end"].dt.date.astype(object).where(frame["end"].notna(), None),
    )
    if not rows.empty:
        connection.execute(insert(table(CatalogClient)), rows.to_dict("records"))
    return LoadedCatalog(int(load_id[0]), digest, len(frame), already_loaded=False)


def stored_catalog(bind: Engine | Connection) -> Catalog:
    """The store's catalog (its latest load), as :func:`~tenantcost.catalog.read_catalog`
    gives it; a store without one is one ``error:`` line."""
    load = table(CatalogLoad).c
    clients = table(CatalogClient)
    client = clients.c
    with connected(bind) as connection:
        latest = _latest(connection)
        if latest is None:
            raise InputError(
                "the store has no client catalog: `tenantcost catalog load FILE` first, or give "
                "--catalog FILE"
            )
        origin = connection.execute(select(load.origin).where(load.id == latest[0])).scalar()
        result = connection.execute(
            select(clients).where(client.load_id == latest[0]).order_by(client.client)
        )
        frame = result_frame(result)
    frame = frame.astype({c: "str" for c in _STORED if c not in ("monthly_revenue",
                                                                 "has_revenue")})  # fmt: skip
    frame["monthly_revenue"] = frame["monthly_revenue"].astype("int64")
    frame["has_revenue"] = frame["has_revenue"].astype(bool)
    for column, stored in (("start", "contract_start"), ("end", "contract_end")):
        frame[column] = pd.to_datetime(frame[stored]).astype("datetime64[ns]")
    frame["row"] = "client " + frame["client"]
    columns = [*_STORED[:6], "currency", "has_revenue", "start", "end", "row"]
    return Catalog(frame[columns].reset_index(drop=True), f"store catalog ({origin})",
                   CATALOG_COLUMNS)  # fmt: skip


def catalog_fingerprint(bind: Engine | Connection) -> str | None:
    """The SHA-256 of the store's catalog (its latest load); ``None`` without one. What a
    page or sheet kept with catalog names in it is keyed by."""
    with connected(bind) as connection:
        latest = _latest(connection)
    return None if latest is None else latest[1]


def catalog_names() -> Select[tuple[str, str]]:
    """``client, name`` of the store's catalog (its latest load), clients with a name only:
    a query to join (the service's client search matches names in SQL) or to filter."""
    load, client = table(CatalogLoad).c, table(CatalogClient).c
    latest = select(func.max(load.id)).scalar_subquery()
    return select(client.client, client.name).where(client.load_id == latest, client.name != "")


def catalog_version(bind: Engine | Connection) -> int:
    """The store's latest catalog load (0: none): changes whenever :func:`all_names` may."""
    load = table(CatalogLoad).c
    with connected(bind) as connection:
        return int(connection.execute(select(func.coalesce(func.max(load.id), 0))).scalar() or 0)


def all_names(bind: Engine | Connection) -> dict[str, str]:
    """Every catalog name of the store's catalog, by client id (one query): what free text
    shown to a client's reader is redacted against, with the ids."""
    with connected(bind) as connection:
        rows = connection.execute(catalog_names()).all()
    return {str(row.client): str(row.name) for row in rows}


def names_of(bind: Engine | Connection, clients: list[str]) -> dict[str, str]:
    """The catalog names of ``clients`` (one page of a list: one query), those with one."""
    if not clients:
        return {}
    names = catalog_names().subquery()
    query = select(names.c.client, names.c.name).where(names.c.client.in_(clients))
    with connected(bind) as connection:
        return {str(c): str(n) for c, n in connection.execute(query).all()}


def catalog_currencies(bind: Engine | Connection) -> set[str]:
    """The currencies of the store's catalog (its latest load): what runs convert into."""
    load, client = table(CatalogLoad).c, table(CatalogClient).c
    latest = select(func.max(load.id)).scalar_subquery()
    query = select(client.currency).where(client.load_id == latest).distinct()
    with connected(bind) as connection:
        return {str(c) for c in connection.execute(query).scalars() if c}


def currency_of(bind: Engine | Connection, client_id: str) -> str | None:
    """The client's own currency in the store's catalog (None: not in it)."""
    load, client = table(CatalogLoad).c, table(CatalogClient).c
    latest = select(func.max(load.id)).scalar_subquery()
    query = select(client.currency).where(client.load_id == latest, client.client == client_id)
    with connected(bind) as connection:
        value = connection.execute(query).scalar()
    return str(value) if value else None


def currencies_of(bind: Engine | Connection, clients: list[str]) -> dict[str, str]:
    """The own currencies of ``clients`` in the store's catalog, those in it."""
    if not clients:
        return {}
    load, client = table(CatalogLoad).c, table(CatalogClient).c
    latest = select(func.max(load.id)).scalar_subquery()
    query = select(client.client, client.currency).where(
        client.load_id == latest, client.client.in_(clients)
    )
    with connected(bind) as connection:
        return {str(c): str(v) for c, v in connection.execute(query).all() if v}
