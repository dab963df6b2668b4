"""The outputs of ``budget plan``: JSON document, terminal table, and the CSV ``budget load``
reads back unchanged.

JSON: ``month``, ``money`` (as ``allocate --format json``: amounts are integers of
micro-units), ``history`` (``requested``: ``--history``; ``months``: the issued months read),
``growth`` (the ``--growth`` rates as decimal strings, or null), ``clients[{client, method,
months, last, growth, spread, low, expected, high}]`` (``growth``/``spread``: ``g`` and ``s``
of the default method as decimal strings with 6 places, rounded half-even, null for another
method; ``last`` and the band null for ``no_history``).

CSV: ``client, low, expected, high, method`` with exact decimal amounts in currency units;
a ``no_history`` client has empty amounts (``budget load`` skips exactly those rows); a client
id a spreadsheet would run as a formula gets a leading ``'`` (:mod:`tenantcost.csv_cells`),
which ``budget load`` removes.
Documents are built column-wise from the plan frame, never by a loop over clients.
"""

from __future__ import annotations

import csv
import io
import json
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.budget import Growth
from tenantcost.csv_cells import neutralised
from tenantcost.money import micros_to_decimal_strings
from tenantcost.writers.json_output import money_header
from tenantcost.writers.text import money, render_table

RATE_PLACES = Decimal("0.000001")
"""``g`` and ``s`` are shown with 6 decimal places (the figures use them exactly)."""
AMOUNTS = ("last", "low", "expected", "high")


def _rates(values: pd.Series) -> pd.Series:
    """Exact Fractions as decimal strings with 6 places (None stays None)."""

    def shown(rate: Fraction | None) -> str | None:
        if rate is None or rate is pd.NA or (isinstance(rate, float) and np.isnan(rate)):
            return None
        exact = Decimal(rate.numerator) / Decimal(rate.denominator)
        return str(exact.quantize(RATE_PLACES, rounding=ROUND_HALF_EVEN))

    return values.astype(object).map(shown)


def _growth(growth: Growth | None) -> dict[str, str] | None:
    if growth is None:
        return None
    return {name: str(Decimal(r.numerator) / Decimal(r.denominator))
            for name, r in (("low", growth.low), ("expected", growth.expected),
                            ("high", growth.high))}  # fmt: skip


def document(
    plan: pd.DataFrame, month: str, currency: str, requested: int, months: list[str],
    growth: Growth | None,
) -> dict[str, Any]:  # fmt: skip
    """``budget plan --format json``'s document."""
    clients = plan.copy()
    clients["growth"], clients["spread"] = _rates(plan["growth"]), _rates(plan["spread"])
    for column in AMOUNTS:
        clients[column] = plan[column].astype(object).where(plan[column].notna(), None)
    records = clients.astype(object).where(clients.notna(), None).to_dict("records")
    own = _own(plan)
    for record in records:  # numpy ints to Python ints for json (one pass over the records)
        record["months"] = int(record["months"])
        if own:
            record["currency"] = record["currency"] or currency
        else:
            record.pop("currency", None)
    return {
        "month": month,
        "money": money_header(currency),
        "history": {"requested": requested, "months": months},
        "growth": _growth(growth),
        "clients": records,
    }


def plan_json(*args: Any) -> str:
    return json.dumps(document(*args), indent=2, ensure_ascii=False) + "\n"


def _own(plan: pd.DataFrame) -> bool:
    """Whether some client is planned in its own currency (``currency`` not empty)."""
    return "currency" in plan and bool((plan["currency"] != "").any())


def plan_csv(plan: pd.DataFrame) -> str:
    """``client, low, expected, high, method`` (and ``currency`` when a client is planned in
    its own): what ``budget load`` reads back unchanged."""
    out = pd.DataFrame({"client": plan["client"]})
    for column in ("low", "expected", "high"):
        present = plan[column].notna()
        text = micros_to_decimal_strings(plan[column].fillna(0).astype("int64"))
        out[column] = text.where(present, "")
    out["method"] = plan["method"]
    if _own(plan):  # a band in a client's own currency: budget load reads the column
        out["currency"] = plan["currency"]
    buffer = io.StringIO()
    safe = neutralised(out, decimals=("low", "expected", "high"))
    safe.to_csv(buffer, index=False, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    return buffer.getvalue()


def plan_table(plan: pd.DataFrame, month: str, currency: str, months: list[str]) -> str:
    """A terminal table: every amount with its six decimals (nothing rounded away)."""
    noted = " (or the row's currency)" if _own(plan) else ""
    head = (f"budget plan for {month} in {currency}{noted}, from issued months "
            f"{', '.join(months) or '(none)'}")  # fmt: skip
    if plan.empty:
        return f"{head}\n(no clients)\n"
    shown = {c: plan[c].map(lambda v: "-" if v is pd.NA else money(int(v))) for c in AMOUNTS}
    g, s = _rates(plan["growth"]).fillna("-"), _rates(plan["spread"]).fillna("-")
    rows = np.column_stack([plan["client"], plan["method"], plan["months"].astype(str),
                            shown["last"], g, s, shown["low"], shown["expected"],
                            shown["high"]]).tolist()  # fmt: skip
    header = ["client", "method", "months", "last", "g", "s", "low", "expected", "high"]
    if _own(plan):  # a client planned in its own currency says which
        rows = [[*r, c or currency] for r, c in zip(rows, plan["currency"], strict=True)]
        header.append("currency")
    return f"{head}\n{render_table(header, rows, {2, 3, 4, 5, 6, 7, 8})}\n"


__all__ = ["document", "plan_csv", "plan_json", "plan_table"]
