"""The invoice cascade and the repricing as people read them: finance's tables, a client's note.

A run on billing data carries its invoice cascade as the ``invoice`` JSON object
(:meth:`tenantcost.invoice.Invoice.to_json`, ``AllocationResult.invoice``; the store keeps the
same object with a run). Every surface reads that one object, so the finance summary, the web
month page and ``reconcile --against invoice`` cannot disagree:

* :func:`invoice_view` (finance and admin only): every line of the cascade with its part, the
  effective cost in scope, the invoices, the billed total and the gap, and the repricing per
  cluster (OpenCost's estimate, what was billed, their ratio), estimates marked;
* :func:`billing_basis` (a client's sheet): only that the figures are at billed effective
  (amortized) rates and the ids of the invoices they reconcile to. Invoice totals and the
  cascade are company-level, but the cascade's parts (the clients' sum, outside lines) minus a
  reader's own total would tell other clients' figures, so a client's sheet never shows them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tenantcost.money import round_for_display
from tenantcost.report.display import format_amount, format_units

IN_SCOPE_END = ("outside", "bridge")
"""The parts that follow the effective cost in scope (the walk from it to the invoice)."""
NO_INVOICE_ID = "(no invoice id)"
"""The reader's id for the total of data without ``InvoiceId`` (FOCUS before 1.2)."""

PART_DETAIL = {
    "clients": "every client's lines",
    "unattributed": "cost meant for clients that no client carries",
    "idle": "idle capacity left on its own line",
    "overhead": "shared operation, charged to no client",
    "reserve": "capacity kept free",
    "excluded": "outside the client perimeter",
    "unclassified": "billed or cost rows no entry matched",
    "external": "the rule file's external costs: in the statements, not on this invoice",
    "estimate": "OpenCost's estimate for hours not billed yet (--allow-unbilled): not on "
    "this invoice",
    "unseen": "billed cluster cost in hours OpenCost did not see",
    "outside": "billed, not this SaaS's cost (its billed cost)",
    "no cost data": "billed for hours without cost data, charged to no client (no external "
    "cost there)",
}
BRIDGE_DETAIL = {
    "outside the period": "billed for hours outside the allocation period",
    "rounding": "each billed group rounded once to micro-units",
}


@dataclass(frozen=True)
class InvoiceRow:
    part: str
    name: str
    detail: str
    amount: str
    subtotal: bool = False
    """The effective cost in scope (a subtotal row, not a part)."""


@dataclass(frozen=True)
class RepricingRow:
    cluster: str
    periods: int
    start: str
    end: str
    opencost: str
    billed: str
    ratio: str
    estimate: bool
    """OpenCost's figure kept for periods without billed lines (``--allow-unbilled``)."""


@dataclass(frozen=True)
class InvoiceView:
    """The invoice cascade and the repricing, formatted (finance's surfaces)."""

    currency: str
    rows: list[InvoiceRow]
    effective_in_scope: str
    invoices: list[tuple[str, str]]
    billed_total: str
    gap: str
    closes: bool
    repricing: list[RepricingRow]
    repricing_total: RepricingRow | None
    opencost_estimate: str
    estimates: bool
    """Some period kept OpenCost's estimate: the statements are not final."""


def _detail(part: str, name: str, line: Mapping[str, Any], places: int) -> str:
    if part == "bridge":
        return BRIDGE_DETAIL.get(name, "billed − effective (commitments bought, used, unused)")
    if line.get("hours") is not None:  # billed without cost data: its hours, the clients' part
        hours = int(line["hours"])
        to_clients = format_amount(int(line.get("to_clients", 0)), places)
        return (
            f"billed for {hours} {'hour' if hours == 1 else 'hours'} without cost data, "
            f"charged to no client (the clients, on their line, were charged {to_clients} in "
            "those hours); no external cost there"
        )
    return PART_DETAIL.get(part, "")


def _rows(invoice: Mapping[str, Any], places: int) -> list[InvoiceRow]:
    """The lines, rounded together so the shown parts add up (largest remainder), and the
    effective cost in scope after the last part in scope: the sum of the parts shown above
    it, so the page adds up from the allocation to the invoice."""
    lines = list(invoice["lines"])
    units = round_for_display([int(ln["amount"]) for ln in lines], places)
    scope_end = max(
        (i for i, ln in enumerate(lines) if str(ln["part"]) not in IN_SCOPE_END), default=-1
    )
    rows: list[InvoiceRow] = []
    for i, (line, unit) in enumerate(zip(lines, units, strict=True)):
        part, name = str(line["part"]), str(line["name"])
        detail = _detail(part, name, line, places)
        rows.append(InvoiceRow(part, name, detail, format_units(unit, places)))
        if i == scope_end:
            subtotal = format_units(sum(units[: i + 1]), places)
            rows.append(InvoiceRow("=", "effective cost in scope", "", subtotal, True))
    return rows


def _ratio(billed: int, opencost: int) -> str:
    return f"{billed / opencost:.4f}" if opencost else "-"


def _repricing(
    invoice: Mapping[str, Any], places: int
) -> tuple[list[RepricingRow], RepricingRow | None]:
    """Per cluster: its billed periods (OpenCost's figure, what was billed, the ratio) and,
    apart, its periods at OpenCost's estimate (no billed figure, no ratio)."""
    groups: dict[tuple[str, bool], list[Mapping[str, Any]]] = {}
    for r in invoice.get("repricing", []):  # one per cluster and period: summed, not shown
        groups.setdefault((str(r["cluster"]), bool(r["estimate"])), []).append(r)
    rows = []
    for (cluster, estimate), periods in sorted(groups.items()):
        o = sum(int(p["opencost"]) for p in periods)
        b = sum(int(p["billed_effective"]) for p in periods)
        rows.append(
            RepricingRow(
                cluster=cluster or '"" (rows without a cluster)',
                periods=len(periods),
                start=min(str(p["period_start"]) for p in periods),
                end=max(str(p["period_end"]) for p in periods),
                opencost=format_amount(o, places),
                billed="-" if estimate else format_amount(b, places),
                ratio="-" if estimate else _ratio(b, o),
                estimate=estimate,
            )
        )
    billed = [p for (_, est), ps in groups.items() if not est for p in ps]
    if len(groups) < 2 or not billed:
        return rows, None
    o = sum(int(p["opencost"]) for p in billed)
    b = sum(int(p["billed_effective"]) for p in billed)
    total = RepricingRow(
        "all clusters, billed periods",
        len(billed),
        min(str(p["period_start"]) for p in billed),
        max(str(p["period_end"]) for p in billed),
        format_amount(o, places),
        format_amount(b, places),
        _ratio(b, o),
        False,
    )
    return rows, total


def invoice_view(invoice: Mapping[str, Any] | None, places: int) -> InvoiceView | None:
    """Finance's tables of the ``invoice`` object; ``None`` for a run without billing data."""
    if not invoice:
        return None
    repricing, total = _repricing(invoice, places)
    gap = int(invoice["gap"])
    return InvoiceView(
        currency=str(invoice["currency"]),
        rows=_rows(invoice, places),
        effective_in_scope=format_amount(int(invoice["effective_in_scope"]), places),
        invoices=[
            (str(i["id"]), format_amount(int(i["billed_total"]), places))
            for i in invoice["invoices"]
        ],
        billed_total=format_amount(int(invoice["billed_total"]), places),
        gap=format_amount(gap, places),
        closes=gap == 0,
        repricing=repricing,
        repricing_total=total,
        opencost_estimate=format_amount(int(invoice.get("opencost_estimate", 0)), places),
        estimates=any(r.estimate for r in repricing),
    )


@dataclass(frozen=True)
class BillingBasis:
    """What a client's sheet says of a run on billing data: the rate basis and the invoice
    ids, no figure of the cascade."""

    rates: str
    invoices: str
    text: str
    estimate: str = ""
    """Why part of the figures are OpenCost's estimate (periods not billed yet); else empty."""


def invoice_ids_text(ids: list[str]) -> str:
    """``invoice INV-1``, ``invoices INV-1, INV-2``; data without invoice ids says so."""
    named = [i for i in ids if i != NO_INVOICE_ID]
    text = ""
    if named:
        text = ("invoice " if len(named) == 1 else "invoices ") + ", ".join(named)
    if len(named) < len(ids):
        bare = "the billing data's total (its export has no invoice id)"
        text = f"{text} and {bare}" if text else bare
    return text


def billing_basis(
    invoice: Mapping[str, Any] | None, redact: Callable[[str], str]
) -> BillingBasis | None:
    """A client's note of a run on billing data (``None`` otherwise); every text through the
    sheet's redactor (an invoice id is company-level, but free text all the same)."""
    if not invoice:
        return None
    ids = invoice_ids_text([str(i["id"]) for i in invoice["invoices"]])
    estimate = any(bool(r["estimate"]) for r in invoice.get("repricing", []))
    rates = "billed effective (amortized) rates"
    return BillingBasis(
        rates=rates,
        invoices=redact(ids),
        text=redact(
            f"Costs are at {rates}: what the cloud invoice charges, with commitments (Savings "
            "Plans, reserved instances) spread over the hours they cover and discounts and "
            f"credits applied. They reconcile to {ids}. Billed services outside the cluster (a "
            "database, storage, network) are split like shared workloads, by the usage of the "
            "services that use them, or charged to the client their tag names."
        ),
        estimate=(
            "Part of the period had no billed lines yet: its cluster cost is OpenCost's "
            "estimate, not a billed rate, and may change when the billing data covers it."
            if estimate
            else ""
        ),
    )


__all__ = [
    "BillingBasis",
    "InvoiceRow",
    "InvoiceView",
    "RepricingRow",
    "billing_basis",
    "invoice_ids_text",
    "invoice_view",
]
