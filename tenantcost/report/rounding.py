"""One rounding of a run's figures at the display decimals, in one hierarchy.

A reader checks a page by adding it up, and compares pages with each other. Rounding each
figure on its own breaks both: three clients rounded alone can add to 0.2023 under a total of
0.2022, and a client's sheet can read 0.1235 where the index says 0.1234. So a run's figures
are rounded once, top down, each level by largest remainder to the level above:

1. the cascade's lines to the reference total (the exact total rounded half to even);
2. every client's total under the rule to the cascade's ``clients`` line;
3. a client's lines to that client's displayed total.

Another split of the same money (the clients under an alternative key) is rounded within its
own column the same way: to the ``clients`` line when the column holds the same money, else
to its own exact total rounded half to even.

Deterministic: ties of remainders go to the first line in the cascade's order, to the first
client by id (never by the order a query returned them), to the first of a client's lines in
the sheet's order. Every page, sheet, pack index and finance summary reads these figures (the
files' pack through :func:`tenantcost.report.figures.plan`, the store's pages through
:mod:`tenantcost.store.shown`), so a client's amount reads the same everywhere. They are a
pure function of a run's stored figures, which never change once a close issued the run: a
revision's displayed figures are frozen with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from tenantcost.money import MINOR_UNIT_EXPONENT


def _unit(places: int) -> int:
    if not 0 <= places <= MINOR_UNIT_EXPONENT:
        raise ValueError(f"places must be between 0 and {MINOR_UNIT_EXPONENT}, got {places}")
    return 10 ** (MINOR_UNIT_EXPONENT - places)


def half_even(micros: int, places: int) -> int:
    """One exact amount in display units, rounded half to even (a total on its own)."""
    unit = _unit(places)
    quotient, remainder = divmod(int(micros), unit)
    if 2 * remainder > unit or (2 * remainder == unit and quotient % 2):
        quotient += 1
    return quotient


def largest_remainder(
    micros: Sequence[int] | np.ndarray, places: int, total: int | None = None
) -> np.ndarray:
    """Display units of ``micros`` that add up to ``total`` (default: their exact sum rounded
    half to even): each gets its floor, the units left over go one each to the largest
    remainders, ties to the first position. Vectorised: one sort, no loop per amount.

    ``total`` must lie within one unit of the exact sum, so no amount moves by a full unit.
    """
    unit = _unit(places)
    values = np.asarray(micros, dtype="int64")
    floors = np.floor_divide(values, unit)
    remainders = values - floors * unit
    exact = int(values.sum())
    target = half_even(exact, places) if total is None else int(total)
    if abs(target * unit - exact) >= unit:
        raise ValueError(f"total {target} is not within one unit of the exact sum {exact / unit}")
    extra = target - int(floors.sum())
    if extra > 0:
        order = np.lexsort((np.arange(len(values)), -remainders))
        floors[order[:extra]] += 1
    return floors


def client_column(amounts: pd.Series, places: int, total: int | None = None) -> pd.Series:
    """A column of client amounts (index: client id) in display units, rounded to ``total``,
    ties by client id: the same figures whatever order the clients came in."""
    ids = amounts.index.astype(str)
    order = np.argsort(ids.to_numpy(), kind="stable")
    values = amounts.to_numpy(dtype="int64")[order]
    units = largest_remainder(values, places, total)
    out = np.empty_like(units)
    out[order] = units
    return pd.Series(out, index=amounts.index, dtype="int64")


def key_columns(
    amounts: pd.DataFrame, places: int, clients_line: int, rule: str = "rule"
) -> pd.DataFrame:
    """Every key's column (``rule`` and the alternatives), each rounded within itself: the
    rule's to the cascade's ``clients`` line, another key's to the same line when it splits
    the same money, else to its own exact total."""
    exact_rule = int(amounts[rule].astype("int64").sum()) if rule in amounts else None
    out = {}
    for key in amounts.columns:
        column = amounts[key].astype("int64")
        same = key == rule or int(column.sum()) == exact_rule
        out[key] = client_column(column, places, clients_line if same else None)
    return pd.DataFrame(out, index=amounts.index, columns=amounts.columns).astype("int64")


def client_lines(micros: Sequence[int], places: int, client_total: int) -> list[int]:
    """A client's lines (in the sheet's order) rounded to the client's displayed total."""
    if not len(micros):
        return []
    return [int(u) for u in largest_remainder(micros, places, client_total)]
