"""``GET /api/v1/months/{M}/movers`` and the month page's "Top movers": read from the store.

The figures compared are the ones the month's other surfaces show: this month's run as
:func:`tenantcost.service.figures.month_source` gives it to the viewer (issued revision, or a
draft for finance and admin) against the previous calendar month's **latest issued revision**,
the comparison of the client page's bridge (:mod:`tenantcost.store.month_bridge`). Ordering
and main parts are :mod:`tenantcost.movers`' (pure).

* Both months' client totals come from one grouped query over ``run_client``, restricted in
  SQL to the viewer's clients (:func:`~tenantcost.service.permissions.client_scope`): an
  account manager's movers are among its own clients only, so no other client's id, name or
  figure can reach it (the exception to the month routes' cluster-wide 403 is
  :attr:`~tenantcost.service.permissions.Action.VIEW_MOVERS`).
* The main parts come from the month's cached bridge (computed once per pair of runs, by
  ``close`` and ``run``, or else by the first reader), read for the chosen clients only.
* Without an issued previous month there is nothing to compare with: ``previous_month`` is
  ``null`` and both lists are empty.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Engine, case, func, select

from tenantcost.money import micros_to_decimal_string
from tenantcost.movers import PART_COLUMNS, Movers, movers
from tenantcost.service.figures import MonthSource, month_source, reader_text
from tenantcost.service.permissions import Principal, client_scope
from tenantcost.store.data import DataDir
from tenantcost.store.models import MonthBridgePart, Run, RunClient, table
from tenantcost.store.month_bridge import Previous, compute_bridge, ensure_bridge, previous_issued

DEFAULT_LIMIT = 10
MAX_LIMIT = 500
CSV_COLUMNS = ["direction", "client", "name", "previous_amount", "amount", "change",
               "change_pct", "main_part", "main_source", "main_amount"]  # fmt: skip
CSV_AMOUNTS = ["previous_amount", "amount", "change", "main_amount"]


class MonthMovers:
    """A month's movers as one viewer may see them."""

    def __init__(
        self,
        source: MonthSource,
        previous: Previous | None,
        currency: str,
        chosen: Movers | None,
        names: dict[str, str],
        redact: dict[str, Any],
    ) -> None:
        self.source, self.previous, self.currency = source, previous, currency
        self.chosen, self.names, self._redact = chosen, names, redact

    def _items(self, frame: pd.DataFrame) -> list[dict[str, Any]]:
        out = []
        for row in frame.to_dict("records"):  # at most ``limit`` rows
            client = str(row["client"])
            source = row["main_source"]
            part = None
            if isinstance(row["main_part"], str):
                part = {
                    "part": row["main_part"],
                    "source": None if not isinstance(source, str) else self._redact[client](source),
                    "amount": None if pd.isna(row["main_amount"]) else int(row["main_amount"]),
                }
            pct = row["change_pct"]
            out.append({
                "client": client,
                "name": self.names.get(client),
                "previous_amount": int(row["previous_amount"]),
                "amount": int(row["amount"]),
                "change": int(row["change"]),
                "change_pct": None if pd.isna(pct) else float(pct),
                "main_part": part,
            })  # fmt: skip
        return out

    def document(self) -> dict[str, Any]:
        from tenantcost.money import money_header

        up = self._items(self.chosen.increases) if self.chosen else []
        down = self._items(self.chosen.decreases) if self.chosen else []
        return {
            "month": self.source.month,
            "status": str(self.source.status),
            "revision": self.source.revision,
            "previous_month": None if self.previous is None else self.previous.month,
            "previous_revision": None if self.previous is None else self.previous.revision,
            "money": money_header(self.currency),
            "increases": up,
            "decreases": down,
        }

    def frame(self) -> pd.DataFrame:
        """The CSV's rows: increases then decreases, ``main_part`` flattened."""
        doc = self.document()
        rows = []
        for direction in ("increases", "decreases"):
            for item in doc[direction]:  # at most 2 x limit
                part = item["main_part"] or {}
                rows.append({
                    "direction": direction.removesuffix("s"),
                    **{k: item[k] for k in CSV_COLUMNS[1:7]},
                    "main_part": part.get("part"),
                    "main_source": part.get("source"),
                    "main_amount": part.get("amount"),
                })  # fmt: skip
        frame = pd.DataFrame(rows, columns=CSV_COLUMNS)
        return frame.astype({c: "Int64" for c in CSV_AMOUNTS})


def month_movers(
    engine: Engine, principal: Principal, month: str, limit: int, data: DataDir | None = None
) -> MonthMovers | None:
    """The movers of ``month`` (``None``: no figure of the month the viewer may see). For
    finance and admin (every client) they are kept per store generation: the month page
    and the movers routes read them on every request (90 ms of pandas each, 0.4 s at p95
    under 8 readers). Shared between requests: do not mutate."""
    if client_scope(principal) is not None:  # an account manager's own clients
        return _month_movers(engine, principal, month, limit, data)
    from tenantcost.service.memo import remembered

    where = None if data is None else str(data.root)
    return remembered(engine, "month_movers", (month, limit, str(principal.role), where),
                      lambda: _month_movers(engine, principal, month, limit, data))  # fmt: skip


def _month_movers(
    engine: Engine, principal: Principal, month: str, limit: int, data: DataDir | None
) -> MonthMovers | None:
    from tenantcost.store.catalog import names_of

    source = month_source(engine, principal, month)
    if source is None:
        return None
    with engine.connect() as conn:
        query = select(table(Run).c.currency).where(table(Run).c.id == source.run_id)
        currency = str(conn.execute(query).scalar_one())
    previous = previous_issued(engine, month)
    if previous is None:
        return MonthMovers(source, None, currency, None, {}, {})
    amounts = _amounts(engine, principal, source.run_id, previous.run_id)
    up, down = _rank(amounts, limit)
    clients = sorted(set(up) | set(down))
    parts = _parts(engine, source.run_id, previous, clients, data)
    chosen = movers(amounts, parts, limit)
    redact = {c: reader_text(engine, principal, c) for c in clients}  # at most 2 x limit
    return MonthMovers(source, previous, currency, chosen, names_of(engine, clients), redact)


def _rank(amounts: pd.DataFrame, limit: int) -> tuple[list[str], list[str]]:
    from tenantcost.movers import rank

    up, down = rank(amounts, limit)
    return up["client"].tolist(), down["client"].tolist()


def _amounts(engine: Engine, principal: Principal, run_id: str, previous: str) -> pd.DataFrame:
    """Every client of either run (in the viewer's scope): ``client, previous_amount,
    amount`` (NULL: no figure that month), one grouped query."""
    rc = table(RunClient).c
    query = (
        select(
            rc.client,
            func.max(case((rc.run_id == previous, rc.amount))).label("previous_amount"),
            func.max(case((rc.run_id == run_id, rc.amount))).label("amount"),
        )
        .where(rc.run_id.in_([run_id, previous]))
        .group_by(rc.client)
    )
    scope = client_scope(principal)
    if scope is not None:
        query = query.where(rc.client.in_(sorted(scope)))
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=["client", "previous_amount", "amount"])
    return frame.astype({"client": str, "previous_amount": "Int64", "amount": "Int64"})


def _parts(
    engine: Engine, run_id: str, previous: Previous, clients: list[str], data: DataDir | None
) -> pd.DataFrame:
    """The bridge's parts of ``clients`` (canonical order): ``client, part, source, amount``."""
    if not clients:
        return pd.DataFrame(columns=PART_COLUMNS)
    bridge_id = ensure_bridge(engine, run_id, previous, data)
    if bridge_id is None:  # a part beyond 64 bits: not stored, computed again
        pb = compute_bridge(engine, run_id, previous, data)[0]
        if pb is None:
            return pd.DataFrame(columns=PART_COLUMNS)
        found = pb.parts.loc[pb.parts["client"].isin(clients)]
        return pd.DataFrame({"client": found["client"], "part": found["effect"].astype(str),
                             "source": found["source"], "amount": found["amount"]})  # fmt: skip
    p = table(MonthBridgePart).c
    query = (
        select(p.client, p.effect, p.source, p.amount)
        .where(p.bridge_id == bridge_id, p.client.in_(clients))
        .order_by(p.position)
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=PART_COLUMNS)
    return frame.astype({"client": str, "part": str, "source": str, "amount": "int64"})


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MonthMovers", "month_movers"]


# --------------------------------------------------------------------------- the month page


class MoverRow:
    """One row of the month page's top movers table (amounts as exact decimals)."""

    def __init__(self, item: dict[str, Any]) -> None:
        from tenantcost.service.urls import client_href

        self.client, self.name = str(item["client"]), item["name"]
        self.href = client_href(self.client)
        self.previous = micros_to_decimal_string(item["previous_amount"])
        self.amount = micros_to_decimal_string(item["amount"])
        change = micros_to_decimal_string(item["change"])
        self.change = change if change.startswith("-") else "+" + change
        pct = item["change_pct"]
        self.pct = "new" if pct is None else f"{pct * 100:+.1f} %"
        part = item["main_part"] or {}
        words = {"new_client": "new client", "ended_client": "ended client",
                 "new_source": "new service", "ended_source": "ended service"}  # fmt: skip
        label = words.get(str(part.get("part")), str(part.get("part") or ""))
        self.main = f"{label}: {part['source']}" if part.get("source") else label


def movers_section(found: MonthMovers | None, month: str) -> dict[str, Any] | None:
    """The month page's "Top movers" (5 of each direction), or ``None``."""
    if found is None or found.previous is None:
        return None
    doc = found.document()
    return {
        "month": month,
        "previous_month": doc["previous_month"],
        "currency": found.currency,
        "increases": [MoverRow(i) for i in doc["increases"]],
        "decreases": [MoverRow(i) for i in doc["decreases"]],
        "csv_href": f"/api/v1/months/{month}/movers?limit={MAX_LIMIT}&format=csv",
    }
