"""Configuration models for live usage sources (``sources.prometheus`` of the rule file).

Kept apart from :mod:`tenantcost.rules` so that the readers can import their configuration
without importing the whole rule machinery. The models follow the same conventions as the rule
models: unknown keys are errors (``extra="forbid"``) and instances are immutable.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from tenantcost.tables import USAGE_RESERVED_COLUMNS

PLACEHOLDERS: tuple[str, ...] = ("window", "client_label", "service_label")
"""Names a PromQL template may contain in braces, e.g. ``[{window}]``."""

DEFAULT_QUERIES: dict[str, str] = {
    "requests": (
        "sum by ({client_label}, {service_label}) (increase(app_requests_total[{window}]))"
    ),
    "cpu_seconds": (
        "sum by ({client_label}, {service_label}) (increase(app_cpu_seconds_total[{window}]))"
    ),
}
"""One PromQL template per usage column; with the default labels and step they render as
``sum by (client, service) (increase(app_requests_total[1h]))`` and the same for
``app_cpu_seconds_total``."""

_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STEP = re.compile(r"^([1-9][0-9]*)(s|m|h|d)$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_URL = re.compile(r"^https?://[^/\s?#]+(/[^\s?#]*)?$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class BasicAuth(_Strict):
    """HTTP basic authentication for the Prometheus API."""

    username: Annotated[str, Field(min_length=1)]
    password: SecretStr


class PrometheusSource(_Strict):
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
    timeout_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 30.0
    client_label: str = "client"
    service_label: str = "service"
    step: str = "1h"
    queries: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_QUERIES))

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
                    close = difflib.get_close_matches(name, PLACEHOLDERS, n=1)
                    hint = f" (did you mean '{{{close[0]}}}'?)" if close else ""
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
