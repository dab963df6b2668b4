"""Exact money: integer amounts in a fixed minor unit, and splits that conserve their parent.

Every amount inside tenantcost is an ``int64`` count of *micro-units* of the currency
(1 USD = 1,000,000 micro-USD). OpenCost rounds its figures to 5 decimals, so every OpenCost
number converts to micro-units without loss, and sub-cent hourly costs keep full precision.

Splits use the largest-remainder method: each part gets ``floor(parent * w_i / W)``; the units
left over go, one each, to the parts with the largest fractional remainders, ties broken by
the part's label (ascending) so the result never depends on input row order. The parts always
sum to the parent exactly and no part exceeds its exact share rounded up by one unit. The
allocation engine runs this rule in DuckDB (``tenantcost.split``) in 128-bit integers;
:func:`split_largest_remainder` is the same rule in pandas, exact for integer weights (the
reference the engine is tested against) and in doubles for the node-price model's float
weights.

Nothing here overflows silently: :func:`to_micros` refuses NaN, infinite and too-large
amounts, :func:`running_total` and :func:`checked_total` refuse totals beyond
``tenantcost.limits.MAX_AMOUNT_TOTAL``, and :func:`checked_sum` sums ``int64`` without
wrapping. The limits and their reasons are in :mod:`tenantcost.limits`.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.errors import InputError
from tenantcost.limits import MAX_AMOUNT_TOTAL, MAX_COST_PER_ROW, MAX_MICROS_PER_ROW
from tenantcost.origin import split_origin

MINOR_UNIT_EXPONENT = 6
"""Amounts are integers of 10**-6 currency units."""

MICROS_PER_UNIT = 10**MINOR_UNIT_EXPONENT


def to_micros(
    values: pd.Series | np.ndarray | float,
    *,
    origins: Sequence[str] | pd.Series | None = None,
    column: str | None = None,
) -> np.ndarray:
    """Convert currency amounts (floats) to int64 micro-units, rounding half to even.

    An amount that is NaN, infinite or beyond :data:`~tenantcost.limits.MAX_COST_PER_ROW`
    (in either sign) raises :class:`InputError` instead of becoming a wrapped or rounded
    integer: below that limit the conversion is exact to the micro-unit for any figure with
    six decimals or fewer. ``origins`` (``file:row n`` per value) and ``column`` name the
    offending cell when the caller knows them; the readers check every cost first, so this is
    the last line of defence for tables built in code.
    """
    arr = np.asarray(values, dtype="float64")
    bad = ~np.isfinite(arr) | (np.abs(arr) > MAX_COST_PER_ROW)
    if bad.any():
        flat = arr.ravel()
        position = int(np.flatnonzero(bad.ravel())[0])
        file, where = _place(origins, position)
        raise InputError(
            amount_problem(float(flat[position])), file=file, where=where, column=column
        )
    return np.rint(arr * MICROS_PER_UNIT).astype("int64")


def amount_problem(value: float | int) -> str:
    """The one-line reason an amount cannot be held exactly (NaN, infinite or too large).

    ``value`` may be an integer too large for a double (a JSON ``10**400``)."""
    if isinstance(value, int):
        shown = f"{Decimal(value):.6g}"
    elif np.isnan(value):
        return "amount is NaN (missing): every cost must be a number"
    elif not np.isfinite(value):
        return f"amount must be finite, got {value!r}"
    else:
        shown = repr(value)
    return (
        f"amount {shown} is beyond what tenantcost holds exactly: at most "
        f"{MAX_COST_PER_ROW:,} currency units per row (a corrupt export?)"
    )


def _place(
    origins: Sequence[str] | pd.Series | None, position: int
) -> tuple[str | None, str | None]:
    """(file, row or JSON path) of the value at ``position`` from its ``origin`` string."""
    if origins is None:
        return None, None
    return split_origin(str(np.asarray(origins, dtype=object).ravel()[position]))


def running_total(
    micros: np.ndarray,
    *,
    origins: Sequence[str] | pd.Series | None = None,
    column: str | None = None,
    what: str = "costs",
) -> int:
    """The exact total of per-row amounts, each in ``[0, MAX_MICROS_PER_ROW]``.

    Raises :class:`InputError` naming the row at which the running total first passes
    :data:`~tenantcost.limits.MAX_AMOUNT_TOTAL`. The ``int64`` running sum is exact up to
    that row: each step adds at most 1e15, so it passes 1e18 long before it could wrap at
    9.22e18 (rows after the crossing are never looked at).
    """
    values = np.asarray(micros, dtype="int64")
    if len(values) == 0:
        return 0
    if int(values.min()) < 0 or int(values.max()) > MAX_MICROS_PER_ROW:
        raise ValueError("running_total needs amounts in [0, MAX_MICROS_PER_ROW]")
    running = np.cumsum(values, dtype="int64")
    over = running > MAX_AMOUNT_TOTAL
    if over.any():
        position = int(np.argmax(over))
        file, where = _place(origins, position)
        raise InputError(
            f"the {what} add up to more than {MAX_AMOUNT_TOTAL // MICROS_PER_UNIT:,} currency "
            "units by this row, beyond what tenantcost sums exactly (a corrupt export, or "
            "far too long a period?)",
            file=file,
            where=where,
            column=column,
        )
    return int(running[-1])


def checked_total(micros: pd.Series | np.ndarray, what: str) -> int:
    """The exact total of a run's amounts (``what``: "costs", "external costs"), refused with
    :class:`InputError` beyond :data:`~tenantcost.limits.MAX_AMOUNT_TOTAL` in either sign.

    The cost readers already name the row at which their running total passes the limit;
    this guards totals formed after them (external costs accrued over a long period, tables
    built in code), so that every later ``int64`` sum of parts of the total stays exact.
    """
    total = checked_sum(micros)
    if abs(total) > MAX_AMOUNT_TOTAL:
        raise InputError(
            f"the {what} of the period add up to {format_amount(total, 0)} currency units, "
            f"beyond the {MAX_AMOUNT_TOTAL // MICROS_PER_UNIT:,} tenantcost sums exactly"
        )
    return total


def checked_sum(micros: pd.Series | np.ndarray) -> int:
    """The exact sum of int64 amounts as a Python int, whatever their size or sign.

    Sums each amount's high and low 32 bits separately (each partial sum is exact in int64
    for fewer than 2^31 values), so a sum beyond int64 is seen instead of wrapping. Callers
    compare the result with :data:`~tenantcost.limits.MAX_AMOUNT_TOTAL` or ``INT64_MAX``.
    """
    values = np.asarray(micros, dtype="int64")
    high = np.right_shift(values, 32)
    low = np.bitwise_and(values, 0xFFFFFFFF)
    return int(high.sum(dtype="int64")) * 2**32 + int(low.sum(dtype="int64"))


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
      (the caller decides where that parent goes). Integer weights are split exactly (Python
      integers, any size); float weights in doubles, ``p * (w / W)``;
    * ``labels``: the tie-break label of each row (unique within a group).

    Returns an int64 array of parts. For each group with positive total weight the parts sum to
    the parent exactly. The computation is vectorised over all groups at once.
    """
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype="int64")
    w = np.asarray(weights)
    # Integer dtypes, or Python integers beyond int64 in an object array (1e21 micro-units).
    exact = np.issubdtype(w.dtype, np.integer) or pd.api.types.infer_dtype(w) == "integer"
    frame = pd.DataFrame(
        {
            "g": np.asarray(groups),
            "p": np.asarray(parents, dtype="int64"),
            # Integer weights as Python ints: products and sums of any size stay exact.
            "w": w.astype(object) if exact else w,
            "label": np.asarray(labels, dtype=object).astype(str),
            "pos": np.arange(n),
        }
    )
    total = frame.groupby("g", sort=False)["w"].transform("sum").to_numpy()
    positive = total > 0
    if exact:
        base_int, frac = _exact_quotas(frame, total, positive)
    else:
        base_int, frac = _float_quotas(frame, total, positive)
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


def _exact_quotas(
    frame: pd.DataFrame, total: np.ndarray, positive: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``floor(p * w / W)`` and the remainder ``p * w mod W`` in Python integers.

    Within a group ``W`` is common, so ranking by the integer remainder is ranking by the
    exact fractional part: the rule of ``tenantcost.split`` with no rounding anywhere. This
    is the reference the DuckDB split is tested against, so it is plain rather than fast.
    """
    n = len(frame)
    base = np.zeros(n, dtype="int64")
    rest = np.zeros(n, dtype=object)
    if positive.any():
        parent = frame["p"].to_numpy().astype(object)[positive]
        product = parent * frame["w"].to_numpy().astype(object)[positive]
        whole = total[positive].astype(object)
        base[positive] = (product // whole).astype("int64")
        rest[positive] = product % whole
    return base, rest


def _float_quotas(
    frame: pd.DataFrame, total: np.ndarray, positive: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``p * (w / W)`` in doubles, for callers whose weights are themselves doubles (the node
    price model's resource amounts): its floors and fractional parts."""
    n = len(frame)
    quota = np.zeros(n, dtype="float64")
    quota[positive] = frame["p"].to_numpy(dtype="float64")[positive] * (
        frame["w"].to_numpy(dtype="float64")[positive] / total[positive].astype("float64")
    )
    base = np.floor(quota)
    return base.astype("int64"), quota - base


def micros_to_decimal_strings(micros: pd.Series) -> pd.Series:
    """Exact decimal strings (``-12.000345``) for a column of micro-units, vectorised."""
    values = micros.astype("int64")
    sign = np.where(values < 0, "-", "")
    absolute = values.abs()
    whole = (absolute // MICROS_PER_UNIT).astype(str)
    frac = (absolute % MICROS_PER_UNIT).astype(str).str.zfill(MINOR_UNIT_EXPONENT)
    return pd.Series(sign, index=micros.index) + whole + "." + frac


def micros_to_decimal_string(micros: int) -> str:
    """One amount's exact decimal string, as :func:`micros_to_decimal_strings` writes it
    (integers only: a one-row Series cost 2 ms per amount on a page)."""
    value = int(micros)
    whole, frac = divmod(abs(value), MICROS_PER_UNIT)
    return f"{'-' if value < 0 else ''}{whole}.{frac:0{MINOR_UNIT_EXPONENT}d}"


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


def money_header(currency: str) -> dict[str, Any]:
    """How to read every ``amount`` in a JSON document (its ``money`` header): the one place
    that states the minor unit, so every document says it the same way."""
    return {
        "currency": currency,
        "minor_unit_exponent": MINOR_UNIT_EXPONENT,
        "unit": f"micro-{currency} (1 {currency} = 1,000,000)",
    }
