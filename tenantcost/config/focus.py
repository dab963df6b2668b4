"""The ``focus:`` section of the rule file: what a FOCUS export says that tenantcost cannot know.

``tenantcost export focus`` writes the allocation as FOCUS rows (docs/focus.md). FOCUS requires
columns about the billing relationship (the billing account, who provides the service, who
issues the invoice, which service category a service belongs to) that no cost or usage input
carries: they are facts about the company, so they live in the rule file, dated and reviewed
with the rules. Their defaults (``defaults.yaml``) make an export that validates; a company
sets its own names before finance loads the file.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tenantcost.config.base import Strict
from tenantcost.config.defaults import factory

ServiceCategory = Literal[
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
]
"""FOCUS 1.2's allowed ServiceCategory values (a typo is refused here, not by finance's tool)."""

NonEmpty = Annotated[str, Field(min_length=1, pattern=r"\S")]


class Focus(Strict):
    """Values of the FOCUS columns that describe the billing relationship (module doc)."""

    billing_account_id: NonEmpty = Field(
        default_factory=factory("focus", "billing_account_id"), validate_default=True
    )
    """BillingAccountId: the account the costs are reported under (e.g. the cloud account)."""
    billing_account_name: NonEmpty | None = Field(
        default_factory=factory("focus", "billing_account_name"), validate_default=True
    )
    """BillingAccountName; null (omit) when the account has no display name."""
    provider_name: NonEmpty = Field(
        default_factory=factory("focus", "provider_name"), validate_default=True
    )
    """ProviderName (ServiceProviderName in 1.3): who makes the services available, here the
    platform that runs the SaaS."""
    publisher_name: NonEmpty = Field(
        default_factory=factory("focus", "publisher_name"), validate_default=True
    )
    """PublisherName: who produced the services."""
    invoice_issuer_name: NonEmpty = Field(
        default_factory=factory("focus", "invoice_issuer_name"), validate_default=True
    )
    """InvoiceIssuerName: who invoices the underlying costs (the cloud provider, a reseller)."""
    host_provider_name: NonEmpty = Field(
        default_factory=factory("focus", "host_provider_name"), validate_default=True
    )
    """HostProviderName (1.3 only): where the Kubernetes nodes run."""
    service_category: ServiceCategory = Field(
        default_factory=factory("focus", "service_category"), validate_default=True
    )
    """ServiceCategory of every ServiceName not listed in ``service_categories``."""
    service_categories: dict[NonEmpty, ServiceCategory] = Field(
        default_factory=factory("focus", "service_categories"), validate_default=True
    )
    """ServiceCategory per ServiceName (a workload's service, an external cost's name, ...)."""
    billed_cost: Literal["zero", "effective"] = Field(
        default_factory=factory("focus", "billed_cost"), validate_default=True
    )
    """``zero``: BilledCost 0 on every row, because this file splits costs already invoiced
    elsewhere (loading it next to the provider's own FOCUS data does not count an invoice
    twice); ``effective``: BilledCost equals EffectiveCost, for a file that *is* the internal
    chargeback invoice."""
