"""Allocation keys: what a pool is split by (a usage column, ``even``, or contract weights).

Shared by workloads, external costs and billed entries, so it stands apart from any of them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from tenantcost.config.base import Strict
from tenantcost.limits import MAX_CONTRACT_WEIGHT

EVEN = "even"


class WeightsKey(Strict):
    """A fixed key: each client's weight, for contractual splits (``{weights: {a: 2, b: 1}}``)."""

    weights: dict[str, Annotated[float, Field(ge=0, le=MAX_CONTRACT_WEIGHT, allow_inf_nan=False)]]

    @field_validator("weights")
    @classmethod
    def _not_empty(cls, value: dict[str, float]) -> dict[str, float]:
        if not value:
            raise ValueError("weights must name at least one client")
        return value


Key = str | WeightsKey
"""A usage column name, ``even``, or fixed weights."""


def describe_key(key: Key) -> str:
    """A short human label for a key (``requests``, ``even``, ``weights``)."""
    return "weights" if isinstance(key, WeightsKey) else key
