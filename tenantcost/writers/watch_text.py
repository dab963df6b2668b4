"""``tenantcost watch --format table``: the watch document as plain-text tables.

The table shows what the JSON holds, nothing computed anew (the JSON is the contract; this is
its reading for a terminal): the clients' month to date and projection against their band,
then the anomalies, rule changes and warnings, each exact to the micro-unit.
"""

from __future__ import annotations

from typing import Any

from tenantcost.writers.text import money, render_table


def approximate(rate: str) -> str:
    """A watch's exact rate text (``4228234175/4577027364``, maybe ``(provisional)``) as
    people read it: ``≈0.923795``; the JSON keeps the exact fraction."""
    from fractions import Fraction

    exact, _, note = rate.partition(" ")
    return f"≈{float(Fraction(exact)):.6f}" + (f" {note}" if note else "")


def _band(budget: dict[str, Any] | None, currency: str) -> str:
    """The band; one in the client's own currency names it, with the projection in it (what
    the status compares)."""
    if budget is None:
        return "-"
    text = f"{money(budget['low'])} .. {money(budget['high'])}"
    own = budget.get("currency", currency)
    if own == currency:
        return text
    projected = f"{money(budget['projected'])} {own}"
    return f"{text} {own} (projected {projected} at {approximate(budget['rate'])})"


def watch_table(document: dict[str, Any]) -> str:
    """Every part of ``document`` that has entries, under a header naming month and as_of."""
    currency = document["money"]["currency"]
    parts = [f"watch {document['month']} as of {document['as_of']} (month to date, not "
             f"issued; {currency})"]  # fmt: skip
    clients = document["clients"]
    if clients:
        rows = [[c["client"], money(c["month_to_date"]), money(c["projected"]),
                 _band(c["budget"], currency), c["status"]] for c in clients]  # fmt: skip
        headers = ["client", "month to date", "projected", "budget low .. high", "status"]
        parts.append(render_table(headers, rows, right={1, 2}))
    anomalies = document["anomalies"]
    if anomalies:
        rows = [[a["client"], a["source"], a["day"], a["kind"], money(a["amount"]),
                 money(a["baseline"]), f"{a['score']:.2f}", a["id"]]
                for a in anomalies]  # fmt: skip
        headers = ["client", "source", "day", "kind", "amount", "baseline", "score", "id"]
        parts.append("anomalies\n" + render_table(headers, rows, right={4, 5, 6}))
    changes = document["rule_changes"]
    if changes:
        rows = [[r["day"], r["rule_id"], r["client"], money(r["effect"])] for r in changes]
        parts.append("rule changes\n" + render_table(["day", "rule", "client", "effect"], rows,
                                                     right={3}))  # fmt: skip
    warnings = document["warnings"]
    if warnings:
        rows = [[w["day"], w["kind"], w["client"] or "-", w["detail"]] for w in warnings]
        parts.append("warnings\n" + render_table(["day", "kind", "client", "detail"], rows,
                                                 right=set()))  # fmt: skip
    if not (anomalies or changes or warnings):
        parts.append("no anomalies, rule changes or warnings")
    return "\n\n".join(parts)
