"""``tenantcost history``: every issued revision of every client's statement.

Only issued revisions appear (a month never closed shows nothing; a reopened month keeps its
revisions). A revision is ``issued`` while it is the client's latest one for the month and
``superseded`` once a later close issued another. Amounts are micro-units, the minor unit of
``allocate --format json``; ``issued_at`` is RFC 3339 UTC with ``Z``. The order is fixed
(month, client, revision) so two calls on the same store print the same bytes.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, func, select

from tenantcost.csv_cells import neutralised
from tenantcost.store.connection import connected, result_frame
from tenantcost.store.models import Statement, table
from tenantcost.timefmt import iso_z

FIELDS = ("client", "month", "revision", "status", "amount", "reason", "rule_ids", "run_id",
          "issued_at", "issued_by", "currency", "ledger_amount", "ledger_currency")  # fmt: skip
"""The JSON contract's fields, in order (CSV columns too); the last three came with
currencies (issue 37): ``amount`` is in ``currency``, the issued figure is ``ledger_amount``."""


class HistoryStatus(StrEnum):
    """Whether a revision is the one in force for its client and month."""

    ISSUED = "issued"
    SUPERSEDED = "superseded"


@dataclass(frozen=True)
class HistoryEntry:
    """One issued revision of a client's statement (amounts in micro-units)."""

    client: str
    month: str
    revision: int
    status: HistoryStatus
    amount: int
    previous_amount: int | None
    difference: int
    currency: str
    reason: str | None
    rule_ids: list[str]
    run_id: str
    incomplete: bool
    issued_at: datetime
    issued_by: str
    client_reason: str | None = None
    """What clients' readers are told instead of ``reason`` (not in the CLI's contract: the
    service adds it for finance, :func:`tenantcost.service.figures.client_history`)."""
    ledger_amount: int | None = None
    """The issued (ledger) amount when ``amount`` is converted (:func:`converted`), else
    ``None``: ``amount`` is then the ledger amount itself."""
    ledger_currency: str | None = None

    def document(self) -> dict[str, Any]:
        """The JSON contract's object, with the currency and the ledger amount (the amount
        itself when not converted) after the contract's fields."""
        return {
            "client": self.client, "month": self.month, "revision": self.revision,
            "status": str(self.status), "amount": self.amount, "reason": self.reason,
            "rule_ids": self.rule_ids, "run_id": self.run_id,
            "issued_at": iso_z(self.issued_at), "issued_by": self.issued_by,
            "currency": self.currency,
            "ledger_amount": self.amount if self.ledger_amount is None else self.ledger_amount,
            "ledger_currency": self.ledger_currency or self.currency,
        }  # fmt: skip


def history(
    bind: Connection | Engine, client: str | None = None, month: str | None = None
) -> list[HistoryEntry]:
    """The issued revisions, optionally of one client and/or one month, by (month, client,
    revision); ``status`` from each (client, month)'s latest revision, in SQL."""
    s = table(Statement).c
    latest = (
        select(s.month, s.client, func.max(s.revision).label("latest"))
        .group_by(s.month, s.client)
        .subquery()
    )
    query = select(table(Statement), latest.c.latest).join(
        latest, (latest.c.month == s.month) & (latest.c.client == s.client)
    )
    if client is not None:
        query = query.where(s.client == client)
    if month is not None:
        query = query.where(s.month == month)
    query = query.order_by(s.month, s.client, s.revision)
    with connected(bind) as connection:
        result = connection.execute(query)
        frame = result_frame(result)
    if frame.empty:
        return []
    frame["status"] = (frame["revision"] == frame["latest"]).map(
        {True: HistoryStatus.ISSUED, False: HistoryStatus.SUPERSEDED}
    )
    frame["rule_ids"] = frame["rule_ids"].map(json.loads)
    frame["previous_amount"] = frame["previous_amount"].astype("Int64")
    frame["incomplete"] = frame["incomplete"].astype(bool)
    names = [f for f in HistoryEntry.__dataclass_fields__ if f in frame]
    fields = frame[names].astype(object)
    fields = fields.where(fields.notna(), None)  # SQL NULL → None, not NaN
    return [HistoryEntry(**row) for row in fields.to_dict("records")]


def converted(
    bind: Connection | Engine, entries: list[HistoryEntry], currency: str
) -> list[HistoryEntry]:
    """``entries`` shown in ``currency``: each revision at the conversion its run recorded
    (:mod:`tenantcost.store.run_fx`), frozen with it, so loading rates later changes nothing
    shown here. The difference is against the previous revision's own conversion. A revision
    whose run has no conversion into ``currency`` (issued before the currency was shown)
    stays in its ledger currency, as its ``currency`` says."""
    from dataclasses import replace

    from tenantcost.store.run_fx import client_conversions

    shown = client_conversions(bind, sorted({e.run_id for e in entries}), currency)
    found = {(r, c): int(a) for r, c, a in zip(shown["run_id"], shown["client"], shown["amount"],
                                                strict=True)}  # fmt: skip

    def amount_of(e: HistoryEntry) -> int | None:
        return e.amount if e.currency == currency else found.get((e.run_id, e.client))

    # a month's revisions of a client are shown in one currency: all converted, or none
    whole = {(e.month, e.client) for e in entries}
    whole -= {(e.month, e.client) for e in entries if amount_of(e) is None}
    out: list[HistoryEntry] = []
    before: dict[tuple[str, str], int] = {}
    for e in entries:  # by month, client, revision: the previous revision comes first
        amount = amount_of(e)
        if (e.month, e.client) not in whole or amount is None or e.currency == currency:
            out.append(e)
            continue
        previous = before.get((e.month, e.client))
        difference = amount - previous if previous is not None else amount
        before[(e.month, e.client)] = amount
        out.append(replace(e, amount=amount, previous_amount=previous, difference=difference,
                           currency=currency, ledger_amount=e.amount,
                           ledger_currency=e.currency))  # fmt: skip
    return out


def history_document(entries: list[HistoryEntry]) -> list[dict[str, Any]]:
    """``history --format json``: a list of the contract's objects."""
    return [entry.document() for entry in entries]


def history_csv(entries: list[HistoryEntry]) -> str:
    """``history --format csv``: the JSON fields as columns; ``rule_ids`` joined with ``;``;
    text cells neutralised for spreadsheets (:mod:`tenantcost.csv_cells`)."""
    frame = pd.DataFrame(history_document(entries), columns=list(FIELDS))
    frame["rule_ids"] = frame["rule_ids"].map(";".join)
    out = io.StringIO()
    neutralised(frame).to_csv(out, index=False, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    return out.getvalue()


def _signed(micros: int) -> str:
    from tenantcost.writers.text import money

    return f"+{money(micros)}" if micros > 0 else money(micros)


def history_table(entries: list[HistoryEntry]) -> str:
    """``history`` as a text table: amounts with all six decimals, the difference against
    the previous revision, whether the month's hours were all covered when issued, the
    reason."""
    from tenantcost.writers.text import money, render_table

    if not entries:
        return "(no issued statements)"
    header = ["month", "client", "rev", "status", "amount", "difference", "currency", "hours",
              "issued at", "by", "reason"]  # fmt: skip
    ledger = any(e.ledger_amount is not None for e in entries)
    if ledger:
        header[7:7] = ["ledger amount", "ledger"]
    rows = [
        [e.month, e.client, str(e.revision), str(e.status), money(e.amount),
         "-" if e.revision == 1 else _signed(e.difference), e.currency,
         *([money(e.amount if e.ledger_amount is None else e.ledger_amount),
            e.ledger_currency or e.currency] if ledger else []),
         "incomplete" if e.incomplete else "complete",
         iso_z(e.issued_at.replace(microsecond=0)), e.issued_by, e.reason or "-"]
        for e in entries
    ]  # fmt: skip
    return render_table(header, rows, {2, 4, 5, 7} if ledger else {2, 4, 5})


__all__ = [
    "FIELDS",
    "HistoryEntry",
    "HistoryStatus",
    "converted",
    "history",
    "history_csv",
    "history_document",
    "history_table",
]
