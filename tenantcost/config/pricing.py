"""The ``pricing:`` section of the rule file: how ``unit-economics`` prices unbilled cost.

Attributed cost is what the rules put on a client. A price must also cover the residual the
platform carries (idle capacity, overhead, reserve): ``residual`` states how a client's
*all-in cost* takes a share of it. The all-in cost is always shown beside the attributed
cost, never mixed into it, so the allocation's figures do not change with a pricing policy.

The section is top-level (not per rule version): it is a pricing decision about the month's
figures, not a rule for splitting one window's cost. Its defaults come from
``defaults.yaml``; ``tenantcost unit-economics --target-margin`` overrides ``target_margin``.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Annotated

from pydantic import Field, WithJsonSchema

from tenantcost.config.base import Strict
from tenantcost.config.defaults import factory


class ResidualPolicy(StrEnum):
    """How the residual (idle, overhead and reserve left after the rules' idle sharing) is
    shared into the clients' all-in cost."""

    PROPORTIONAL = "proportional"
    """In proportion to each client's attributed cost (a bigger client carries more)."""
    EVEN = "even"
    """In equal parts over the clients with cost (every tenant pays for the platform alike)."""
    NONE = "none"
    """Not at all: all-in cost equals attributed cost, the residual stays on its own line."""


Fraction01 = Annotated[
    Decimal,
    Field(ge=0, lt=1, allow_inf_nan=False),
    # Stated rather than generated: pydantic's schema for Decimal changes between releases, and
    # the checked-in config/rules.schema.json must not depend on one (as ExternalCost.amount).
    WithJsonSchema({"type": "number", "minimum": 0, "exclusiveMaximum": 1}),
]
"""A margin as a fraction of revenue: 0.7 = 70 %. Decimal, so 0.7 is exactly 7/10."""


class Pricing(Strict):
    """The pricing policy of ``tenantcost unit-economics`` (see the module doc)."""

    residual: ResidualPolicy = Field(
        default_factory=factory("pricing", "residual"), validate_default=True
    )
    """proportional | even | none: how the residual enters each client's all-in cost."""
    margin_floor: Fraction01 | None = Field(
        default_factory=factory("pricing", "margin_floor"), validate_default=True
    )
    """Clients whose gross margin (fraction of revenue) is below this are listed; null: none."""
    target_margin: Fraction01 = Field(
        default_factory=factory("pricing", "target_margin"), validate_default=True
    )
    """The gross margin the price floors reach (``--target-margin`` overrides it)."""
