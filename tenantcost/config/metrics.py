"""``metrics:`` (top level): what kind of measure each usage column is.

A *counter* (the default, every column not listed) counts events in a window: requests, CPU
seconds, bytes sent, tokens. Its window's value is what happened in it, and windows add up.
A *gauge* is a level that persists until it is replaced: bytes stored, seats, rows held. It
arrives as samples ``(time, service, client, level)``, and its measure in a window is the
time integral of the level (unit-hours: byte-hours for bytes stored), so a client who keeps
1 TiB for a week weighs as much as one who keeps 7 TiB for a day. ``stale_after`` bounds how
long a sample holds without a newer one: past it the level is unknown, counts 0, and the
run says which client and span (a meter that died is not billed its last level for ever).

The kinds are not versioned: a column's kind is what it measures, which does not change with
the rule version (``tenantcost.gauges`` integrates, ``docs/usage.md`` tells the user).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from tenantcost.config.base import Strict

_SPAN = re.compile(r"^([1-9][0-9]{0,4})([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
RESERVED = ("window_start", "window_end", "service", "client", "time", "origin")
"""Column names a metric may not take (the usage and sample files' key columns)."""


class MetricKind(StrEnum):
    """A counter adds up per window; a gauge is a level integrated over time."""

    COUNTER = "counter"
    GAUGE = "gauge"


def span_seconds(text: str) -> int:
    """``6h``, ``25h``, ``30m``, ``2d`` or ``90s`` in seconds (the form :class:`Metric`
    validated)."""
    found = _SPAN.match(text)
    if found is None:  # pragma: no cover - validated on load
        raise ValueError(f"expected a span such as 6h, 30m or 2d, got {text!r}")
    return int(found.group(1)) * _SECONDS[found.group(2)]


class Metric(Strict):
    """One usage column's kind, unit and (gauges) how long a sample holds."""

    kind: MetricKind = MetricKind.COUNTER
    unit: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_ -]{0,31}$")] | None = Field(
        default=None,
        description="What one unit of the column is (byte, seat, token): sheets name a "
        "gauge's measure in it (byte: GiB-hours).",
    )
    stale_after: Annotated[str, Field(pattern=r"^[1-9][0-9]{0,4}[smhd]$")] | None = Field(
        default=None,
        description="Gauges: a sample's level holds at most this long without a newer "
        "sample (6h, 25h, 2d); then it is unknown and counts 0, with a coverage warning.",
    )

    @model_validator(mode="after")
    def _gauge_needs_staleness(self) -> Metric:
        if self.kind == MetricKind.GAUGE and self.stale_after is None:
            raise ValueError(
                "stale_after: a gauge needs it: how long a sample's level holds without a "
                "newer one (for a daily inventory 25h, for a level sampled every minute 10m)"
            )
        if self.kind == MetricKind.COUNTER and self.stale_after is not None:
            raise ValueError("stale_after: only a gauge has one (a counter's window is its span)")
        return self

    @property
    def stale_seconds(self) -> int:
        return span_seconds(self.stale_after) if self.stale_after is not None else 0


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_metric_names(metrics: dict[str, Metric]) -> dict[str, Metric]:
    """Every declared name is a usable usage column name (not a key column)."""
    for name in metrics:
        if not _NAME.match(name):
            raise ValueError(
                f"{name!r}: a metric name is a column name: letters, digits and _ "
                "(not starting with a digit), at most 63 characters"
            )
        if name in RESERVED:
            raise ValueError(f"{name!r}: a key column of usage files, not a metric")
    return metrics


def gauges_of(metrics: dict[str, Metric]) -> dict[str, Metric]:
    """The declared gauges, by name, in name order."""
    return {n: m for n, m in sorted(metrics.items()) if m.kind == MetricKind.GAUGE}
