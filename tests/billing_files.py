"""Billing files for tests, in the real column sets: FOCUS 1.0–1.3 and AWS CUR 2.0.

``focus_rows`` gives FOCUS rows (1.2/1.3 names, every mandatory column filled plausibly for an
AWS-like hourly usage line; the FinOps Foundation's validator passes a 1.2 file of them);
override any column per row. ``write_focus`` writes them with *all* the columns of one version
(conditional ones empty unless given) as CSV, gzip CSV or Parquet; ``write_cur2`` writes CUR 2.0
Parquet rows with its MAP columns ``product`` and ``resource_tags``.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tenantcost.readers.focus_columns import FOCUS_COLUMNS

FOCUS_DEFAULTS: dict[str, str] = {
    "AvailabilityZone": "eu-west-3a",
    "BilledCost": "0.0960000000",
    "BillingAccountId": "111111111111",
    "BillingAccountName": "Example SaaS",
    "BillingAccountType": "Billing Account",
    "BillingCurrency": "USD",
    "BillingPeriodStart": "2026-11-01T00:00:00Z",
    "BillingPeriodEnd": "2026-12-01T00:00:00Z",
    "ChargeCategory": "Usage",
    "ChargeClass": "",
    "ChargeDescription": "m6i.large Linux on-demand instance hour",
    "ChargeFrequency": "Usage-Based",
    "ChargePeriodStart": "2026-11-03T00:00:00Z",
    "ChargePeriodEnd": "2026-11-03T01:00:00Z",
    "ConsumedQuantity": "1.0",
    "ConsumedUnit": "Hours",
    "ContractedCost": "0.0960000000",
    "ContractedUnitPrice": "0.0960000000",
    "EffectiveCost": "0.0960000000",
    "InvoiceId": "INV-2026-11-1",
    "InvoiceIssuerName": "AWS",
    "ListCost": "0.0960000000",
    "ListUnitPrice": "0.0960000000",
    "PricingCategory": "Standard",
    "PricingCurrency": "USD",
    "PricingCurrencyContractedUnitPrice": "0.0960000000",
    "PricingCurrencyEffectiveCost": "0.0960000000",
    "PricingCurrencyListUnitPrice": "0.0960000000",
    "PricingQuantity": "1.0",
    "PricingUnit": "Hours",
    "ProviderName": "AWS",
    "PublisherName": "AWS",
    "RegionId": "eu-west-3",
    "RegionName": "Europe (Paris)",
    "ResourceId": "i-0123456789abcdef0",
    "ResourceName": "node-a",
    "ResourceType": "Instance",
    "ServiceCategory": "Compute",
    "ServiceName": "Amazon Elastic Compute Cloud",
    "ServiceSubcategory": "Virtual Machines",
    "SkuId": "SKU-M6I-LARGE",
    "SkuMeter": "BoxUsage",
    "SkuPriceId": "SKU-M6I-LARGE-OD",
    "SubAccountId": "222222222222",
    "SubAccountName": "prod",
    "SubAccountType": "Account",
    "Tags": '{"eks:cluster-name": "prod-paris"}',
}
"""A plausible FOCUS 1.2 usage row: one on-demand instance hour."""

MONEY = {
    "BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "ContractedUnitPrice",
    "ListUnitPrice", "PricingQuantity", "ConsumedQuantity", "PricingCurrencyContractedUnitPrice",
    "PricingCurrencyEffectiveCost", "PricingCurrencyListUnitPrice", "CommitmentDiscountQuantity",
}  # fmt: skip
TIMES = {"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"}


def focus_rows(*overrides: Mapping[str, Any], **common: Any) -> list[dict[str, str]]:
    """One row per mapping in ``overrides`` (none: one default row), ``common`` on every row.

    A money override given alone (``BilledCost``) sets ``EffectiveCost``, ``ListCost`` and
    ``ContractedCost`` too, unless those are given.
    """
    rows = []
    for override in overrides or ({},):
        given = {**common, **override}
        row = dict(FOCUS_DEFAULTS)
        if "BilledCost" in given:
            for twin in ("EffectiveCost", "ListCost", "ContractedCost",
                         "PricingCurrencyEffectiveCost"):  # fmt: skip
                row[twin] = str(given["BilledCost"])
        row.update({k: "" if v is None else str(v) for k, v in given.items()})
        rows.append(row)
    return rows


def version_columns(version: str, rows: Sequence[Mapping[str, str]]) -> list[str]:
    """The columns of a ``version`` file: the version's own, plus any ``x_`` columns given."""
    extra = sorted({k for row in rows for k in row if k.startswith("x_")})
    return [*FOCUS_COLUMNS[version], *extra]


def _cells(version: str, rows: Sequence[Mapping[str, str]]) -> tuple[list[str], list[list[str]]]:
    columns = version_columns(version, rows)
    table = []
    for row in rows:
        full = dict(row)
        if version == "1.3":
            full.setdefault("ServiceProviderName", full.get("ProviderName", ""))
            full.setdefault("HostProviderName", full.get("ProviderName", ""))
        table.append([full.get(c, "") for c in columns])
    return columns, table


def write_focus(path: Path, rows: Sequence[Mapping[str, str]], version: str = "1.2",
                fmt: str = "csv") -> Path:  # fmt: skip
    """Write FOCUS ``rows`` with every column of ``version``; ``fmt`` csv, csv.gz or parquet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    columns, table = _cells(version, rows)
    if fmt == "parquet":
        pq.write_table(_arrow(columns, table), path)
        return path
    opener = gzip.open if fmt == "csv.gz" else open
    with opener(path, "wt", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(table)
    return path


def _arrow(columns: list[str], table: list[list[str]]) -> pa.Table:
    """Money as decimals, periods as UTC timestamps; a column with a cell that is neither
    (a bad-input test) stays text, as a careless exporter would write it."""
    arrays = []
    for i, column in enumerate(columns):
        values = [row[i] or None for row in table]
        text = pa.array(values, type=pa.string())
        try:
            if column in MONEY:
                typed = pa.array([None if v is None else Decimal(v) for v in values],
                                 type=pa.decimal128(38, 12))  # fmt: skip
            elif column in TIMES:
                typed = pc.strptime(text, "%Y-%m-%dT%H:%M:%SZ", "ms").cast(
                    pa.timestamp("ms", tz="UTC"))  # fmt: skip
            else:
                typed = text
        except (ArithmeticError, pa.ArrowInvalid):
            typed = text
        arrays.append(typed)
    return pa.Table.from_arrays(arrays, names=columns)


CUR2_DEFAULTS: dict[str, Any] = {
    "bill_bill_type": "Anniversary",
    "bill_billing_entity": "AWS",
    "bill_billing_period_start_date": "2026-11-01T00:00:00Z",
    "bill_billing_period_end_date": "2026-12-01T00:00:00Z",
    "bill_invoice_id": "EUINFR26-0001",
    "bill_invoicing_entity": "Amazon Web Services EMEA SARL",
    "bill_payer_account_id": "111111111111",
    "bill_payer_account_name": "Example SaaS",
    "identity_line_item_id": "li-1",
    "identity_time_interval": "2026-11-03T00:00:00Z/2026-11-03T01:00:00Z",
    "line_item_availability_zone": "eu-west-3a",
    "line_item_currency_code": "USD",
    "line_item_line_item_description": "USD 0.096 per On Demand Linux m6i.large Instance Hour",
    "line_item_line_item_type": "Usage",
    "line_item_net_unblended_cost": None,
    "line_item_operation": "RunInstances",
    "line_item_product_code": "AmazonEC2",
    "line_item_resource_id": "i-0123456789abcdef0",
    "line_item_unblended_cost": "0.096",
    "line_item_unblended_rate": "0.096",
    "line_item_usage_account_id": "222222222222",
    "line_item_usage_account_name": "prod",
    "line_item_usage_amount": "1",
    "line_item_usage_start_date": "2026-11-03T00:00:00Z",
    "line_item_usage_end_date": "2026-11-03T01:00:00Z",
    "line_item_usage_type": "EUW3-BoxUsage:m6i.large",
    "pricing_public_on_demand_cost": "0.096",
    "pricing_rate_code": "RATE-1",
    "pricing_term": "OnDemand",
    "product": {"product_name": "Amazon Elastic Compute Cloud", "region": "eu-west-3"},
    "product_location": "EU (Paris)",
    "product_product_family": "Compute Instance",
    "product_region_code": "eu-west-3",
    "product_servicecode": "AmazonEC2",
    "product_sku": "SKU1",
    "reservation_effective_cost": "0",
    "reservation_net_effective_cost": None,
    "reservation_reservation_a_r_n": "",
    "reservation_unused_amortized_upfront_fee_for_billing_period": "0",
    "reservation_unused_recurring_fee": "0",
    "resource_tags": {"eks:cluster-name": "prod-paris"},
    "savings_plan_savings_plan_a_r_n": "",
    "savings_plan_savings_plan_effective_cost": "0",
    "savings_plan_net_savings_plan_effective_cost": None,
    "savings_plan_total_commitment_to_date": "0",
    "savings_plan_used_commitment": "0",
    "split_line_item_parent_resource_id": None,
    "split_line_item_split_cost": None,
    "split_line_item_unused_cost": None,
    "split_line_item_net_split_cost": None,
    "split_line_item_net_unused_cost": None,
    "split_line_item_split_usage_ratio": None,
}
"""A CUR 2.0 row (a subset of its fixed columns: those the reader uses, and a few more)."""

CUR2_MONEY_TYPE = pa.float64()
"""CUR 2.0 Parquet writes costs as double."""


def cur2_rows(*overrides: Mapping[str, Any]) -> list[dict[str, Any]]:
    """CUR 2.0 rows: the defaults, each overridden by one mapping."""
    return [{**CUR2_DEFAULTS, **o} for o in overrides or ({},)]


def write_cur2(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write CUR 2.0 Parquet: costs as double, dates as timestamps, MAP product/resource_tags."""
    path.parent.mkdir(parents=True, exist_ok=True)
    full = [{**CUR2_DEFAULTS, **row} for row in rows]
    arrays, names = [], []
    for column in full[0]:
        values = [row.get(column) for row in full]
        if column in ("product", "resource_tags"):
            arrays.append(pa.array([None if v is None else list(v.items()) for v in values],
                                   type=pa.map_(pa.string(), pa.string())))  # fmt: skip
        elif _is_money(column):
            arrays.append(pa.array([None if v is None else float(v) for v in values],
                                   type=CUR2_MONEY_TYPE))  # fmt: skip
        elif column.endswith("_date"):
            stamps = pa.array(values, type=pa.string())
            arrays.append(pc.strptime(stamps, "%Y-%m-%dT%H:%M:%SZ", "ms"))
        else:
            arrays.append(pa.array([None if v is None else str(v) for v in values], pa.string()))
        names.append(column)
    pq.write_table(pa.Table.from_arrays(arrays, names=names), path)
    return path


def _is_money(column: str) -> bool:
    return column.endswith(("_cost", "_fee", "_commitment", "_to_date", "_rate", "_amount",
                            "_billing_period", "_ratio"))  # fmt: skip


def tags(**values: str) -> str:
    """A Tags JSON text."""
    return json.dumps(values)
