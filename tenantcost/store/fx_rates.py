"""Exchange rates in the store: ``tenantcost fx load FILE|ecb``, read by ``run``, ``close``
and the service.

A load is read and checked by the same reader as the rule file's ``fx.rates``
(:mod:`tenantcost.readers.fx_rates`), then written as one ``fx_load`` row and its
``fx_rate`` rows in one transaction, under the store's write lock: all or nothing. Loading
rates the store already holds, the same rows again, writes nothing. Reading them back merges
the loads in load order: for the same (date, base, quote) a treasury file's rate wins over
the ECB's, and a later load over an earlier one of the same kind, so a corrected treasury
file replaces the figures it corrects and nothing else.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date

import pandas as pd
from sqlalchemy import Connection, Engine, insert, select

from tenantcost.config.fx import ECB
from tenantcost.errors import InputError
from tenantcost.readers.fx_rates import (
    RATE_COLUMNS,
    ecb_label,
    empty_rates,
    merge_rates,
    read_rates,
)
from tenantcost.store.connection import connected, result_frame
from tenantcost.store.models import FxLoad, FxRate, table, utcnow


@dataclass(frozen=True)
class LoadedRates:
    """What ``fx load`` did."""

    load_id: int
    sha256: str
    rates: int
    first: date
    last: date
    currencies: list[str]
    already_loaded: bool


def _digest(rates: pd.DataFrame) -> str:
    """sha256 over the rows as stored (date, base, quote, rate), in their sorted order."""
    lines = (
        rates["date"].dt.strftime("%Y-%m-%d") + " " + rates["base"] + " " + rates["quote"]
        + " " + rates["rate"]
    )  # fmt: skip
    return hashlib.sha256("\n".join(lines.tolist()).encode()).hexdigest()


def load_rates(
    connection: Connection, source: str, actor: str, since: date | None = None
) -> LoadedRates:
    """Read ``source`` (a rates file or folder, or ``ecb``), keep the rates from ``since``,
    and store them as one load (inside the caller's write transaction)."""
    rates = read_rates([source])
    if since is not None:
        rates = rates.loc[rates["date"].dt.date >= since].reset_index(drop=True)
    if rates.empty:
        raise InputError("no rates to load" + (f" from {since}" if since else ""), file=source)
    digest = _digest(rates)
    currencies = sorted(set(rates["base"]) | set(rates["quote"]))
    first, last = rates["date"].min().date(), rates["date"].max().date()
    load = table(FxLoad).c
    known = connection.execute(select(load.id).where(load.sha256 == digest).limit(1)).scalar()
    if known is not None:
        return LoadedRates(int(known), digest, len(rates), first, last, currencies, True)
    origin = ecb_label() if source == ECB else source
    inserted = connection.execute(
        insert(table(FxLoad)).values(
            sha256=digest,
            origin=origin,
            rates=len(rates),
            first_date=first,
            last_date=last,
            loaded_at=utcnow(),
            actor=actor,
        )
    ).inserted_primary_key
    assert inserted is not None
    load_id = int(inserted[0])
    rows = pd.DataFrame(
        {
            "load_id": load_id,
            "published_on": rates["date"].dt.date,
            "base": rates["base"],
            "quote": rates["quote"],
            "rate": rates["rate"],
            "source": rates["source"],
        }
    )
    connection.execute(insert(table(FxRate)), rows.to_dict("records"))
    return LoadedRates(load_id, digest, len(rates), first, last, currencies, False)


def stored_rates(bind: Engine | Connection) -> pd.DataFrame:
    """Every stored rate, later loads winning for the same (date, base, quote), as the
    reader's table (``origin``: the load)."""
    rate = table(FxRate).c
    with connected(bind) as connection:
        frame = result_frame(connection.execute(select(table(FxRate)).order_by(rate.load_id)))
    if frame.empty:
        return empty_rates()
    frame = frame.assign(
        date=pd.to_datetime(frame["published_on"]),
        origin="fx load " + frame["load_id"].astype("str"),
    )
    typed = frame[RATE_COLUMNS].astype({c: "str" for c in RATE_COLUMNS if c != "date"})
    return merge_rates([typed])
