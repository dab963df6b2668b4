"""The invoice in the rule file: ``billing:`` (top level) and each version's ``billed:`` list.

Billing data (FOCUS, AWS CUR 2.0) is what the company pays. Two kinds of billed line meet an
allocation:

* lines that **are** a cluster OpenCost prices (``billing.clusters``): their effective cost
  reprices OpenCost's rows of that cluster (``tenantcost.reprice``), so the same spend is never
  counted twice, once as OpenCost's node cost and again as the bill's instance line
  (docs/rules.md, "Billing and billed lines");
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
    """``where`` starts the message: the formatter turns a leading ``word: `` into a path."""
    if isinstance(value, list):
        if not value:
            raise ValueError(f"{where}: empty list matches nothing")
        if not all(isinstance(v, str) for v in value):
            raise ValueError(f"{where}: expected a text pattern or a list of them, got {value!r}")
    elif not isinstance(value, str):
        raise ValueError(f"{where}: expected a text pattern or a list of them, got {value!r}")


def _check_tags(value: Any) -> None:
    """``tags:``: a non-empty mapping of tag key to pattern. A tag pattern needs the tag to be
    present and non-empty, so an empty pattern could never hold: refused, not left to match
    nothing."""
    if not isinstance(value, dict):
        raise ValueError(f"tags: expected a mapping of tag key to pattern, got {value!r}")
    if not value:
        raise ValueError("tags: an empty mapping names no tag; give {tag key: pattern}")
    for tag, pattern in value.items():
        if not isinstance(tag, str) or not tag:
            raise ValueError(f"tags: tag keys must be non-empty text, got {tag!r}")
        _check_patterns(f"tags: tag '{tag}'", pattern)
        if "" in ([pattern] if isinstance(pattern, str) else pattern):
            raise ValueError(
                f"tags: tag '{tag}': an empty pattern matches no line (a tag must be present "
                "and non-empty); use '*' for any value"
            )


def _where(column: str) -> str:
    """A column the formatter can take as a path step (``ServiceName: ...`` becomes
    ``match.ServiceName``); anything else is named inside the message only."""
    return f"{column}: " if column.replace("_", "").isalpha() else ""


def check_match(value: dict[str, Any]) -> dict[str, Any]:
    """A billed ``match:``: known FOCUS columns and ``tags:``; each a pattern or a list."""
    for column, pattern in value.items():
        if column == TAGS:
            _check_tags(pattern)
            continue
        if column not in BILLING_MATCH_COLUMNS:
            raise ValueError(
                f"{_where(column)}unknown FOCUS column '{column}'"
                f"{did_you_mean(column, (*BILLING_MATCH_COLUMNS, TAGS), ignore_case=True)}; "
                f"columns are {', '.join(BILLING_MATCH_COLUMNS)} and tags"
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

    @field_validator("client_from", mode="before")
    @classmethod
    def _tag_mapping(cls, value: Any) -> Any:
        # A workload's client_from is a property name; a billed line's is a tag: say so.
        if value is None or isinstance(value, dict | ClientFrom):
            return value
        raise ValueError(
            f"expected {{tag: <tag key>}} (the tag whose value names the client), got {value!r}"
        )

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
