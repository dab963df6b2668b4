"""The invoice in the rule file: ``billing:`` (top level) and each version's ``billed:`` list.

Billing data (FOCUS, AWS CUR 2.0) is what the company pays. Two kinds of billed line meet an
allocation:

* lines that **are** a cluster OpenCost prices (``billing.clusters``): their effective cost
  reprices OpenCost's rows of that cluster (``tenantcost.reprice``), so the same spend is never
  counted twice (DOMAIN.md §7);
* every other line is classified by a version's ``billed:`` entries, first match wins like
  ``workloads:``: a shared pool split by a key over the usage of its ``services``, a direct
  cost of the client a tag names, residual, an exclusion with its reason, or ``outside`` the
  SaaS perimeter (billed, but another business unit's): ``tenantcost.billed``.

``match:`` keys are FOCUS column names spelled as in the specification; ``tags:`` matches keys
of the ``Tags`` JSON object. Values are ``*`` globs (or lists of them, any of which may hold);
a tag pattern needs the tag to be present and non-empty.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tenantcost.config.base import Strict
from tenantcost.config.keys import Key
from tenantcost.suggest import did_you_mean

BILLING_MATCH_COLUMNS: tuple[str, ...] = (
    "BillingAccountId",
    "BillingAccountName",
    "SubAccountId",
    "SubAccountName",
    "InvoiceId",
    "ProviderName",
    "PublisherName",
    "InvoiceIssuerName",
    "ServiceName",
    "ServiceCategory",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "RegionId",
    "RegionName",
    "AvailabilityZone",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "SkuId",
    "SkuPriceId",
    "PricingCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountType",
    "CommitmentDiscountStatus",
    "CommitmentDiscountCategory",
)
"""The FOCUS columns a ``match:`` may select on (text columns every reader provides)."""
TAGS = "tags"

BilledClass = Literal["shared", "direct", "idle", "overhead", "reserve", "excluded", "outside"]
Pattern = str | list[str]


def _check_patterns(where: str, value: Any) -> None:
    if isinstance(value, list):
        if not value:
            raise ValueError(f"{where}: empty list matches nothing")
        if not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: expected a text pattern or a list of them")
    elif not isinstance(value, str):
        raise ValueError(f"{where}: expected a text pattern or a list of them, got {value!r}")


def check_match(value: dict[str, Any]) -> dict[str, Any]:
    """A billed ``match:``: known FOCUS columns and ``tags:``; each a pattern or a list."""
    for column, pattern in value.items():
        if column == TAGS:
            if not isinstance(pattern, dict) or not pattern:
                raise ValueError("tags: expected a mapping of tag key to pattern")
            for tag, tag_pattern in pattern.items():
                if not isinstance(tag, str) or not tag:
                    raise ValueError("tags: tag keys must be non-empty text")
                _check_patterns(f"tags.{tag}", tag_pattern)
            continue
        if column not in BILLING_MATCH_COLUMNS:
            raise ValueError(
                f"{column}: unknown FOCUS column '{column}'"
                f"{did_you_mean(column, BILLING_MATCH_COLUMNS)}; columns are "
                f"{', '.join(BILLING_MATCH_COLUMNS)} and tags"
            )
        _check_patterns(column, pattern)
    return value


def describe_match(match: dict[str, Any]) -> str:
    """A short label of a match (``Amazon Relational Database Service``, ``tenant=*``)."""
    parts: list[str] = []
    for column, pattern in match.items():
        if column == TAGS:
            parts += [f"{k}={_joined(v)}" for k, v in pattern.items()]
        else:
            parts.append(_joined(pattern))
    return ", ".join(parts) or "everything"


def _joined(pattern: Pattern) -> str:
    return "|".join(pattern) if isinstance(pattern, list) else pattern


class ClientFrom(Strict):
    """Where a direct billed line's client comes from: the value of one tag."""

    tag: str = Field(min_length=1)


class BilledEntry(Strict):
    """One classification entry of billed lines outside the clusters."""

    match: dict[str, Any] = Field(default_factory=dict)
    class_: BilledClass = Field(alias="class")
    name: str | None = None
    key: Key | None = None
    services: list[str] | None = None
    client: str | None = None
    client_from: ClientFrom | None = None
    reason: str | None = None

    @field_validator("match")
    @classmethod
    def _known_columns(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_match(value)

    @model_validator(mode="after")
    def _fields_fit_class(self) -> BilledEntry:
        cls = self.class_
        if cls == "shared":
            if self.key is None:
                raise ValueError("key: required for class 'shared'")
            if not self.services:
                raise ValueError("services: required for class 'shared' (the usage it is split by)")
        elif self.key is not None or self.services is not None:
            raise ValueError(f"key/services: only for class 'shared', not '{cls}'")
        if cls == "direct":
            if (self.client is None) == (self.client_from is None):
                raise ValueError("client/client_from: class 'direct' needs exactly one of them")
        elif self.client is not None or self.client_from is not None:
            raise ValueError(f"client/client_from: only for class 'direct', not '{cls}'")
        if cls in ("excluded", "outside") and not (self.reason and self.reason.strip()):
            raise ValueError(f"reason: required for class '{cls}'")
        return self

    @property
    def label(self) -> str:
        """The entry's source name in results: its ``name:``, else derived from its match."""
        return self.name or f"billed: {describe_match(self.match)}"


class BillingCluster(Strict):
    """A cluster OpenCost prices, and the billed lines that are its cost."""

    name: str
    match: dict[str, Any]
    costs_from: Literal["opencost", "split_cost_allocation"] = "opencost"

    @field_validator("match")
    @classmethod
    def _known_columns(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not value:
            raise ValueError("an empty match would take every billed line")
        return check_match(value)


class Billing(Strict):
    """The top-level ``billing:`` section."""

    sources: list[str] = Field(default_factory=list)
    clusters: list[BillingCluster] = Field(default_factory=list)
    focus_allocations: Literal["origin", "allocated"] = "origin"

    @field_validator("sources", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("clusters")
    @classmethod
    def _names_unique(cls, value: list[BillingCluster]) -> list[BillingCluster]:
        seen: set[str] = set()
        for i, cluster in enumerate(value):
            if cluster.name in seen:
                raise ValueError(f"[{i}].name: cluster '{cluster.name}' is listed twice")
            seen.add(cluster.name)
        return value
