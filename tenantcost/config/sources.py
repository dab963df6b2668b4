"""Configuration models for live usage sources (``sources.prometheus`` of the rule file).

Kept apart from :mod:`tenantcost.config.rules` so that the readers can import their configuration
without importing the whole rule machinery. The models follow the same conventions as the rule
models: unknown keys are errors (``extra="forbid"``) and instances are immutable. What a rule file
leaves out (query templates, labels, the OpenCost aggregation, timeouts) comes from
``defaults.yaml`` (:mod:`tenantcost.config.defaults`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, SecretStr, field_validator, model_validator

from tenantcost.config.base import Strict
from tenantcost.config.defaults import default, factory
from tenantcost.suggest import did_you_mean
from tenantcost.tables import USAGE_RESERVED_COLUMNS

if TYPE_CHECKING:  # pandas is imported where used: check-config starts without it
    import pandas as pd

PLACEHOLDERS: tuple[str, ...] = ("window", "client_label", "service_label")
"""Names a PromQL template may contain in braces, e.g. ``[{window}]``."""

_LEGACY_CONSTANTS = {
    "DEFAULT_QUERIES": ("prometheus", "queries"),
    "DEFAULT_OPENCOST_AGGREGATE": ("opencost", "aggregate"),
}


def __getattr__(name: str) -> Any:
    """``DEFAULT_QUERIES`` and ``DEFAULT_OPENCOST_AGGREGATE``, read from the defaults file.

    Kept as module attributes for code that imported the former constants; the values come
    from ``defaults.yaml`` (:mod:`tenantcost.config.defaults`) on first access.
    """
    if name in _LEGACY_CONSTANTS:
        return default(*_LEGACY_CONSTANTS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STEP = re.compile(r"^([1-9][0-9]*)(s|m|h|d)$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_URL = re.compile(r"^https?://[^/\s?#]+(/[^\s?#]*)?$")


class BasicAuth(Strict):
    """HTTP basic authentication for the Prometheus API."""

    username: Annotated[str, Field(min_length=1)]
    password: SecretStr


class PrometheusSource(Strict):
    """Where and how to read per-client usage from a Prometheus server.

    Each entry of ``queries`` becomes one float64 column of the usage table. Templates are
    plain text with three placeholders: ``{window}`` (the ``step``, so ``increase(x[{window}])``
    covers exactly one window), ``{client_label}`` and ``{service_label}``. They are replaced
    literally, so PromQL braces (``x{job="api"}``) need no escaping. ``queries`` replaces the
    defaults as a whole: list every column you want.
    """

    url: str
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    basic_auth: BasicAuth | None = None
    timeout_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        default_factory=factory("prometheus", "timeout_seconds"), validate_default=True
    )
    client_label: str = Field(
        default_factory=factory("prometheus", "client_label"), validate_default=True
    )
    service_label: str = Field(
        default_factory=factory("prometheus", "service_label"), validate_default=True
    )
    step: str = Field(default_factory=factory("prometheus", "step"), validate_default=True)
    queries: dict[str, str] = Field(
        default_factory=factory("prometheus", "queries"), validate_default=True
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip()
        if not _URL.match(value):
            raise ValueError(
                f"must be an http:// or https:// URL such as http://prometheus:9090; got {value!r}"
            )
        return value.rstrip("/")

    @field_validator("client_label", "service_label")
    @classmethod
    def _label_name(cls, value: str) -> str:
        if not _LABEL_NAME.match(value):
            raise ValueError(f"not a Prometheus label name: {value!r}")
        return value

    @field_validator("step")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not _STEP.match(value):
            raise ValueError(
                f"must be a duration such as 1h, 30m, 15s or 1d (one unit); got {value!r}"
            )
        return value

    @field_validator("queries")
    @classmethod
    def _templates(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("at least one query is required")
        for column, template in value.items():
            if not column.strip():
                raise ValueError("a usage column name must not be empty")
            if column in USAGE_RESERVED_COLUMNS:
                raise ValueError(f"{column}: '{column}' is a key column, not a usage metric")
            if not template.strip():
                raise ValueError(f"{column}: the PromQL query is empty")
            for name in _PLACEHOLDER.findall(template):
                if name not in PLACEHOLDERS:
                    hint = did_you_mean(name, PLACEHOLDERS, render=lambda p: f"{{{p}}}")
                    raise ValueError(
                        f"{column}: unknown placeholder '{{{name}}}'{hint}; placeholders are "
                        + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
                    )
        return value

    @model_validator(mode="after")
    def _one_authorization(self) -> PrometheusSource:
        if self.basic_auth is not None and any(k.lower() == "authorization" for k in self.headers):
            raise ValueError(
                "basic_auth: cannot be combined with an Authorization header; use one of them"
            )
        return self

    @property
    def step_timedelta(self) -> pd.Timedelta:
        """The window length as a timedelta."""
        match = _STEP.match(self.step)
        assert match is not None  # validated
        unit = {"s": "s", "m": "min", "h": "h", "d": "D"}[match.group(2)]
        import pandas as pd

        return pd.Timedelta(int(match.group(1)), unit=unit)

    def render(self, column: str) -> str:
        """The PromQL query of ``column`` with its placeholders filled in."""
        query = self.queries[column]
        for name, text in (
            ("window", self.step),
            ("client_label", self.client_label),
            ("service_label", self.service_label),
        ):
            query = query.replace("{" + name + "}", text)
        return query


_SPAN = re.compile(r"^([1-9][0-9]*)(m|h|d|w)$")
_SPAN_UNITS = {"s": "s", "m": "min", "h": "h", "d": "D", "w": "W"}


def _timedelta(pattern: re.Pattern[str], value: str) -> pd.Timedelta:
    match = pattern.match(value)
    assert match is not None  # validated
    import pandas as pd

    return pd.Timedelta(int(match.group(1)), unit=_SPAN_UNITS[match.group(2)])


class OpenCostSource(Strict):
    """Where and how to read workload costs from the OpenCost Allocation API.

    ``sources.opencost`` of the rule file; ``--opencost-url`` and ``--step`` override ``url``
    and ``step``. The client asks ``{url}/allocation/compute`` for one result set per ``step``
    (``includeIdle=true``, ``shareIdle=false``) and splits periods longer than ``max_window``
    into several requests on step boundaries. Header values may name environment variables as
    ``${NAME}`` (for example ``Authorization: Bearer ${OPENCOST_TOKEN}``), so secrets stay out
    of the rule file.
    """

    url: str | None = None
    aggregate: str = Field(default_factory=factory("opencost", "aggregate"), validate_default=True)
    step: str = Field(default_factory=factory("opencost", "step"), validate_default=True)
    idle_by_node: bool = Field(
        default_factory=factory("opencost", "idle_by_node"), validate_default=True
    )
    max_window: str = Field(
        default_factory=factory("opencost", "max_window"), validate_default=True
    )
    timeout_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        default_factory=factory("opencost", "timeout_seconds"), validate_default=True
    )
    total_timeout_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        default_factory=factory("opencost", "total_timeout_seconds"), validate_default=True
    )
    retries: Annotated[int, Field(ge=0, le=100)] = Field(
        default_factory=factory("opencost", "retries"), validate_default=True
    )
    backoff_seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] = Field(
        default_factory=factory("opencost", "backoff_seconds"), validate_default=True
    )
    headers: dict[str, str] = Field(default_factory=dict, repr=False)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not _URL.match(value):
            raise ValueError(
                "must be an http:// or https:// URL such as http://opencost.opencost:9003; "
                f"got {value!r}"
            )
        value = value.rstrip("/")
        for suffix in ("/allocation/compute", "/allocation"):
            value = value.removesuffix(suffix)
        return value

    @field_validator("aggregate")
    @classmethod
    def _aggregate(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",")]
        if not all(parts):
            raise ValueError(
                f"must be a comma-separated list of OpenCost aggregation fields such as "
                f"{default('opencost', 'aggregate')}; got {value!r}"
            )
        return ",".join(parts)

    @field_validator("step")
    @classmethod
    def _step(cls, value: str) -> str:
        if not _STEP.match(value):
            raise ValueError(f"must be a duration such as 1h, 30m or 1d (one unit); got {value!r}")
        return value

    @field_validator("max_window")
    @classmethod
    def _max_window(cls, value: str) -> str:
        if not _SPAN.match(value):
            raise ValueError(f"must be a duration such as 7d, 24h or 2w (one unit); got {value!r}")
        return value

    @model_validator(mode="after")
    def _window_holds_a_step(self) -> OpenCostSource:
        if self.max_window_timedelta < self.step_timedelta:
            raise ValueError(
                f"max_window: {self.max_window} is shorter than the step {self.step}; one request "
                "must cover at least one step"
            )
        return self

    @property
    def step_timedelta(self) -> pd.Timedelta:
        """The length of one result set (one cost window)."""
        return _timedelta(_STEP, self.step)

    @property
    def max_window_timedelta(self) -> pd.Timedelta:
        """The longest period one request may cover."""
        return _timedelta(_SPAN, self.max_window)
