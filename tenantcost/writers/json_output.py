"""The JSON document of an allocation: every figure, its rule and its place in the cascade.

All amounts are integers in micro-units of the currency (``money.minor_unit_exponent`` = 6),
so the document is exact and its figures add up by integer arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tenantcost import __version__
from tenantcost.config.rules import describe_key
from tenantcost.kinds import LineKind
from tenantcost.money import MINOR_UNIT_EXPONENT
from tenantcost.reconcile import (
    cascade,
    exclusion_summary,
    residual_summary,
    unattributed_summary,
)
from tenantcost.result import AllocationResult
from tenantcost.timefmt import iso_z


def money_header(currency: str) -> dict[str, Any]:
    """How to read every ``amount`` in the document."""
    return {
        "currency": currency,
        "minor_unit_exponent": MINOR_UNIT_EXPONENT,
        "unit": f"micro-{currency} (1 {currency} = 1,000,000)",
    }


def client_lines(result: AllocationResult) -> pd.DataFrame:
    """Lines summed over windows: one per client, source, kind and key."""
    lines = result.lines
    if "windows" not in lines:  # window-level lines: each row is one window
        lines = lines.assign(windows=1)
    if lines.empty:
        return lines
    grouped = (
        lines.groupby(["client", "kind", "source", "key"], sort=True, observed=True)
        .agg(
            measure=("measure", "sum"),
            total_measure=("total_measure", "sum"),
            amount=("amount", "sum"),
            windows=("windows", "sum"),
        )
        .reset_index()
    )
    # A period share is the client's measure over the pool's measure in the windows it used.
    grouped["share"] = grouped["measure"] / grouped["total_measure"]
    direct = grouped["kind"] == LineKind.DIRECT
    grouped.loc[direct, ["measure", "total_measure"]] = float("nan")
    grouped.loc[direct, "share"] = 1.0
    return grouped


def _num(value: float) -> float | None:
    return None if pd.isna(value) else round(float(value), 9)


def rules_in_force(result: AllocationResult) -> list[dict[str, Any]]:
    return [
        {
            "id": r.id,
            "effective_from": r.effective_from.date().isoformat(),
            "description": r.description,
            "idle": r.idle,
            "unmatched": r.unmatched,
            "workloads": [
                {
                    "match": dict(w.match),
                    "class": w.class_,
                    **({"service": w.service} if w.service else {}),
                    **({"key": describe_key(w.key)} if w.key is not None else {}),
                    **({"client": w.client} if w.client else {}),
                    **({"client_from": w.client_from} if w.client_from else {}),
                    **({"reason": w.reason} if w.reason else {}),
                }
                for w in r.workloads
            ],
            "external": [
                {
                    "name": e.name,
                    "amount": str(e.amount),
                    "per": e.per,
                    "key": describe_key(e.key),
                    "services": e.services or r.shared_services,
                }
                for e in r.external
            ],
        }
        for r in result.rules
    ]


def _rounded(values: pd.Series) -> list[float | None]:
    """:func:`_num` of every value (Python's correctly rounded ``round``, as one list)."""
    return [None if v != v else round(v, 9) for v in values.astype("float64").tolist()]


def _line_records(grouped: pd.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """Each client's line documents, in ``grouped``'s order (sorted by client): the columns
    are converted once for all lines, then cut at the client boundaries."""
    key = grouped["key"].astype(object)
    frame = pd.DataFrame(
        {
            "source": grouped["source"].astype(object),
            "kind": grouped["kind"].astype(object),
            "key": key.where(key.astype(bool), None),
            "measure": pd.Series(_rounded(grouped["measure"]), dtype=object),
            "share": pd.Series(_rounded(grouped["share"]), dtype=object),
            "amount": grouped["amount"].astype("int64").to_numpy(),
            "windows": grouped["windows"].astype("int64").to_numpy(),
        }
    )
    records = frame.to_dict("records")
    clients = grouped["client"].astype(str).to_numpy()
    starts = np.flatnonzero(np.r_[True, clients[1:] != clients[:-1]])
    ends = np.r_[starts[1:], len(clients)]
    return {str(clients[a]): records[a:b] for a, b in zip(starts, ends, strict=True)}


def _client_documents(result: AllocationResult) -> list[dict[str, Any]]:
    """Each client's total and its lines, largest client first (one group-by and one
    conversion of all lines, not one scan or one ``itertuples`` per client)."""
    grouped = client_lines(result)
    lines_by_client = _line_records(grouped) if not grouped.empty else {}
    totals = result.client_totals()
    return [
        {"client": client, "amount": int(amount), "lines": lines_by_client.get(str(client), [])}
        for client, amount in zip(totals["client"].tolist(), totals["amount"].tolist(), strict=True)
    ]


def reconciliation_document(result: AllocationResult) -> dict[str, Any]:
    """The cascade and everything it is made of (``reconcile --format json`` and
    ``reconciliation.json``), without the per-client lines."""
    casc = cascade(result)
    return {
        "tenantcost_version": __version__,
        "currency": result.currency,
        "money": money_header(result.currency),
        "period": {"start": iso_z(result.period.start), "end": iso_z(result.period.end)},
        "rules": rules_in_force(result),
        "key_override": result.key_override,
        "reference_total": result.reference_total,
        "opencost_total": result.cost_total,
        "external_total": result.external_total,
        "unattributed": int(result.unattributed["amount"].sum()),
        "unattributed_detail": unattributed_summary(result),
        "residual": residual_summary(result),
        "exclusions": exclusion_summary(result),
        "unclassified": int(result.unclassified["amount"].sum()),
        "cascade": [
            {"line": c.label, "kind": c.kind, "amount": c.amount, "detail": c.detail}
            for c in casc.lines
        ],
        "gap": casc.gap,
    }


def result_document(result: AllocationResult) -> dict[str, Any]:
    """The full JSON-ready document of one allocation: the reconciliation plus the clients."""
    recon = reconciliation_document(result)
    head = {k: recon[k] for k in ("tenantcost_version", "currency", "money", "period")}
    return {
        **head,
        "windows": result.windows,
        "hours": result.hours,
        **{k: v for k, v in recon.items() if k not in head},
        "clients": _client_documents(result),
    }
