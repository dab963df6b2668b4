"""The ``otlp:`` section of the store's settings file: which OTLP metrics are which usage columns.

``POST /v1/metrics`` (:mod:`tenantcost.service.otlp`) turns OpenTelemetry metric points into
usage rows. The application already names its client somewhere (a data point attribute such as
``tenant.id``) and its service (the resource's ``service.name``); this section says where, and
maps each usage column to one metric and the value of its points that counts:

```yaml
otlp:
  client_attribute: tenant.id
  service_attribute: service.name
  metrics:
    requests: {name: http.server.request.duration, value: count}   # a histogram's count
    cpu_seconds: {name: app.cpu.time, value: sum}                  # a counter's sum
    storage_bytes: {name: db.client.storage, value: level}         # a gauge's level
```

A ``level`` column takes a Gauge's data points as samples; the store must declare it a gauge
(a rule file's ``metrics: {storage_bytes: {kind: gauge, ...}}``, docs/gauges.md).

Kept apart from the decoding (:mod:`tenantcost.otlp`) so that reading the settings file, which
every command does, never imports protobuf.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from tenantcost.config.base import Strict
from tenantcost.tables import USAGE_RESERVED_COLUMNS


class ValueKind(StrEnum):
    """What of a point counts: ``sum`` (a counter's value, a histogram's sum), ``count``
    (a histogram's number of measurements: requests from a request-duration histogram) or
    ``level`` (a Gauge point's value: a sample of a column the store declares a gauge)."""

    COUNT = "count"
    SUM = "sum"
    LEVEL = "level"


class MetricMap(Strict):
    """One usage column's source: the metric ``name`` and which of its values."""

    name: str = Field(min_length=1)
    value: ValueKind


class OtlpSettings(Strict):
    """The ``otlp:`` section (every key optional; without ``metrics`` every point is refused
    as an unknown metric, with that reason, rather than guessed)."""

    client_attribute: str = Field(default="tenant.id", min_length=1)
    """The data point attribute naming the client (a point without it is usage without a
    client: reported as unattributed, never dropped)."""
    service_attribute: str = Field(default="service.name", min_length=1)
    """The resource attribute naming the service (a point without it is refused)."""
    metrics: dict[str, MetricMap] = Field(default_factory=dict)
    """Usage column -> its metric and value."""
    series_expiry_hours: float = Field(default=48, gt=0, le=24 * 366)
    """A series not seen for this long is forgotten (its kept last point is deleted, and no
    longer read): its next cumulative point counts its whole value again. Every restarted
    process exports new series (``service.instance.id`` changes), so the old ones go quiet."""

    @field_validator("metrics")
    @classmethod
    def _columns(cls, metrics: dict[str, MetricMap]) -> dict[str, MetricMap]:
        for column in metrics:
            if not column.strip() or column in USAGE_RESERVED_COLUMNS:
                raise ValueError(
                    f"'{column}' cannot be a usage column (key columns: "
                    f"{', '.join(USAGE_RESERVED_COLUMNS)})"
                )
        return metrics

    @model_validator(mode="after")
    def _no_double_count(self) -> OtlpSettings:
        seen: dict[tuple[str, ValueKind], str] = {}
        for column, source in self.metrics.items():
            pair = (source.name, source.value)
            if pair in seen:
                raise ValueError(
                    f"columns '{seen[pair]}' and '{column}' both take the {source.value} of "
                    f"'{source.name}': each would count the same usage"
                )
            seen[pair] = column
        return self

    def columns_of(self, name: str) -> list[tuple[str, ValueKind]]:
        """The usage columns a metric feeds, with the value each takes (often none)."""
        return [(c, m.value) for c, m in self.metrics.items() if m.name == name]

    @property
    def counter_columns(self) -> list[str]:
        """The columns counted per window (``sum`` and ``count``), not the gauges' levels."""
        return [c for c, m in self.metrics.items() if m.value is not ValueKind.LEVEL]
