"""Figures as a person reads them: amounts for the currency, shares, measures and unit costs.

Every amount inside tenantcost is exact (micro-units); a page shows fewer digits. Rounding
each figure on its own would let a page's lines miss its total by a cent, and a sheet that does
not add up cannot be defended line by line. So every table of lines and total is rounded
together with :func:`tenantcost.money.round_for_display` (largest remainder), and figures that
stand alone are rounded half to even, as the total of such a table is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import pandas as pd

from tenantcost.key_units import (  # noqa: F401  (re-exported)
    KEY_LABELS,
    gauge_measure,
    key_label,
    unit_basis,
)
from tenantcost.money import MINOR_UNIT_EXPONENT, round_for_display

CURRENCY_PLACES: dict[str, int] = {
    **dict.fromkeys(("BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG"), 0),
    **dict.fromkeys(("RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF", "XPF"), 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
}
"""ISO 4217 minor units that differ from the usual two decimals."""

MIN_SIGNIFICANT_UNITS = 10
"""A client's total must show at least this many display units (two significant digits)."""


def currency_places(currency: str) -> int:
    """The currency's own number of decimals (ISO 4217 minor unit), 2 unless listed."""
    return CURRENCY_PLACES.get(currency, 2)


def auto_places(currency: str, amounts: Iterable[int]) -> int:
    """Decimals for a report: the currency's, raised until every non-zero amount shows two digits.

    A one-hour or one-day report can hold sub-cent client figures; shown to the cent they read
    0.00 and the sheet explains nothing. Raising the precision for the whole report (never per
    line) keeps every page comparable; it stops at micro-units, the exact precision.
    """
    places = currency_places(currency)
    nonzero = [abs(int(a)) for a in amounts if int(a) != 0]
    if not nonzero:
        return places
    smallest = min(nonzero)
    while places < MINOR_UNIT_EXPONENT and smallest < MIN_SIGNIFICANT_UNITS * 10 ** (
        MINOR_UNIT_EXPONENT - places
    ):
        places += 1
    return places


def format_units(units: int, places: int) -> str:
    """An integer count of ``10**-places`` units as ``1,234.56`` (``-`` for negatives)."""
    sign = "-" if units < 0 else ""
    whole, frac = divmod(abs(int(units)), 10**places)
    text = f"{whole:,}"
    return f"{sign}{text}.{frac:0{places}d}" if places else f"{sign}{text}"


def format_amount(micros: int, places: int) -> str:
    """One amount that stands alone, rounded half to even."""
    return format_units(round_for_display([micros], places)[0], places)


def format_column(
    micros: Sequence[int], places: int, total: int | None = None
) -> tuple[list[str], str]:
    """Lines and their total, rounded together so the shown lines add up to the shown total.

    ``total`` (display units) is the total already shown elsewhere, which the lines must match.
    """
    units = round_for_display(list(micros), places, total=total)
    return [format_units(u, places) for u in units], format_units(sum(units), places)


def format_share(value: float, digits: int = 1) -> str:
    """A fraction as a percentage; tiny non-zero shares say so instead of showing 0.0 %."""
    if value is None or math.isnan(value):
        return "-"
    if math.isinf(value):
        return "n/a"
    pct = value * 100
    floor = 10**-digits
    if 0 < abs(pct) < floor:
        return f"< {floor:.{digits}f} %"
    return f"{pct:,.{digits}f} %"


def format_measure(value: float) -> str:
    """A usage measure: whole numbers with separators, others with up to two decimals."""
    if value is None or math.isnan(value):
        return "-"
    if abs(value - round(value)) < 1e-9:
        return f"{round(value):,}"
    text = f"{value:,.2f}".rstrip("0").rstrip(".")
    return text


def format_rate(micros_per_unit: float, places: int) -> str:
    """A unit cost: at least the amount's decimals, and three significant digits."""
    if math.isnan(micros_per_unit) or math.isinf(micros_per_unit):
        return "-"
    value = micros_per_unit / 10**MINOR_UNIT_EXPONENT
    digits = places
    if value != 0:
        digits = max(places, 2 - math.floor(math.log10(abs(value))))
    digits = min(digits, 8)
    return f"{value:,.{digits}f}"


def period_label(start: pd.Timestamp, end: pd.Timestamp) -> str:
    """``2026-11`` for a calendar month, else ``2026-11-03 10:00 to 2026-11-03 11:00 UTC``."""
    s, e = pd.Timestamp(start), pd.Timestamp(end)
    if s == s.normalize() and s.day == 1 and e == s + pd.offsets.MonthBegin(1):
        return s.strftime("%Y-%m")
    if s == s.normalize() and e == e.normalize():
        return f"{s:%Y-%m-%d} to {e:%Y-%m-%d} (end exclusive)"
    return f"{s:%Y-%m-%d %H:%M} to {e:%Y-%m-%d %H:%M} UTC"
