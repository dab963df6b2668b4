"""What ``tenantcost watch --notify`` tells whom: the alerts of one watch answer (pure).

:func:`alerts` reads a watch document (the JSON contract of ``watch --format json``,
:mod:`tenantcost.watch`), the client catalog and the ``alerts:`` settings
(:class:`~tenantcost.config.watch.AlertSettings`) and lists the alerts, each with its stable
key, its routed destinations and its payload. Sending them, once, is the store's side
(:mod:`tenantcost.store.notify`); this module neither sends nor remembers, so the same
document always gives the same alerts.

The rules:

* **What is an alert.** Each anomaly of the document (kind ``anomaly``), and each client whose
  status is ``above`` its budget band, or ``below`` it when ``notify_below`` is set (kind
  ``status``). "New" is decided by the store: an alert already delivered to a destination is
  not delivered to it again.
* **Stable keys.** An anomaly's key is its id (client, source, day and kind:
  :func:`tenantcost.watch.anomaly_id`); a status alert's is :func:`status_key` of month,
  client and status. So a client that goes above, back within and above again in one month is
  told once, and an hourly CronJob never repeats itself.
* **Routing.** A client's alerts go to the destinations of every route that matches it: by
  client list, or by a catalog column's value (compared as text; a client missing from the
  catalog matches no column route). ``catch_all`` destinations receive every alert; nobody
  does unless configured. A route by column without a catalog, or naming a column the
  catalog lacks, is a settings mistake (one line, exit 2), not a silent "nobody is told".
* **Privacy.** A payload is built from its own client's object and its own client's anomaly
  only: never another client's name or figure (tests/test_alerts.py checks every payload of
  a many-client document). The document's month-level warnings are not copied: a month-level
  warning has no client, but its ``detail`` is free text and could name one.

Routing is one ``isin`` per route over the alerts' clients (a handful of routes), never a
Python loop per client of the month; a payload is built per alert, which is also the unit a
webhook receives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pandas as pd

from tenantcost.config.watch import AlertSettings, Route
from tenantcost.errors import InputError
from tenantcost.money import format_amount
from tenantcost.watch import BudgetStatus

CATALOG_INTERNAL = frozenset({"row"})
"""Catalog frame columns that are tenantcost's own bookkeeping, not something to route by."""


class AlertKind(StrEnum):
    """What an alert is about."""

    ANOMALY = "anomaly"
    """One flagged day of one client's source."""
    STATUS = "status"
    """A client's projected month outside its budget band."""


@dataclass(frozen=True)
class Alert:
    """One alert: its stable key, its client, where it goes and what it says."""

    key: str
    kind: AlertKind
    client: str
    destinations: tuple[str, ...]
    """Destination names (settings' ``alerts.destinations``), sorted; empty: nobody is told."""
    payload: dict[str, Any]
    """The JSON object a webhook receives (also the e-mail's body): its own client only."""


def status_key(month: str, client: str, status: BudgetStatus | str) -> str:
    """The stable key of a status alert: the same month, client and status give the same key
    on every run (and never an anomaly's: its last part is a status, not spike/drop)."""
    text = "\x1f".join(("status", month, client, str(status)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def alerts(
    document: Mapping[str, Any],
    catalog: pd.DataFrame | None,
    settings: AlertSettings,
) -> list[Alert]:
    """The document's alerts (anomalies first, in the document's order, then status alerts in
    client order), routed and with their payloads."""
    clients = {str(c["client"]): c for c in document.get("clients", [])}
    names = _catalog_names(catalog)
    found: list[tuple[str, AlertKind, str, dict[str, Any]]] = []
    for anomaly in document.get("anomalies", []):
        client = str(anomaly["client"])
        body = _anomaly_payload(document, clients.get(client), anomaly, names.get(client))
        found.append((str(anomaly["id"]), AlertKind.ANOMALY, client, body))
    for client in sorted(clients):
        entry = clients[client]
        if _alerting(entry.get("status"), settings):
            key = status_key(str(document["month"]), client, str(entry["status"]))
            found.append((key, AlertKind.STATUS, client,
                          _status_payload(document, entry, key, names.get(client))))  # fmt: skip
    routed = route([client for _, _, client, _ in found], catalog, settings)
    return [
        Alert(key, kind, client, to, body)
        for (key, kind, client, body), to in zip(found, routed, strict=True)
    ]


def _alerting(status: object, settings: AlertSettings) -> bool:
    if status == BudgetStatus.ABOVE:
        return True
    return settings.notify_below and status == BudgetStatus.BELOW


def route(
    clients: Sequence[str], catalog: pd.DataFrame | None, settings: AlertSettings
) -> list[tuple[str, ...]]:
    """Each client's destinations (sorted names), in the order given: every matching route's
    ``to`` plus ``catch_all``."""
    frame = pd.DataFrame({"client": pd.Series(list(clients), dtype="str")})
    targets: list[set[str]] = [set(settings.catch_all) for _ in range(len(frame))]
    for index, each in enumerate(settings.routes):
        matches = _matches(frame["client"], each, index, catalog)
        for position in matches.to_numpy().nonzero()[0]:
            targets[position].update(each.to)
    return [tuple(sorted(t)) for t in targets]


def _matches(
    clients: pd.Series, each: Route, index: int, catalog: pd.DataFrame | None
) -> pd.Series:
    """Which of ``clients`` route ``each`` (``alerts.routes[index]``) matches."""
    if each.clients is not None:
        return clients.isin(each.clients)
    column, value = str(each.column), str(each.value)
    where = f"alerts.routes[{index}]"
    if catalog is None:
        raise InputError(
            f"{where} routes by the catalog column '{column}', but the store has no client "
            "catalog: `tenantcost catalog load FILE` first, or route by `clients`"
        )
    usable = [c for c in catalog.columns if c not in CATALOG_INTERNAL]
    if column not in usable:
        raise InputError(
            f"{where}: the client catalog has no column '{column}' (it has {', '.join(usable)})"
        )
    chosen = catalog.loc[catalog[column].astype("str") == value, "client"].astype("str")
    return clients.isin(chosen)


def _catalog_names(catalog: pd.DataFrame | None) -> dict[str, str]:
    """Client -> its catalog name (the alert names its own client the way people know it)."""
    if catalog is None or "name" not in catalog.columns or catalog.empty:
        return {}
    named = catalog.loc[catalog["name"].astype("str").str.len() > 0, ["client", "name"]]
    return dict(zip(named["client"].astype("str"), named["name"].astype("str"), strict=True))


def _client_figures(entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """The client's own month figures of the document (None where it has no object)."""
    if entry is None:
        return {"status": None, "month_to_date": None, "projected": None, "budget": None}
    budget = entry.get("budget")
    return {
        "status": entry.get("status"),
        "month_to_date": entry.get("month_to_date"),
        "projected": entry.get("projected"),
        "budget": None if budget is None else {k: budget.get(k) for k in (
            "low", "expected", "high", "currency", "projected") if k in budget},
    }  # fmt: skip


def _head(document: Mapping[str, Any], key: str, kind: AlertKind, client: str,
          name: str | None) -> dict[str, Any]:  # fmt: skip
    return {
        "id": key,
        "type": str(kind),
        "month": document["month"],
        "as_of": document["as_of"],
        "money": dict(document["money"]),
        "client": client,
        "client_name": name,
        "label": "month to date, not issued",
    }


def _anomaly_payload(
    document: Mapping[str, Any],
    entry: Mapping[str, Any] | None,
    anomaly: Mapping[str, Any],
    name: str | None,
) -> dict[str, Any]:
    fields = ("id", "source", "day", "amount", "baseline", "score", "kind")
    found = {k: anomaly.get(k) for k in fields}
    client = str(anomaly["client"])
    body = _head(document, str(anomaly["id"]), AlertKind.ANOMALY, client, name)
    body.update(_client_figures(entry), anomaly=found)
    currency = str(document["money"]["currency"])
    body["summary"] = (
        f"{name or client} ({document['month']}): {found['kind']} in {found['source']} on "
        f"{found['day']}: {_money(found['amount'], currency)} against a baseline of "
        f"{_money(found['baseline'], currency)} (score {found['score']})"
    )
    return body


def _status_payload(
    document: Mapping[str, Any], entry: Mapping[str, Any], key: str, name: str | None
) -> dict[str, Any]:
    client = str(entry["client"])
    body = _head(document, key, AlertKind.STATUS, client, name)
    figures = _client_figures(entry)
    body.update(figures, anomaly=None)
    currency = str(document["money"]["currency"])
    band = figures["budget"] or {}
    own = str(band.get("currency") or currency)  # a band in the client's currency: in it
    projected = _money(figures["projected"], currency)
    if own != currency:
        projected = f"{_money(band.get('projected'), own)} ({projected} at the month's rates)"
    body["summary"] = (
        f"{name or client} ({document['month']}): projected "
        f"{projected} is {figures['status']} the budget band "
        f"{_money(band.get('low'), own)} to {_money(band.get('high'), own)} "
        f"(month to date {_money(figures['month_to_date'], currency)} as of "
        f"{document['as_of']}, not issued)"
    )
    return body


def _money(micros: Any, currency: str) -> str:
    if micros is None:
        return "n/a"
    return f"{format_amount(int(micros))} {currency}"
