"""FOCUS column sets of versions 1.0 to 1.3, and how each maps to the canonical billing view.

The canonical view (``tenantcost.readers.billing``) speaks the column names of the newest
version; older data is renamed, never guessed. What changed between the versions, checked
against the specification (FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, tags v1.0, v1.1, v1.2
and the 1.3 columns), and how each change is handled (docs/billing-data.md has the table):

* 1.0 is the base set. Its forerunners' names (``AmortizedCost``, ``ChargeType``, ``Region``
  of 0.5 / 1.0-preview) are read as ``EffectiveCost``, ``ChargeCategory``, ``RegionId``.
* 1.1 adds ``CapacityReservation*``, ``CommitmentDiscountQuantity/Unit``,
  ``ServiceSubcategory``, ``SkuMeter``, ``SkuPriceDetails``: none renamed.
* 1.2 adds ``InvoiceId`` (older data: one invoice named ``(no invoice id)``),
  ``BillingAccountType``, ``SubAccountType`` and the ``PricingCurrency*`` columns.
* 1.3 deprecates ``ProviderName`` and ``PublisherName`` for ``ServiceProviderName`` (and adds
  ``HostProviderName``): a dataset without ``ProviderName`` has it from
  ``ServiceProviderName``. It adds split cost allocation (``AllocatedMethodId``,
  ``AllocatedMethodDetails``, ``AllocatedResourceId``, ``AllocatedResourceName``,
  ``AllocatedTags``) and ``ContractApplied``.

Column names are matched case-insensitively (``InvoiceID`` as the 1.2 changelog spells it is
``InvoiceId``), since FOCUS columns are identifiers and DuckDB resolves them so anyway.
"""

from __future__ import annotations

FOCUS_10_COLUMNS: tuple[str, ...] = (
    "AvailabilityZone", "BilledCost", "BillingAccountId", "BillingAccountName",
    "BillingCurrency", "BillingPeriodEnd", "BillingPeriodStart", "ChargeCategory",
    "ChargeClass", "ChargeDescription", "ChargeFrequency", "ChargePeriodEnd",
    "ChargePeriodStart", "CommitmentDiscountCategory", "CommitmentDiscountId",
    "CommitmentDiscountName", "CommitmentDiscountStatus", "CommitmentDiscountType",
    "ConsumedQuantity", "ConsumedUnit", "ContractedCost", "ContractedUnitPrice",
    "EffectiveCost", "InvoiceIssuerName", "ListCost", "ListUnitPrice", "PricingCategory",
    "PricingQuantity", "PricingUnit", "ProviderName", "PublisherName", "RegionId",
    "RegionName", "ResourceId", "ResourceName", "ResourceType", "ServiceCategory",
    "ServiceName", "SkuId", "SkuPriceId", "SubAccountId", "SubAccountName", "Tags",
)  # fmt: skip
"""FOCUS 1.0's columns (specification/columns at tag v1.0)."""

FOCUS_11_ADDED: tuple[str, ...] = (
    "CapacityReservationId", "CapacityReservationStatus", "CommitmentDiscountQuantity",
    "CommitmentDiscountUnit", "ServiceSubcategory", "SkuMeter", "SkuPriceDetails",
)  # fmt: skip
FOCUS_12_ADDED: tuple[str, ...] = (
    "BillingAccountType", "InvoiceId", "PricingCurrency", "PricingCurrencyContractedUnitPrice",
    "PricingCurrencyEffectiveCost", "PricingCurrencyListUnitPrice", "SubAccountType",
)  # fmt: skip
FOCUS_13_ADDED: tuple[str, ...] = (
    "AllocatedMethodDetails", "AllocatedMethodId", "AllocatedResourceId",
    "AllocatedResourceName", "AllocatedTags", "ContractApplied", "HostProviderName",
    "ServiceProviderName",
)  # fmt: skip

FOCUS_COLUMNS: dict[str, tuple[str, ...]] = {
    "1.0": FOCUS_10_COLUMNS,
    "1.1": tuple(sorted(FOCUS_10_COLUMNS + FOCUS_11_ADDED)),
    "1.2": tuple(sorted(FOCUS_10_COLUMNS + FOCUS_11_ADDED + FOCUS_12_ADDED)),
    "1.3": tuple(sorted(FOCUS_10_COLUMNS + FOCUS_11_ADDED + FOCUS_12_ADDED + FOCUS_13_ADDED)),
}
"""Every column of each version (a dataset may omit conditional ones)."""

REQUIRED: tuple[str, ...] = (
    "BilledCost", "BillingAccountId", "BillingCurrency", "BillingPeriodEnd",
    "BillingPeriodStart", "ChargeCategory", "ChargePeriodEnd", "ChargePeriodStart",
    "EffectiveCost", "ServiceName",
)  # fmt: skip
"""Mandatory in every version and needed by the allocation: a file without one is refused.
Other columns may be absent (conditional in FOCUS); they read as ``''``."""

ALIASES: dict[str, tuple[str, ...]] = {
    "EffectiveCost": ("AmortizedCost",),
    "ChargeCategory": ("ChargeType",),
    "RegionId": ("Region",),
    "ProviderName": ("ServiceProviderName",),
    "PublisherName": ("ServiceProviderName",),
}
"""Canonical column -> older (or newer) names read in its place when it is absent."""

MONEY = ("BilledCost", "EffectiveCost")
TIMES = ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd")

ALLOCATION_KEY: tuple[str, ...] = (
    "BillingAccountId", "SubAccountId", "ResourceId", "ChargeCategory", "ChargeClass",
    "ChargeDescription", "SkuPriceId", "CommitmentDiscountId", "PricingCategory",
)  # fmt: skip
"""With ChargePeriodStart/End: the dimensions an allocated charge repeats from its origin
charge (FOCUS 1.3, split cost allocation: dimensions MUST match the origin charge), so they
pair each origin charge with the allocated charges split from it."""


def is_focus(columns: set[str]) -> bool:
    """A FOCUS dataset: it has ``BilledCost`` (CUR has none of the FOCUS names)."""
    return "billedcost" in columns


def focus_version(columns: set[str]) -> str:
    """The lowest version whose added columns the file shows (informative only)."""
    for version, added in (("1.3", FOCUS_13_ADDED), ("1.2", FOCUS_12_ADDED),
                           ("1.1", FOCUS_11_ADDED)):  # fmt: skip
        if any(c.lower() in columns for c in added):
            return version
    return "1.0"


def resolve(column: str, names: dict[str, str]) -> str | None:
    """The file's own spelling of canonical ``column`` (or of an alias), None if absent.

    ``names`` maps each lower-cased column name of the file to its spelling.
    """
    for candidate in (column, *ALIASES.get(column, ())):
        found = names.get(candidate.lower())
        if found is not None:
            return found
    return None
