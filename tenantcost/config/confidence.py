"""The ``confidence:`` section of the rule file: when a per-client figure is high, medium or low.

A client's figure is only as good as the key and the data behind it. Three figures say how
good (``tenantcost.report.confidence`` computes them); each is graded against a band:

* ``key_spread``: how far the client's amount moves under the alternative keys, as a fraction
  of its amount under the rule;
* ``no_client_share``: the fraction of the usage of the client's services that carried no
  client id;
* ``missing_hours``: the fraction of the period's hours in which one of the client's shared
  services had a cost but no usage data at all.

A value up to ``high`` is graded high, up to ``medium`` medium, anything above low; the
client's level is the worst of the three. The thresholds live in the rule file, dated with it,
so a confidence level is as reproducible as the figure it qualifies; the bands a rule file
leaves out come from ``defaults.yaml`` (:mod:`tenantcost.config.defaults`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from tenantcost.config.base import Strict
from tenantcost.config.defaults import factory

Fraction = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Band(Strict):
    """Upper bounds (fractions, 0.1 = 10 %) of the high and medium grades of one figure."""

    high: Fraction
    medium: Fraction

    @model_validator(mode="after")
    def _ordered(self) -> Band:
        if self.high > self.medium:
            raise ValueError(f"high ({self.high}) must not exceed medium ({self.medium})")
        return self


class ConfidenceThresholds(Strict):
    """Grading bands for the confidence level of per-client figures (see the module doc)."""

    key_spread: Band = Field(
        default_factory=factory("confidence", "key_spread"), validate_default=True
    )
    no_client_share: Band = Field(
        default_factory=factory("confidence", "no_client_share"), validate_default=True
    )
    missing_hours: Band = Field(
        default_factory=factory("confidence", "missing_hours"), validate_default=True
    )
    spread_includes_even: bool = Field(
        default_factory=factory("confidence", "spread_includes_even"), validate_default=True
    )
    """Whether the ``even`` split counts in the key spread. Off by default: ``even`` ignores
    usage, so it measures how unequal clients are, not how uncertain the measure is; the
    sheet still shows the client's amount under ``even``."""
