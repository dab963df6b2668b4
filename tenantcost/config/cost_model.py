"""The ``cost_model`` section of the rule file: how ``tenantcost podcost`` prices pods.

It lives in its own module (and not in :mod:`tenantcost.podcost`) so that
:mod:`tenantcost.config.rules` can import it without an import cycle. The computation is in
:mod:`tenantcost.podcost`; its docstring and ``examples/node-price-model/README.md`` explain
the model. The section, with every key::

    cost_model:
      weights: {cpu: 9, memory: 1}      # exactly one of weights / fractions / unit_prices
      # fractions: {cpu: 0.6, memory: 0.4}
      # unit_prices: {cpu: 0.0573, memory: 0.0063421}
      billing: usage                    # usage (default): max(request, usage); or requests
      min_cpu: 0.25                     # billing: requests only; vCPU per pod
      min_memory_gib: 0.5               # billing: requests only; GiB per pod
      memory_per_cpu: {min: 1, max: 6.5}  # billing: requests only; GiB per vCPU
      cluster: prod-eu                  # written to the cluster column (default "")

* ``weights``: relative price of one vCPU-hour and one GiB-hour (AWS split cost allocation
  uses 9:1). A node's CPU share of its price is ``w_cpu × vcpu / (w_cpu × vcpu + w_memory ×
  memory_gib)``.
* ``fractions``: a fixed fraction of every node's price per resource; they must add up to 1.
* ``unit_prices``: currency per vCPU-hour and per GiB-hour, as GKE Autopilot and Fargate
  publish them. No node prices are needed and there is no idle.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from tenantcost.config.base import Strict

FRACTION_TOLERANCE = 1e-9
"""How far ``fractions`` may add up from 1 (YAML decimals such as 0.6 + 0.4 are not exact)."""

NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ResourceAmounts(Strict):
    """One number per resource: ``{cpu: ..., memory: ...}`` (both required)."""

    cpu: NonNegative
    memory: NonNegative


class MemoryPerCpu(Strict):
    """Allowed GiB of memory per vCPU of a pod's billed requests (Autopilot: 1 to 6.5)."""

    min: NonNegative | None = None
    max: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _range(self) -> MemoryPerCpu:
        if self.min is None and self.max is None:
            raise ValueError("min/max: give at least one bound")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min: {self.min} is above max {self.max}")
        return self


class CostModel(Strict):
    """How ``podcost`` turns node prices (or published unit prices) into pod costs."""

    weights: ResourceAmounts | None = None
    fractions: ResourceAmounts | None = None
    unit_prices: ResourceAmounts | None = None
    billing: Literal["usage", "requests"] = "usage"
    min_cpu: NonNegative | None = None
    min_memory_gib: NonNegative | None = None
    memory_per_cpu: MemoryPerCpu | None = None
    cluster: str = ""

    @model_validator(mode="after")
    def _one_pricing(self) -> CostModel:
        given = [
            name
            for name in ("weights", "fractions", "unit_prices")
            if getattr(self, name) is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "weights/fractions/unit_prices: give exactly one of them"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if self.weights is not None and self.weights.cpu + self.weights.memory <= 0:
            raise ValueError("weights: at least one weight must be above 0")
        if self.fractions is not None:
            total = self.fractions.cpu + self.fractions.memory
            if abs(total - 1) > FRACTION_TOLERANCE:
                raise ValueError(f"fractions: cpu + memory must add up to 1, got {total:g}")
        if self.billing != "requests":
            raised = [
                name
                for name in ("min_cpu", "min_memory_gib", "memory_per_cpu")
                if getattr(self, name) is not None
            ]
            if raised:
                raise ValueError(
                    f"{raised[0]}: only with 'billing: requests' (usage billing never raises "
                    "a pod above what it requested or used)"
                )
        return self

    @property
    def pricing(self) -> Literal["weights", "fractions", "unit_prices"]:
        """Which of the three pricing methods the section uses."""
        if self.weights is not None:
            return "weights"
        if self.fractions is not None:
            return "fractions"
        return "unit_prices"

    @property
    def raises_requests(self) -> bool:
        """True when minimums or a memory-per-CPU range can raise billed requests."""
        return (
            self.min_cpu is not None
            or self.min_memory_gib is not None
            or self.memory_per_cpu is not None
        )
