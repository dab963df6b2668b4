"""The invoice cascade: the allocation's figures, closed on the cloud invoice's total.

The existing cascade (``tenantcost.reconcile``) closes on the effective cost in scope plus the
rule file's external costs. Finance signs the invoice, so this second cascade walks from one
to the other, every difference named:

    clients + unattributed + idle + overhead + reserve + each exclusion + unclassified
      (each of the hours with cost data)
    + billed without cost data (the billed amounts of hours no cost window covers that no
      client was charged; what the clients were, on clients, is named on it: to_clients)
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

import numpy as np
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
    NO_COST_DATA = "no cost data"


OUTSIDE_PERIOD = "outside the period"
ROUNDING = "rounding"
NO_COST_DATA = "billed without cost data"


@dataclass(frozen=True)
class InvoiceLine:
    part: InvoicePart
    name: str
    amount: int
    hours: int | None = None
    """The hours a line covers, where it names them (``billed without cost data``)."""
    to_clients: int | None = None
    """What the clients were charged in those hours (``billed without cost data``: not on
    the line, already on ``clients``)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"part": str(self.part), "name": self.name, "amount": self.amount}
        if self.hours is not None:
            out["hours"] = self.hours
        if self.to_clients is not None:
            out["to_clients"] = self.to_clients
        return out


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
            "lines": [ln.to_json() for ln in self.lines],
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


def _allocation_lines(result: AllocationResult, billing: BillingRun) -> list[InvoiceLine]:
    """The allocation's own parts: clients, then unattributed, residual, exclusions and
    unclassified, each of the hours with cost data; then what no client was charged of the
    billed amounts of the hours without.

    An hour without cost data keeps its billed amounts in a one-hour window (their pools are
    split over its usage), but an open month's future hours under a monthly line would
    otherwise swell ``unattributed`` or ``overhead`` with cost nobody can act on yet, so the
    cascade takes those windows out of every part but ``clients`` and names them on one
    line, with their hours. ``clients`` stays the sum of the statements (finance reconciles
    the two), and the line names the amount the clients were charged in those hours
    (``to_clients``), so nothing is hidden. The window-level tables (unattributed, residual,
    exclusions, unclassified) give their share of those windows exactly; the clients' share
    is the rest of the hours' billed amount, since every micro-unit placed in a window lands
    on exactly one part (period-level client lines hold no windows). A billed ``idle`` line
    in such an hour that the rule distributes to clients with usage there is charged to
    them, so that part counts in ``to_clients``, its undistributed rest on the line.
    """
    bare = billing.no_cost_data
    starts = pd.DatetimeIndex(bare.hours).as_unit("ns").asi8

    def without(frame: pd.DataFrame) -> int:
        """The amount of ``frame``'s rows in the hours without cost data."""
        if not len(starts) or frame.empty:
            return 0
        at = pd.DatetimeIndex(frame["window_start"]).as_unit("ns").asi8
        return int(frame.loc[np.isin(at, starts), "amount"].sum())

    moved: list[int] = []

    def part(kind: InvoicePart, name: str, amount: int, rows: pd.DataFrame) -> InvoiceLine:
        taken = without(rows)
        moved.append(taken)
        return InvoiceLine(kind, name, amount - taken)

    lines = [
        part(
            InvoicePart.UNATTRIBUTED,
            "unattributed",
            int(result.unattributed["amount"].sum()),
            result.unattributed,
        )
    ]
    residual = result.residual
    for item in residual_summary(result):
        cls = str(item["class"])
        rows = residual[residual["class"] == cls]
        lines.append(part(InvoicePart(cls), cls, int(item["amount"]), rows))
    excl = result.exclusions
    for item in exclusion_summary(result):
        rows = excl[(excl["name"] == item["name"]) & (excl["reason"] == item["reason"])]
        lines.append(part(InvoicePart.EXCLUDED, str(item["name"]), int(item["amount"]), rows))
    unclassified = result.unclassified
    total = int(unclassified["amount"].sum())
    lines.append(part(InvoicePart.UNCLASSIFIED, "unclassified", total, unclassified))
    clients = int(result.lines["amount"].sum())
    lines.insert(0, InvoiceLine(InvoicePart.CLIENTS, "clients", clients))
    if len(bare.hours):
        uncharged = sum(moved)  # what no client was charged; the clients' part is the rest
        lines.append(
            InvoiceLine(
                InvoicePart.NO_COST_DATA,
                NO_COST_DATA,
                uncharged,
                len(bare.hours),
                to_clients=bare.amount - uncharged,
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
    lines = _allocation_lines(result, billing)
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
