"""Compare keys: the same pool split several ways, client by client.

The pool (shared + external cost) is identical under every key; only its split moves. Showing
both side by side answers "why do we pay more than them?" with the rule, not a guess.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tenantcost.result import AllocationResult
from tenantcost.timefmt import iso_z
from tenantcost.writers.json_output import money_header
from tenantcost.writers.text import money, render_table


def compare_frame(results: dict[str, AllocationResult]) -> pd.DataFrame:
    """One row per client, one amount column per key, and change in % vs the first key."""
    keys = list(results)
    frames = [r.client_totals().set_index("client")["amount"].rename(k) for k, r in results.items()]
    table = pd.concat(frames, axis=1).fillna(0).astype("int64")
    table = table.sort_values([keys[0], *keys[1:]], ascending=False, kind="mergesort")
    base = table[keys[0]]
    for k in keys[1:]:
        table[f"change_pct:{k}"] = (table[k] - base) / base.where(base != 0) * 100
    return table.rename_axis("client").reset_index()


def compare_document(results: dict[str, AllocationResult]) -> dict[str, Any]:
    keys = list(results)
    first = results[keys[0]]
    frame = compare_frame(results)
    document = {
        "currency": first.currency,
        "money": money_header(first.currency),
        **({"fx": first.fx} if first.fx is not None else {}),
        "period": {
            "start": iso_z(first.period.start),
            "end": iso_z(first.period.end),
        },
        "keys": keys,
        "pool_total": {k: r.pool_total() for k, r in results.items()},
        "clients": [
            {
                "client": row["client"],
                "amounts": {k: int(row[k]) for k in keys},
                "change_pct": {
                    k: (
                        None
                        if pd.isna(row.get(f"change_pct:{k}", 0.0))
                        else round(float(row.get(f"change_pct:{k}", 0.0)), 4)
                    )
                    for k in keys
                },
            }
            for row in frame.to_dict("records")
        ],
    }
    return _with_ledger(document, results)


def _with_ledger(document: dict[str, Any], results: dict[str, AllocationResult]) -> dict[str, Any]:
    """A converted comparison with the ledger's figures beside the presented ones:
    ``ledger_pool_total`` and each client's ``ledger_amounts`` (the same rates convert every
    key's split, so a change in % is the ledger's change up to rounding)."""
    ledgers = {k: r.ledger for k, r in results.items() if r.ledger is not None}
    if len(ledgers) != len(results):
        return document
    document["ledger_pool_total"] = {k: r.pool_total() for k, r in ledgers.items()}
    frame = compare_frame(ledgers)
    by_client = {
        row["client"]: {k: int(row[k]) for k in results} for row in frame.to_dict("records")
    }
    for client in document["clients"]:
        client["ledger_amounts"] = by_client.get(client["client"], dict.fromkeys(results, 0))
    return document


def compare_table(results: dict[str, AllocationResult]) -> str:
    keys = list(results)
    frame = compare_frame(results)
    headers = ["client", *keys, *(f"change {k}" for k in keys[1:])]
    rows = []
    for row in frame.to_dict("records"):
        changes = [
            "-" if pd.isna(row[f"change_pct:{k}"]) else f"{row[f'change_pct:{k}']:+.1f} %"
            for k in keys[1:]
        ]
        rows.append([str(row["client"]), *(money(int(row[k])) for k in keys), *changes])
    pools = [
        "pool total",
        *(money(results[k].pool_total()) for k in keys),
        *([""] * (len(keys) - 1)),
    ]
    rows.append(pools)
    currency = results[keys[0]].currency
    right = set(range(1, len(headers)))
    return (
        f"Amounts in {currency}; change relative to key '{keys[0]}'. The pool (shared + "
        "external cost) is the same under every key; only its split moves.\n\n"
        + render_table(headers, rows, right)
    )
