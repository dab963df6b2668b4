"""The reconciliation cascade: clients + unattributed + residual + exclusions = reference total.

The reference total is what OpenCost reported for the period plus the external costs. Every
micro-unit of it must land on exactly one line of the cascade; the gap is computed, not
assumed, and must be exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenantcost.errors import InternalError
from tenantcost.kinds import RESIDUAL_CLASSES, CascadeKind, CostClass, LineKind
from tenantcost.result import AllocationResult


@dataclass(frozen=True)
class CascadeLine:
    """One line of the cascade; ``kind`` groups lines (clients, residual, exclusion, ...)."""

    label: str
    kind: CascadeKind
    amount: int
    detail: str = ""


@dataclass(frozen=True)
class Cascade:
    """The closed cascade and its gap."""

    lines: list[CascadeLine]
    reference_total: int
    gap: int

    @property
    def closes(self) -> bool:
        return self.gap == 0


def residual_summary(result: AllocationResult) -> list[dict[str, int | str]]:
    """Per residual class: total before distribution, distributed to clients, remaining."""
    idle_lines = result.lines["kind"] == LineKind.IDLE
    distributed_idle = int(result.lines.loc[idle_lines, "amount"].sum())
    out: list[dict[str, int | str]] = []
    for cls in RESIDUAL_CLASSES:
        before = int(result.residual.loc[result.residual["class"] == cls, "amount"].sum())
        distributed = distributed_idle if cls == CostClass.IDLE else 0
        out.append(
            {
                "class": str(cls),
                "amount": before - distributed,
                "before_distribution": before,
                "distributed": distributed,
            }
        )
    return out


def exclusion_summary(result: AllocationResult) -> list[dict[str, int | str]]:
    """Per excluded workload (or named entry) and reason: the amount over the period."""
    grouped = (
        result.exclusions.groupby(["name", "reason"], sort=True, observed=True)["amount"]
        .sum()
        .reset_index()
    )
    return [
        {"name": str(r.name), "reason": str(r.reason), "amount": int(r.amount)}
        for r in grouped.itertuples(index=False)
    ]


def unattributed_summary(result: AllocationResult) -> list[dict[str, int | str]]:
    """Unattributed cost per source and cause over the period."""
    grouped = (
        result.unattributed.groupby(["source", "kind", "cause"], sort=True, observed=True)["amount"]
        .sum()
        .reset_index()
    )
    return [
        {
            "source": str(r.source),
            "kind": str(r.kind),
            "cause": str(r.cause),
            "amount": int(r.amount),
        }
        for r in grouped.itertuples(index=False)
    ]


def cascade(result: AllocationResult) -> Cascade:
    """Build the cascade from an allocation result and compute its gap."""
    lines = [
        CascadeLine(
            "clients",
            CascadeKind.CLIENTS,
            int(result.lines["amount"].sum()),
            f"{result.lines['client'].nunique()} clients",
        ),
        CascadeLine(
            "unattributed", CascadeKind.UNATTRIBUTED, int(result.unattributed["amount"].sum())
        ),
    ]
    for item in residual_summary(result):
        detail = (
            f"{item['before_distribution']} before distribution, {item['distributed']} "
            "distributed to clients"
            if item["distributed"]
            else ""
        )
        amount = int(item["amount"])
        lines.append(CascadeLine(str(item["class"]), CascadeKind.RESIDUAL, amount, detail))
    for item in exclusion_summary(result):
        lines.append(
            CascadeLine(
                f"excluded: {item['name']}",
                CascadeKind.EXCLUSION,
                int(item["amount"]),
                str(item["reason"]),
            )
        )
    lines.append(
        CascadeLine(
            "unclassified", CascadeKind.UNCLASSIFIED, int(result.unclassified["amount"].sum())
        )
    )
    gap = result.reference_total - sum(line.amount for line in lines)
    return Cascade(lines=lines, reference_total=result.reference_total, gap=gap)


def require_closed(casc: Cascade) -> Cascade:
    """``casc`` when it closes; otherwise an :class:`InternalError`, so that a figure that
    does not add up is never shown as a result (``reconcile`` audits instead of calling this)."""
    if not casc.closes:
        raise InternalError(f"the cascade does not close: gap {casc.gap} micro-units")
    return casc
