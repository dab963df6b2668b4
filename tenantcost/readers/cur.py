"""AWS CUR 2.0 (Data Exports) rows as FOCUS rows: the column mapping, in SQL.

CUR 2.0 has a fixed column set, with ``product`` and ``resource_tags`` as MAP columns. Each
FOCUS column the canonical billing view needs is derived as the FinOps Foundation's CUR
converter (focus_converters, ``conversion_configs/aws``) and AWS's FOCUS export derive it;
docs/billing-data.md has the table. The two money columns:

* **BilledCost** = ``line_item_net_unblended_cost`` where the export has it (discounts applied),
  else ``line_item_unblended_cost``. Savings-Plan-covered usage is billed at on-demand rates
  and cancelled by its ``SavingsPlanNegation`` row, so the invoice carries the plan's fee.
* **EffectiveCost** (amortized), by ``line_item_line_item_type``: covered usage at the plan's
  or reservation's effective cost, the unused part of a plan's or reservation's commitment on
  its fee row, 0 for negations and up-front fees (amortized into usage instead), the billed
  cost for everything else. The ``_net_`` variants are used where the export has them.

Rows with ``split_line_item_parent_resource_id`` are EKS split cost allocation rows: they go to
the split view, never to the billing view, where their parent instance line already is.
"""

from __future__ import annotations

from collections.abc import Callable

from tenantcost.duck import quote
from tenantcost.readers.billing_cells import Cell, decimal_cell, literal, text_value

REQUIRED: tuple[str, ...] = (
    "bill_billing_period_end_date", "bill_billing_period_start_date", "bill_payer_account_id",
    "line_item_currency_code", "line_item_line_item_type", "line_item_unblended_cost",
    "line_item_usage_end_date", "line_item_usage_start_date",
)  # fmt: skip

MONEY_SOURCES: tuple[str, ...] = (
    "line_item_unblended_cost", "line_item_net_unblended_cost",
    "savings_plan_savings_plan_effective_cost", "savings_plan_net_savings_plan_effective_cost",
    "savings_plan_total_commitment_to_date", "savings_plan_used_commitment",
    "reservation_effective_cost", "reservation_net_effective_cost",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_net_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee", "reservation_net_unused_recurring_fee",
    "split_line_item_split_cost", "split_line_item_net_split_cost",
    "split_line_item_unused_cost", "split_line_item_net_unused_cost",
)  # fmt: skip

CHARGE_CATEGORY = {
    "Usage": "Usage", "DiscountedUsage": "Usage", "SavingsPlanCoveredUsage": "Usage",
    "SavingsPlanNegation": "Usage", "EdpDiscount": "Usage", "PrivateRateDiscount": "Usage",
    "BundledDiscount": "Usage", "Discount": "Usage", "DistributorDiscount": "Usage",
    "Fee": "Purchase", "RIFee": "Purchase", "SavingsPlanRecurringFee": "Purchase",
    "SavingsPlanUpfrontFee": "Purchase", "Tax": "Tax", "Credit": "Credit", "Refund": "Credit",
}  # fmt: skip
"""``line_item_line_item_type`` -> FOCUS ChargeCategory (a Refund is a Credit correction)."""

FREQUENCY = {"Fee": "One-Time", "SavingsPlanUpfrontFee": "One-Time", "RIFee": "Recurring",
             "SavingsPlanRecurringFee": "Recurring"}  # fmt: skip
PRICING = {"OnDemand": "Standard", "Reserved": "Committed", "Spot": "Dynamic"}

TAG_SPELLINGS = {
    "aws:eks:cluster-name": ("aws:eks:cluster-name", "aws_eks_cluster_name"),
    "aws:eks:namespace": ("aws:eks:namespace", "aws_eks_namespace"),
    "aws:eks:workload-name": ("aws:eks:workload-name", "aws_eks_workload_name"),
    "aws:eks:workload-type": ("aws:eks:workload-type", "aws_eks_workload_type"),
    "aws:eks:node": ("aws:eks:node", "aws_eks_node"),
}
"""The EKS split tags as AWS spells them, and as a normalised export key (docs/billing-data.md)."""

Lookup = Callable[[str], str | None]
"""A CUR column name -> the quoted reference to it in the source, or None when absent."""


def is_cur(columns: set[str]) -> bool:
    """A CUR 2.0 dataset (its cost and line-item-type columns)."""
    return {"line_item_unblended_cost", "line_item_line_item_type"} <= columns


def _case(ref: str, mapping: dict[str, str], default: str) -> str:
    whens = " ".join(f"WHEN {literal(k)} THEN {literal(v)}" for k, v in mapping.items())
    return f"CASE {ref} {whens} ELSE {default} END"


def product_field(col: Lookup, flat: str, key: str) -> str:
    """A product attribute: its flattened column, else the ``product`` MAP's key."""
    parts = [f"CAST({ref} AS VARCHAR)" for ref in (col(flat),) if ref]
    product = col("product")
    if product:
        parts.append(f"{product}[{literal(key)}]")
    return f"NULLIF(COALESCE({', '.join(parts)}), '')" if parts else "NULL"


def tag_value(col: Lookup, tag: str) -> str:
    """The value of an EKS tag in ``resource_tags`` (either spelling), '' when absent."""
    tags = col("resource_tags")
    if tags is None:
        return "''"
    lookups = ", ".join(f"{tags}[{literal(k)}]" for k in TAG_SPELLINGS[tag])
    return f"COALESCE({lookups}, '')"


def text_columns(col: Lookup) -> dict[str, str]:
    """The FOCUS text columns of the canonical view, from CUR 2.0 columns."""
    kind = col("line_item_line_item_type") or "NULL"
    sp_arn = text_value(col("savings_plan_savings_plan_a_r_n"))
    ri_arn = text_value(col("reservation_reservation_a_r_n"))
    t = text_value
    return {
        "BillingAccountId": t(col("bill_payer_account_id")),
        "BillingAccountName": t(col("bill_payer_account_name")),
        "SubAccountId": t(col("line_item_usage_account_id")),
        "SubAccountName": t(col("line_item_usage_account_name")),
        "InvoiceId": t(col("bill_invoice_id")),
        "ProviderName": "'AWS'",
        "PublisherName": t(col("bill_billing_entity")),
        "InvoiceIssuerName": t(col("bill_invoicing_entity")),
        "ServiceName": f"COALESCE({product_field(col, 'product_product_name', 'product_name')},"
        f" {product_field(col, 'product_servicecode', 'servicecode')},"
        f" NULLIF({t(col('line_item_product_code'))}, ''), '')",
        "ServiceCategory": "''",
        "ResourceId": t(col("line_item_resource_id")),
        "ResourceName": "''",
        "ResourceType": "COALESCE("
        f"{product_field(col, 'product_product_family', 'product_family')}, '')",
        "RegionId": f"COALESCE({product_field(col, 'product_region_code', 'region_code')}, '')",
        "RegionName": f"COALESCE({product_field(col, 'product_location', 'location')}, '')",
        "AvailabilityZone": t(col("line_item_availability_zone")),
        "ChargeCategory": _case(kind, CHARGE_CATEGORY, "''"),
        "ChargeClass": f"CASE WHEN {kind} = 'Refund' THEN 'Correction' ELSE '' END",
        "ChargeDescription": t(col("line_item_line_item_description")),
        "ChargeFrequency": _case(kind, FREQUENCY, "'Usage-Based'"),
        "SkuId": f"COALESCE({product_field(col, 'product_sku', 'sku')}, '')",
        "SkuPriceId": t(col("pricing_rate_code")),
        "PricingCategory": f"CASE WHEN {kind} = 'SavingsPlanCoveredUsage' THEN 'Committed' ELSE"
        f" {_case(t(col('pricing_term')), PRICING, chr(39) * 2)} END",
        "CommitmentDiscountId": f"CASE WHEN {sp_arn} <> '' THEN {sp_arn} ELSE {ri_arn} END",
        "CommitmentDiscountType": f"CASE WHEN {sp_arn} <> '' THEN 'Savings Plan'"
        f" WHEN {ri_arn} <> '' THEN 'Reserved Instance' ELSE '' END",
        "CommitmentDiscountCategory": f"CASE WHEN {sp_arn} <> '' THEN 'Spend'"
        f" WHEN {ri_arn} <> '' THEN 'Usage' ELSE '' END",
        "CommitmentDiscountStatus": f"CASE WHEN {kind} IN ('SavingsPlanCoveredUsage',"
        " 'DiscountedUsage') THEN 'Used' ELSE '' END",
        "BillingCurrency": t(col("line_item_currency_code")),
    }


TEXT_SOURCES: dict[str, str] = {
    "BillingAccountId": "bill_payer_account_id", "BillingAccountName": "bill_payer_account_name",
    "SubAccountId": "line_item_usage_account_id",
    "SubAccountName": "line_item_usage_account_name", "InvoiceId": "bill_invoice_id",
    "PublisherName": "bill_billing_entity", "InvoiceIssuerName": "bill_invoicing_entity",
    "ResourceId": "line_item_resource_id", "AvailabilityZone": "line_item_availability_zone",
    "ChargeDescription": "line_item_line_item_description", "SkuPriceId": "pricing_rate_code",
    "BillingCurrency": "line_item_currency_code",
    "ServiceName": "product", "ResourceType": "product", "RegionId": "product",
    "RegionName": "product", "SkuId": "product",
    "CommitmentDiscountId": "savings_plan_savings_plan_a_r_n",
    "ParentResourceId": "split_line_item_parent_resource_id", "Pod": "line_item_resource_id",
    "Cluster": "resource_tags", "Namespace": "resource_tags", "WorkloadName": "resource_tags",
    "WorkloadType": "resource_tags", "Node": "resource_tags",
}  # fmt: skip
"""The CUR 2.0 column a canonical text column is read from, named by an error about it (a
``product`` attribute may come from its flattened ``product_*`` column too)."""
SPLIT_TEXT: tuple[str, ...] = ("ParentResourceId", "Cluster", "Namespace", "WorkloadName",
                               "WorkloadType", "Node", "Pod")  # fmt: skip
"""The text columns of a split row (``split_columns``), stored with it."""


def money_cells(col: Lookup, dtype: Callable[[str], str]) -> dict[str, Cell]:
    """Each CUR money column the export has, as an exact decimal cell."""
    cells: dict[str, Cell] = {}
    for name in MONEY_SOURCES:
        ref = col(name)
        if ref is not None:
            cells[name] = decimal_cell(ref, dtype(name))
    return cells


def _either(cells: dict[str, Cell], net: str, gross: str) -> str:
    values = [cells[n].value for n in (net, gross) if n in cells]
    return f"COALESCE({', '.join(values)})" if values else "CAST(NULL AS DECIMAL(38,18))"


def billed_cost(cells: dict[str, Cell]) -> str:
    """BilledCost: net unblended where the export has it, else unblended."""
    return _either(cells, "line_item_net_unblended_cost", "line_item_unblended_cost")


def effective_cost(col: Lookup, cells: dict[str, Cell]) -> str:
    """EffectiveCost (amortized) by line item type, as AWS's FOCUS mapping derives it."""
    kind = col("line_item_line_item_type") or "NULL"
    ri_arn = text_value(col("reservation_reservation_a_r_n"))
    null = "CAST(NULL AS DECIMAL(38,18))"
    total = cells.get("savings_plan_total_commitment_to_date")
    used = cells.get("savings_plan_used_commitment")
    unused_sp = f"({total.value}) - ({used.value})" if total and used else null
    upfront = _either(
        cells,
        "reservation_net_unused_amortized_upfront_fee_for_billing_period",
        "reservation_unused_amortized_upfront_fee_for_billing_period",
    )
    recurring = _either(
        cells, "reservation_net_unused_recurring_fee", "reservation_unused_recurring_fee"
    )
    ri_unused = f"({upfront}) + ({recurring})"
    sp_used = _either(
        cells,
        "savings_plan_net_savings_plan_effective_cost",
        "savings_plan_savings_plan_effective_cost",
    )
    ri_used = _either(cells, "reservation_net_effective_cost", "reservation_effective_cost")
    zero = "CAST(0 AS DECIMAL(38,18))"
    return (
        f"CASE WHEN {kind} = 'SavingsPlanCoveredUsage' THEN {sp_used}"
        f" WHEN {kind} = 'SavingsPlanRecurringFee' THEN {unused_sp}"
        f" WHEN {kind} IN ('SavingsPlanNegation', 'SavingsPlanUpfrontFee') THEN {zero}"
        f" WHEN {kind} = 'DiscountedUsage' THEN {ri_used}"
        f" WHEN {kind} = 'RIFee' THEN {ri_unused}"
        f" WHEN {kind} = 'Fee' AND {ri_arn} <> '' THEN {zero}"
        f" ELSE {billed_cost(cells)} END"
    )


def split_flag(col: Lookup) -> str:
    """True for an EKS split cost allocation row."""
    parent = col("split_line_item_parent_resource_id")
    return "FALSE" if parent is None else f"COALESCE(CAST({parent} AS VARCHAR), '') <> ''"


def split_columns(col: Lookup, cells: dict[str, Cell]) -> dict[str, str]:
    """The split view's columns of a split row (``readers.billing.SPLIT_COLUMNS``)."""
    parent = text_value(col("split_line_item_parent_resource_id"))
    node = tag_value(col, "aws:eks:node")
    return {
        "ParentResourceId": parent,
        "Cluster": tag_value(col, "aws:eks:cluster-name"),
        "Namespace": tag_value(col, "aws:eks:namespace"),
        "WorkloadName": tag_value(col, "aws:eks:workload-name"),
        "WorkloadType": tag_value(col, "aws:eks:workload-type"),
        "Node": f"CASE WHEN {node} <> '' THEN {node} ELSE {parent} END",
        "Pod": text_value(col("line_item_resource_id")),
        "SplitCost": _either(cells, "split_line_item_net_split_cost", "split_line_item_split_cost"),
        "UnusedCost": _either(
            cells, "split_line_item_net_unused_cost", "split_line_item_unused_cost"
        ),
    }


def quoted_lookup(names: dict[str, str]) -> Lookup:
    """A :data:`Lookup` over a file's columns (``names``: lower-case -> spelling)."""
    return lambda name: quote(names[name]) if name in names else None
