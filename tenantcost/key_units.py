"""How a key's measure is named and quoted: ``cpu_seconds`` reads "CPU seconds", and its unit
cost is quoted per CPU-hour.

The sheets, the change bridge and unit economics all name keys and quote unit costs, and a
client comparing two of them must read the same words and the same basis on each. The names
live here, in a base module, so the pure modules that compute those figures (``bridge``,
``economics``) and the report that shows them share one definition without the core importing
the report.
"""

from __future__ import annotations

from collections.abc import Mapping

KEY_LABELS: dict[str, str] = {
    "requests": "requests",
    "cpu_seconds": "CPU seconds",
    "even": "even split",
    "weights": "fixed weights",
}


GaugeUnits = Mapping[str, str | None]
"""The declared gauges (``metrics:``) by column, each with its ``unit`` (or None)."""
_BYTE_UNITS = ("byte", "bytes", "B")


def gauge_measure(unit: str | None) -> tuple[str, float]:
    """How a gauge's measure (unit-hours) is shown: (the unit's name, unit-hours per shown
    unit). Bytes read in GiB-hours, anything else in its own unit-hours (seat-hours)."""
    if unit in _BYTE_UNITS:
        return "GiB-hours", float(2**30)
    return f"{unit or 'unit'}-hours", 1.0


def key_label(key: str, gauges: GaugeUnits | None = None) -> str:
    """A usage column or key as words (``cpu_seconds`` -> ``CPU seconds``); a gauge names its
    measure (``storage bytes (GiB-hours)``)."""
    if gauges and key in gauges:
        return f"{key.replace('_', ' ')} ({gauge_measure(gauges[key])[0]})"
    if key in KEY_LABELS:
        return KEY_LABELS[key]
    return key.replace("_", " ")


def unit_basis(key: str, gauges: GaugeUnits | None = None) -> tuple[str, float] | None:
    """How a unit cost is quoted for a key: (label, measure units per quoted unit), or None.

    Request-like counts are quoted per 1,000, CPU time per CPU-hour, bytes per GiB, a gauge
    per unit-hour of its measure (per GiB-hour); ``even`` and fixed weights have no unit, so
    no unit cost.
    """
    if gauges and key in gauges:
        name, scale = gauge_measure(gauges[key])
        return f"per {name.removesuffix('s')}", scale
    if key in ("even", "weights", ""):
        return None
    if key.endswith("_seconds"):
        base = key.removesuffix("_seconds")
        name = base.upper() if len(base) <= 3 else base.replace("_", " ")
        return f"per {name}-hour", 3600.0
    if key.endswith("_bytes"):
        return "per GiB", float(2**30)
    return f"per 1,000 {key_label(key)}", 1000.0
