"""The invoice cascade: the allocation's figures, closed on the cloud invoice's total.

The existing cascade (``tenantcost.reconcile``) closes on the effective cost in scope plus the
rule file's external costs. Finance signs the invoice, so this second cascade walks from one
to the other, every difference named:

    clients + unattributed + idle + overhead + reserve + each exclusion + unclassified
    - external costs (the rule file's: in the statements, not on this invoice)
    - estimates (--allow-unbilled: OpenCost's figure, not on this invoice)
    + unseen (billed cluster cost in hours OpenCost did not see)
      = effective cost in scope
    + each outside line (BilledCost: billed, not this SaaS's cost)
    + bridge: billed - effective per charge category (and commitment type for usage),
      what was billed for hours outside the allocation period, and the rounding of each
      rounded group
      = invoice total = Σ BilledCost, listed per InvoiceId

``billed_total`` is computed straight from the billing rows (one exact sum, rounded once); the
parts come from the allocation result and the billing side. The gap is their difference,
computed, never forced: a line dropped or counted twice shows as a gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pandas as pd

from tenantcost.billing import BillingRun
from tenantcost.errors import InternalError
from tenantcost.reconcile import exclusion_summary, residual_summary
from tenantcost.result import AllocationResult
from tenantcost.timefmt import iso_z


class InvoicePart(StrEnum):
    """The ``part`` of an invoice cascade line."""

    CLIENTS = "clients"
    UNATTRIBUTED = "unattributed"
    IDLE = "idle"
    OVERHEAD = "overhead"
    RESERVE = "reserve"
    EXCLUDED = "excluded"
    UNCLASSIFIED = "unclassified"
    UNSEEN = "unseen"
    OUTSIDE = "outside"
    BRIDGE = "bridge"
    EXTERNAL = "external"
    ESTIMATE = "estimate"


OUTSIDE_PERIOD = "outside the period"
ROUNDING = "rounding"


@dataclass(frozen=True)
class InvoiceLine:
    part: InvoicePart
    name: str
    amount: int


@dataclass(frozen=True)
class Invoice:
    """The invoice cascade of one allocation (amounts in micro-units)."""

    currency: str
    billed_total: int
    effective_in_scope: int
    invoices: list[tuple[str, int]]
    lines: list[InvoiceLine]
    repricing: pd.DataFrame
    opencost_estimate: int
    gap: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gap", self.billed_total - sum(ln.amount for ln in self.lines))

    @property
    def closes(self) -> bool:
        return self.gap == 0

    def to_json(self) -> dict[str, Any]:
        """The ``invoice`` object of ``allocate --format json`` (its fields: docs/invoice.md)."""
        return {
            "currency": self.currency,
            "billed_total": self.billed_total,
            "effective_in_scope": self.effective_in_scope,
            "invoices": [{"id": i, "billed_total": a} for i, a in self.invoices],
            "lines": [
                {"part": str(ln.part), "name": ln.name, "amount": ln.amount} for ln in self.lines
            ],
            "repricing": [
                {
                    "cluster": str(r.cluster),
                    "period_start": iso_z(r.period_start),
                    "period_end": iso_z(r.period_end),
                    "opencost": int(r.opencost),
                    "billed_effective": int(r.billed_effective),
                    "estimate": bool(r.estimate),
                }
                for r in self.repricing.itertuples(index=False)
            ],
            "gap": self.gap,
            "opencost_estimate": self.opencost_estimate,
        }


def _allocation_lines(result: AllocationResult) -> list[InvoiceLine]:
    """The allocation's own parts: clients, unattributed, residual, exclusions, unclassified."""
    lines = [
        InvoiceLine(InvoicePart.CLIENTS, "clients", int(result.lines["amount"].sum())),
        InvoiceLine(
            InvoicePart.UNATTRIBUTED, "unattributed", int(result.unattributed["amount"].sum())
        ),
    ]
    for item in residual_summary(result):
        part = InvoicePart(str(item["class"]))
        lines.append(InvoiceLine(part, str(item["class"]), int(item["amount"])))
    for item in exclusion_summary(result):
        lines.append(InvoiceLine(InvoicePart.EXCLUDED, str(item["name"]), int(item["amount"])))
    lines.append(
        InvoiceLine(
            InvoicePart.UNCLASSIFIED, "unclassified", int(result.unclassified["amount"].sum())
        )
    )
    return lines


def _check_rounding(rounding: int, billing: BillingRun) -> None:
    """Each group rounded half-even is off by at most half a micro-unit: a larger
    ``rounding`` line would hide a part the billing side lost or counted twice."""
    groups = (
        billing.totals.rounded_groups
        + len(billing.repricing)
        + len(billing.totals.outside)
        + len(billing.totals.bridge)
        + 1
    )
    if 2 * abs(rounding) > groups:
        raise InternalError(
            f"the invoice's rounding line is {rounding} micro-units, more than half a unit "
            f"for each of the {groups} rounded groups: a billed amount was lost or counted twice"
        )


def invoice_cascade(result: AllocationResult, billing: BillingRun) -> Invoice:
    """The invoice cascade of ``result``, an allocation of ``billing.costs``."""
    totals = billing.totals
    lines = _allocation_lines(result)
    optional = [  # shown when not zero: most months have no estimate and nothing unseen
        InvoiceLine(InvoicePart.EXTERNAL, "external costs", -result.external_total),
        InvoiceLine(InvoicePart.ESTIMATE, "OpenCost estimate", -billing.estimate),
        InvoiceLine(InvoicePart.UNSEEN, "billed, not seen by OpenCost", billing.unseen),
    ]
    lines += [line for line in optional if line.amount]
    effective = sum(ln.amount for ln in lines)
    lines += [InvoiceLine(InvoicePart.OUTSIDE, name, amount) for name, amount in totals.outside]
    lines += [InvoiceLine(InvoicePart.BRIDGE, name, amount) for name, amount in totals.bridge]
    if billing.outside_period:
        lines.append(InvoiceLine(InvoicePart.BRIDGE, OUTSIDE_PERIOD, billing.outside_period))
    rounding = (
        totals.billed_total
        - billing.rounded_effective
        - sum(a for _, a in totals.outside)
        - sum(a for _, a in totals.bridge)
    )
    _check_rounding(rounding, billing)
    lines.append(InvoiceLine(InvoicePart.BRIDGE, ROUNDING, rounding))
    return Invoice(
        currency=result.currency,
        billed_total=totals.billed_total,
        effective_in_scope=effective,
        invoices=totals.invoices,
        lines=lines,
        repricing=billing.repricing,
        opencost_estimate=billing.opencost_estimate,
    )
