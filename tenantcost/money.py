"""Exact money: integer amounts in a fixed minor unit, and splits that conserve their parent.

Every amount inside tenantcost is an ``int64`` count of *micro-units* of the currency
(1 USD = 1,000,000 micro-USD). OpenCost rounds its figures to 5 decimals, so every OpenCost
number converts to micro-units without loss, and sub-cent hourly costs keep full precision.

Splits use the largest-remainder method: each part gets ``floor(parent * w_i / W)``; the units
left over go, one each, to the parts with the largest fractional remainders, ties broken by
the part's label (ascending) so the result never depends on input row order. The parts always
sum to the parent exactly and no part exceeds its exact share rounded up by one unit. The
allocation engine runs this rule in DuckDB (``tenantcost.split``); :func:`split_largest_remainder`
is the same rule in pandas, used by the node-price model and as the reference the engine is
tested against.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np
import pandas as pd

MINOR_UNIT_EXPONENT = 6
"""Amounts are integers of 10**-6 currency units."""

MICROS_PER_UNIT = 10**MINOR_UNIT_EXPONENT


def to_micros(values: pd.Series | np.ndarray | float) -> np.ndarray:
    """Convert currency amounts (floats) to int64 micro-units, rounding half to even."""
    arr = np.asarray(values, dtype="float64") * MICROS_PER_UNIT
    return np.rint(arr).astype("int64")


def decimal_to_micros(value: Decimal | str | float) -> int:
    """Convert one decimal amount (for example from the rule file) to micro-units exactly."""
    dec = Decimal(str(value)) * MICROS_PER_UNIT
    return int(dec.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def micros_to_decimal(micros: int) -> Decimal:
    """Micro-units back to an exact :class:`~decimal.Decimal` currency amount."""
    return Decimal(int(micros)).scaleb(-MINOR_UNIT_EXPONENT)


def format_amount(micros: int, places: int = 2) -> str:
    """Format micro-units as a currency amount with ``places`` decimals and thousands separators."""
    dec = micros_to_decimal(micros).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)
    return f"{dec:,.{places}f}"


def split_largest_remainder(
    groups: pd.Series,
    parents: pd.Series,
    weights: pd.Series,
    labels: pd.Series,
) -> np.ndarray:
    """Split each group's parent amount over its rows in proportion to ``weights``.

    All arguments are aligned columns of one frame (one row per part):

    * ``groups``: the group id of each row (rows of one group share a parent);
    * ``parents``: the group's parent amount in micro-units, repeated on every row of the group;
    * ``weights``: non-negative finite weights; a group whose weights sum to 0 gets all zeros
      (the caller decides where that parent goes);
    * ``labels``: the tie-break label of each row (unique within a group).

    Returns an int64 array of parts. For each group with positive total weight the parts sum to
    the parent exactly. The computation is vectorised over all groups at once.
    """
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype="int64")
    frame = pd.DataFrame(
        {
            "g": np.asarray(groups),
            "p": np.asarray(parents, dtype="int64"),
            "w": np.asarray(weights),
            "label": np.asarray(labels, dtype=object).astype(str),
            "pos": np.arange(n),
        }
    )
    # Integer weights sum exactly, so the total (and every share) does not depend on the order
    # rows are summed in; float weights are accepted for callers that need them.
    total = frame.groupby("g", sort=False)["w"].transform("sum").to_numpy()
    positive = total > 0
    quota = np.zeros(n, dtype="float64")
    quota[positive] = frame["p"].to_numpy(dtype="float64")[positive] * (
        frame["w"].to_numpy(dtype="float64")[positive] / total[positive].astype("float64")
    )
    base = np.floor(quota)
    frac = quota - base
    base_int = base.astype("int64")
    frame["base"] = base_int
    frame["frac"] = frac
    frame["eligible"] = positive & (frame["w"].to_numpy() > 0)
    allotted = frame.groupby("g", sort=False)["base"].transform("sum").to_numpy()
    remainder = np.where(positive, frame["p"].to_numpy() - allotted, 0)
    frame["remainder"] = remainder
    # Rank eligible rows inside their group: largest fraction first, then label ascending.
    ranked = frame[frame["eligible"]].sort_values(
        ["g", "frac", "label"], ascending=[True, False, True], kind="mergesort"
    )
    rank = ranked.groupby("g", sort=False).cumcount().to_numpy()
    bonus = (rank < ranked["remainder"].to_numpy()).astype("int64")
    parts = base_int.copy()
    parts[ranked["pos"].to_numpy()] += bonus
    return parts


def micros_to_decimal_strings(micros: pd.Series) -> pd.Series:
    """Exact decimal strings (``-12.000345``) for a column of micro-units, vectorised."""
    values = micros.astype("int64")
    sign = np.where(values < 0, "-", "")
    absolute = values.abs()
    whole = (absolute // MICROS_PER_UNIT).astype(str)
    frac = (absolute % MICROS_PER_UNIT).astype(str).str.zfill(MINOR_UNIT_EXPONENT)
    return pd.Series(sign, index=micros.index) + whole + "." + frac


def round_for_display(
    micros: Sequence[int], places: int = 2, *, total: int | None = None
) -> list[int]:
    """Round amounts for display so the shown lines add up to the shown total.

    Returns each amount in units of ``10**-places`` (``places`` from 0 to 6). The total is the
    exact sum rounded half to even (as :func:`format_amount` shows it); each line gets its
    floor, and the units left over go, one each, to the lines with the largest remainders,
    ties broken by position. A page that prints these lines and the rounded total therefore
    adds up, and no line moves by a full display unit.

    ``total`` (in display units) imposes the shown total instead, when a page must agree with
    a figure already rounded elsewhere (a client's total in the finance summary); it must lie
    within one unit of the exact sum.
    """
    if not 0 <= places <= MINOR_UNIT_EXPONENT:
        raise ValueError(f"places must be between 0 and {MINOR_UNIT_EXPONENT}, got {places}")
    unit = 10 ** (MINOR_UNIT_EXPONENT - places)
    values = [int(m) for m in micros]
    floors = [v // unit for v in values]
    remainders = [v - f * unit for v, f in zip(values, floors, strict=True)]
    exact = Decimal(sum(values)) / unit
    target = int(exact.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
    if total is not None:
        if abs(Decimal(total) - exact) >= 1:
            raise ValueError(f"total {total} is not within one unit of the exact sum {exact}")
        target = total
    extra = target - sum(floors)
    order = sorted(range(len(values)), key=lambda i: (-remainders[i], i))
    for i in order[:extra]:
        floors[i] += 1
    return floors
