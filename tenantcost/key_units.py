"""How a key's measure is named and quoted: ``cpu_seconds`` reads "CPU seconds", and its unit
cost is quoted per CPU-hour.

The sheets, the change bridge and unit economics all name keys and quote unit costs, and a
client comparing two of them must read the same words and the same basis on each. The names
live here, in a base module, so the pure modules that compute those figures (``bridge``,
``economics``) and the report that shows them share one definition without the core importing
the report.
"""

from __future__ import annotations

KEY_LABELS: dict[str, str] = {
    "requests": "requests",
    "cpu_seconds": "CPU seconds",
    "even": "even split",
    "weights": "fixed weights",
}


def key_label(key: str) -> str:
    """A usage column or key as words (``cpu_seconds`` -> ``CPU seconds``)."""
    if key in KEY_LABELS:
        return KEY_LABELS[key]
    return key.replace("_", " ")


def unit_basis(key: str) -> tuple[str, float] | None:
    """How a unit cost is quoted for a key: (label, measure units per quoted unit), or None.

    Request-like counts are quoted per 1,000, CPU time per CPU-hour, bytes per GiB; ``even``
    and fixed weights have no unit, so no unit cost.
    """
    if key in ("even", "weights", ""):
        return None
    if key.endswith("_seconds"):
        base = key.removesuffix("_seconds")
        name = base.upper() if len(base) <= 3 else base.replace("_", " ")
        return f"per {name}-hour", 3600.0
    if key.endswith("_bytes"):
        return "per GiB", float(2**30)
    return f"per 1,000 {key_label(key)}", 1000.0
