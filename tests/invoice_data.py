"""FOCUS 1.2 billing files for tests: a row writer in the real column set, and three scenarios.

A billing file in a test must look like what AWS, Azure, GCP or OCI export, or the reader is
tested against an invention: every row here carries all 57 columns of the FOCUS 1.2
specification (``specification/columns/*.md`` at tag v1.2 of FinOps-Open-Cost-and-Usage-Spec/
FOCUS_Spec), null as an empty CSV cell, and satisfies the spec's mandatory rules, which
``tests/focus_validator.py`` checks. Amounts are written as exact decimal text.

Scenarios other tests build on (each returns rows; :func:`write_focus_csv` writes them):

* :func:`several_invoices`: one billing period, the same charges spread over several
  ``InvoiceId`` values (marketplace, a second issuer...);
* :func:`daily_grain`: daily charge periods (the grain Azure and GCP often export) against
  hourly OpenCost windows;
* :func:`all_upfront_purchase`: a Savings Plan bought all upfront inside the period (BilledCost
  = the whole term, EffectiveCost 0), then the hours it covers (BilledCost 0, EffectiveCost > 0).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

FOCUS_12_COLUMNS: tuple[str, ...] = (
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingAccountType",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "CapacityReservationId",
    "CapacityReservationStatus",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountQuantity",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "CommitmentDiscountUnit",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingCurrency",
    "PricingCurrencyContractedUnitPrice",
    "PricingCurrencyEffectiveCost",
    "PricingCurrencyListUnitPrice",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SkuId",
    "SkuMeter",
    "SkuPriceDetails",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "SubAccountType",
    "Tags",
)
"""Every column of FOCUS 1.2 (57), in alphabetical order."""

BILLING_ACCOUNT = "aws-payer-123456789012"
"""The payer. AWS writes its 12-digit account number; a digit-only column is read as an
integer by CSV readers (the focus-validator's polars among them), which then fail the
mandatory rule BillingAccountId-C-002-M (type String): the id keeps a text prefix."""
SAAS_ACCOUNT = "100000000001"
SAVINGS_PLAN = "arn:aws:savingsplans::123456789012:savingsplan/3f9c1e2a-7b4d-4c1e-9a8f-0d2e6b5c4a31"
"""The Savings Plan of the examples (spend-based, USD per hour)."""

DEFAULTS: dict[str, str] = {
    "BillingAccountId": BILLING_ACCOUNT,
    "BillingAccountName": "Example SaaS payer",
    "BillingAccountType": "Billing Account",
    "BillingCurrency": "USD",
    "InvoiceIssuerName": "AWS",
    "ProviderName": "AWS",
    "PublisherName": "AWS",
    "PricingCurrency": "USD",
    "SubAccountId": SAAS_ACCOUNT,
    "SubAccountName": "saas-production",
    "SubAccountType": "AWS Account",
    "Tags": "{}",
}


def ts(moment: datetime) -> str:
    """FOCUS date-time text: ISO 8601, UTC, seconds, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def month_bounds(moment: datetime) -> tuple[datetime, datetime]:
    """The calendar month (UTC) holding ``moment``: the billing period."""
    start = moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start + timedelta(days=32)).replace(day=1)
    return start, end


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return ts(value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def focus_row(
    start: datetime,
    end: datetime,
    *,
    billed: Decimal | str,
    effective: Decimal | str,
    invoice: str = "INV-1",
    **columns: Any,
) -> dict[str, str]:
    """One FOCUS 1.2 row: every column, the defaults above, unit prices that multiply out.

    List and contracted prices default to the billed cost per pricing unit (ListCost =
    ListUnitPrice x PricingQuantity must hold); Tax rows get null prices and quantities, as
    the spec requires. ``columns`` override anything (``None`` writes null)."""
    billed, effective = Decimal(str(billed)), Decimal(str(effective))
    period_start, period_end = month_bounds(start)
    category = columns.get("ChargeCategory", "Usage")
    row: dict[str, Any] = {c: None for c in FOCUS_12_COLUMNS} | DEFAULTS
    row |= {
        "BilledCost": billed,
        "EffectiveCost": effective,
        "ListCost": billed,
        "ContractedCost": billed,
        "PricingCurrencyEffectiveCost": effective,
        "BillingPeriodStart": period_start,
        "BillingPeriodEnd": period_end,
        "ChargePeriodStart": start,
        "ChargePeriodEnd": end,
        "ChargeCategory": category,
        "ChargeFrequency": "Usage-Based",
        "InvoiceId": invoice,
    }
    if category in ("Usage", "Purchase"):
        row |= {
            "PricingCategory": "Standard",
            "PricingQuantity": Decimal(1),
            "PricingUnit": "Hours",
            "ListUnitPrice": abs(billed),
            "ContractedUnitPrice": abs(billed),
            "PricingCurrencyListUnitPrice": abs(billed),
            "PricingCurrencyContractedUnitPrice": abs(billed),
        }
    row |= columns
    return {c: _text(row[c]) for c in FOCUS_12_COLUMNS}


def write_focus_csv(path: Path, rows: Iterable[Mapping[str, str]]) -> Path:
    """Write rows as a FOCUS 1.2 CSV file (header = the 57 columns; null = empty cell)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=FOCUS_12_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path


def hours(start: datetime, count: int) -> list[tuple[datetime, datetime]]:
    """``count`` consecutive one-hour charge periods from ``start``."""
    return [(start + timedelta(hours=i), start + timedelta(hours=i + 1)) for i in range(count)]


# --------------------------------------------------------------------------- line kinds


def ec2_instance(
    start: datetime,
    end: datetime,
    *,
    cluster: str,
    instance: str,
    effective: Decimal | str,
    list_price: Decimal | str,
    invoice: str = "INV-1",
    savings_plan: str | None = None,
) -> dict[str, str]:
    """An EKS node's instance-hour(s). Node groups tag their instances with
    ``eks:cluster-name`` and ``kubernetes.io/cluster/NAME`` (not ``aws:eks:cluster-name``,
    which only the split rows carry). With ``savings_plan`` the usage is covered: BilledCost 0,
    EffectiveCost the plan's rate, status Used; else on demand (billed = effective)."""
    qty = Decimal((end - start) // timedelta(hours=1))
    list_unit, effective = Decimal(str(list_price)), Decimal(str(effective))
    columns: dict[str, Any] = {
        "ServiceName": "Amazon Elastic Compute Cloud",
        "ServiceCategory": "Compute",
        "ServiceSubcategory": "Virtual Machines",
        "ResourceType": "Instance",
        "ResourceId": instance,
        "ResourceName": instance,
        "RegionId": "eu-west-3",
        "RegionName": "Europe (Paris)",
        "AvailabilityZone": "eu-west-3a",
        "ChargeDescription": "m6i.3xlarge Linux/UNIX instance-hour",
        "SkuId": "EUW3-BoxUsage:m6i.3xlarge",
        "SkuPriceId": "EUW3-BoxUsage:m6i.3xlarge.OnDemand",
        "SkuMeter": "Compute Instance",
        "SkuPriceDetails": {"InstanceType": "m6i.3xlarge"},
        "ConsumedQuantity": qty,
        "ConsumedUnit": "Hours",
        "PricingQuantity": qty,
        "ListUnitPrice": list_unit,
        "ContractedUnitPrice": list_unit,
        "PricingCurrencyListUnitPrice": list_unit,
        "PricingCurrencyContractedUnitPrice": list_unit,
        "ListCost": list_unit * qty,
        "ContractedCost": list_unit * qty,
        "Tags": {
            "eks:cluster-name": cluster,
            f"kubernetes.io/cluster/{cluster}": "owned",
            "eks:nodegroup-name": f"{cluster}-default",
        },
    }
    if savings_plan is None:
        return focus_row(
            start, end, billed=effective, effective=effective, invoice=invoice, **columns
        )
    columns |= commitment_columns(savings_plan, effective, "Used") | {
        "PricingCategory": "Committed"
    }
    return focus_row(start, end, billed=0, effective=effective, invoice=invoice, **columns)


def commitment_columns(plan: str, quantity: Decimal, status: str | None) -> dict[str, Any]:
    """The commitment columns of a spend-based Savings Plan row (unit: USD of commitment)."""
    return {
        "CommitmentDiscountId": plan,
        "CommitmentDiscountType": "Savings Plan",
        "CommitmentDiscountCategory": "Spend",
        "CommitmentDiscountName": "Compute Savings Plan",
        "CommitmentDiscountStatus": status,
        "CommitmentDiscountQuantity": quantity,
        "CommitmentDiscountUnit": "USD",
    }


def savings_plan_fee(
    start: datetime,
    end: datetime,
    *,
    fee: Decimal | str,
    plan: str = SAVINGS_PLAN,
    invoice: str = "INV-1",
    upfront: bool = False,
    quantity: Decimal | str | None = None,
) -> dict[str, str]:
    """A Savings Plan purchase: the hourly recurring fee (no upfront), or the whole term paid
    at once (``upfront``: ChargeFrequency One-Time). BilledCost = the fee, EffectiveCost 0:
    the cost reaches the statements through the covered usage rows."""
    fee = Decimal(str(fee))
    columns = commitment_columns(
        plan, Decimal(str(quantity if quantity is not None else fee)), None
    )
    return focus_row(
        start,
        end,
        billed=fee,
        effective=0,
        invoice=invoice,
        ChargeCategory="Purchase",
        ChargeFrequency="One-Time" if upfront else "Recurring",
        ServiceName="Savings Plans for AWS Compute usage",
        ServiceCategory="Compute",
        ServiceSubcategory="Other (Compute)",
        ResourceId=plan,
        ResourceName="Compute Savings Plan",
        ResourceType="Savings Plan",
        ChargeDescription=(
            "Savings Plan, all upfront" if upfront else "Savings Plan recurring fee"
        ),
        SkuId="ComputeSP:3yrNoUpfront" if not upfront else "ComputeSP:1yrAllUpfront",
        SkuPriceId="ComputeSP:USD",
        SkuMeter="Savings Plan",
        SkuPriceDetails={},
        **columns,
        **(_per_usd(fee) if upfront else {}),
    )


def _per_usd(amount: Decimal) -> dict[str, Any]:
    """Pricing columns of an amount counted in USD of commitment (unit price 1)."""
    return {
        "PricingQuantity": amount,
        "PricingUnit": "USD",
        "ListUnitPrice": 1,
        "ContractedUnitPrice": 1,
        "PricingCurrencyListUnitPrice": 1,
        "PricingCurrencyContractedUnitPrice": 1,
        "ListCost": amount,
        "ContractedCost": amount,
    }


def savings_plan_unused(
    start: datetime,
    end: datetime,
    *,
    unused: Decimal | str,
    plan: str = SAVINGS_PLAN,
    invoice: str = "INV-1",
) -> dict[str, str]:
    """The part of the hour's commitment no usage took: Usage, status Unused, BilledCost 0,
    EffectiveCost = commitment - used (FOCUS: the commitment's usage rows add up to its
    purchase)."""
    unused = Decimal(str(unused))
    return focus_row(
        start,
        end,
        billed=0,
        effective=unused,
        invoice=invoice,
        PricingCategory="Committed",
        ServiceName="Savings Plans for AWS Compute usage",
        ServiceCategory="Compute",
        ServiceSubcategory="Other (Compute)",
        ResourceId=plan,
        ResourceName="Compute Savings Plan",
        ResourceType="Savings Plan",
        ChargeDescription="Unused Savings Plan commitment",
        SkuId="ComputeSP:3yrNoUpfront",
        SkuPriceId="ComputeSP:USD",
        SkuMeter="Savings Plan",
        **_per_usd(unused),
        **commitment_columns(plan, unused, "Unused"),
    )


def service_usage(
    start: datetime,
    end: datetime,
    *,
    service: str,
    category: str,
    subcategory: str,
    amount: Decimal | str,
    resource: str | None = None,
    resource_type: str | None = None,
    description: str = "",
    invoice: str = "INV-1",
    unit: str = "Hours",
    quantity: Decimal | str = 1,
    unit_price: Decimal | str | None = None,
    **columns: Any,
) -> dict[str, str]:
    """An on-demand usage line (billed = effective) of a service outside the cluster."""
    amount, qty = Decimal(str(amount)), Decimal(str(quantity))
    price = Decimal(str(unit_price)) if unit_price is not None else amount / qty
    sku = (service.replace(" ", "") + ":" + unit)[:64]
    return focus_row(
        start,
        end,
        billed=amount,
        effective=amount,
        invoice=invoice,
        ServiceName=service,
        ServiceCategory=category,
        ServiceSubcategory=subcategory,
        ResourceId=resource,
        ResourceName=resource,
        ResourceType=resource_type if resource else None,
        ChargeDescription=description or service,
        RegionId="eu-west-3",
        RegionName="Europe (Paris)",
        SkuId=sku,
        SkuPriceId=sku + ".OnDemand",
        SkuMeter=unit,
        SkuPriceDetails={},
        ConsumedQuantity=qty,
        ConsumedUnit=unit,
        PricingQuantity=qty,
        PricingUnit=unit,
        ListUnitPrice=price,
        ContractedUnitPrice=price,
        PricingCurrencyListUnitPrice=price,
        PricingCurrencyContractedUnitPrice=price,
        **columns,
    )


def credit(
    start: datetime,
    end: datetime,
    *,
    amount: Decimal | str,
    service: str,
    invoice: str = "INV-1",
    description: str = "AWS promotional credit",
) -> dict[str, str]:
    """A credit: negative, billed = effective = list = contracted (a charge unrelated to others)."""
    return focus_row(
        start,
        end,
        billed=amount,
        effective=amount,
        invoice=invoice,
        ChargeCategory="Credit",
        ChargeFrequency="One-Time",
        ServiceName=service,
        ServiceCategory="Databases",
        ServiceSubcategory="Relational Databases",
        ChargeDescription=description,
    )


def tax(
    start: datetime,
    end: datetime,
    *,
    amount: Decimal | str,
    invoice: str = "INV-1",
    list_cost: Decimal | str | None = None,
    description: str = "VAT 20 %",
) -> dict[str, str]:
    """A tax line: prices, quantities, SKUs and PricingCategory null, as FOCUS requires."""
    amount = Decimal(str(amount))
    cost = Decimal(str(list_cost)) if list_cost is not None else amount
    return focus_row(
        start,
        end,
        billed=amount,
        effective=amount,
        invoice=invoice,
        ChargeCategory="Tax",
        ChargeFrequency="One-Time",
        ServiceName="Tax",
        ServiceCategory="Other",
        ServiceSubcategory="Other (Other)",
        ChargeDescription=description,
        ListCost=cost,
        ContractedCost=cost,
    )


# --------------------------------------------------------------------------- scenarios


def several_invoices(
    start: datetime,
    count: int = 3,
    *,
    invoices: tuple[str, ...] = ("INV-A", "INV-B", "INV-C"),
    amount: Decimal | str = "0.0123456789",
    cluster: str = "cluster-one",
) -> list[dict[str, str]]:
    """``count`` hours of one billing period, each hour's database line on the invoices in
    turn, plus one on-demand node line per hour on the first invoice. Σ BilledCost per
    InvoiceId is each invoice's total."""
    rows: list[dict[str, str]] = []
    for i, (a, b) in enumerate(hours(start, count)):
        rows.append(
            ec2_instance(
                a,
                b,
                cluster=cluster,
                instance="i-0a1b2c3d4e5f60718",
                effective="0.5",
                list_price="0.5",
                invoice=invoices[0],
            )
        )
        rows.append(
            service_usage(
                a,
                b,
                service="Amazon Relational Database Service",
                category="Databases",
                subcategory="Relational Databases",
                amount=amount,
                resource="db-main",
                resource_type="DB Instance",
                invoice=invoices[i % len(invoices)],
            )
        )
    return rows


def daily_grain(
    day: datetime,
    days: int = 2,
    *,
    cluster: str = "cluster-one",
    node_per_day: Decimal | str = "12.3456789012",
    nat_per_day: Decimal | str = "1.0000000007",
) -> list[dict[str, str]]:
    """Daily charge periods (00:00 to 00:00 UTC): a node's day and a NAT gateway's day. Against
    hourly OpenCost windows a day is one repricing period of 24 windows; the NAT day is
    accrued over its 24 hours."""
    rows: list[dict[str, str]] = []
    for i in range(days):
        a = day + timedelta(days=i)
        b = a + timedelta(days=1)
        rows.append(
            ec2_instance(
                a,
                b,
                cluster=cluster,
                instance="i-0a1b2c3d4e5f60718",
                effective=node_per_day,
                list_price=Decimal(str(node_per_day)) / 24,
            )
        )
        rows.append(nat_processing(a, b, amount=nat_per_day))
    return rows


def nat_processing(
    start: datetime,
    end: datetime,
    *,
    amount: Decimal | str,
    gigabytes: Decimal | str | None = None,
    invoice: str = "INV-1",
) -> dict[str, str]:
    """NAT gateway data processing (USD per GB processed), a networking service: FOCUS wants
    one ServiceCategory per ServiceName, so not under the EC2 instances' service name."""
    amount = Decimal(str(amount))
    price = Decimal("0.048")
    qty = Decimal(str(gigabytes)) if gigabytes is not None else amount / price
    return service_usage(
        start,
        end,
        service="Amazon Virtual Private Cloud",
        category="Networking",
        subcategory="Network Infrastructure",
        amount=amount,
        quantity=qty,
        unit_price=price,
        unit="GB",
        invoice=invoice,
        description="$0.048 per GB Data Processed by NAT Gateways",
        resource="arn:aws:ec2:eu-west-3:100000000001:natgateway/nat-0f1e2d3c4b5a69788",
        resource_type="NAT Gateway",
        AvailabilityZone="eu-west-3a",
    )


def all_upfront_purchase(
    purchase_at: datetime,
    covered_hours: int = 3,
    *,
    cluster: str = "cluster-one",
    term_hours: int = 8760,
    hourly: Decimal | str = "0.25",
    list_price: Decimal | str = "0.57844",
    plan: str = "arn:aws:savingsplans::123456789012:savingsplan/all-upfront-1yr",
) -> list[dict[str, str]]:
    """A one-year all-upfront Savings Plan bought in the period (one One-Time Purchase row:
    BilledCost = hourly x term, EffectiveCost 0), then ``covered_hours`` node hours it covers
    (BilledCost 0, EffectiveCost = the hourly commitment: fully used)."""
    hourly = Decimal(str(hourly))
    total = hourly * term_hours
    rows = [
        savings_plan_fee(
            purchase_at,
            purchase_at + timedelta(hours=1),
            fee=total,
            plan=plan,
            upfront=True,
            quantity=total,
        )
    ]
    for a, b in hours(purchase_at, covered_hours):
        rows.append(
            ec2_instance(
                a,
                b,
                cluster=cluster,
                instance="i-0a1b2c3d4e5f60718",
                effective=hourly,
                list_price=list_price,
                savings_plan=plan,
            )
        )
    return rows


# --------------------------------------------------------------------------- the example

INVOICE_CLOSE_HOUR = datetime(2026, 11, 3, 10, tzinfo=UTC)
INVOICE_CLOSE_INVOICE = "INV-2026-11-001"
OTHER_BUSINESS_UNIT = "200000000042"


def invoice_close_rows() -> list[dict[str, str]]:
    """The billing file of ``examples/invoice-close``: the hour of saas-three-clients as the
    invoice shows it (README there). The shipped file must equal these rows."""
    a, b = INVOICE_CLOSE_HOUR, INVOICE_CLOSE_HOUR + timedelta(hours=1)
    inv = INVOICE_CLOSE_INVOICE
    saas_pre_tax = (
        Decimal("0.4")
        + Decimal("0.178")
        + Decimal("0.0452994864")
        - Decimal("0.0314159265")
        + Decimal("0.013697")
    )
    vat = (saas_pre_tax * Decimal("0.2")).quantize(Decimal("1E-10"))
    return [
        ec2_instance(
            a,
            b,
            cluster="cluster-one",
            instance="i-0a1b2c3d4e5f60718",
            effective=Decimal("0.3703567890"),
            list_price="0.57844",
            savings_plan=SAVINGS_PLAN,
            invoice=inv,
        ),
        savings_plan_fee(a, b, fee=Decimal("0.4000000000"), invoice=inv),
        savings_plan_unused(a, b, unused=Decimal("0.0296432110"), invoice=inv),
        service_usage(
            a,
            b,
            service="Amazon Relational Database Service",
            category="Databases",
            subcategory="Relational Databases",
            amount=Decimal("0.1780000000"),
            invoice=inv,
            resource="arn:aws:rds:eu-west-3:100000000001:db:saas-main",
            resource_type="DB Instance",
            description="db.m6g.large Multi-AZ PostgreSQL instance-hour",
        ),
        nat_processing(a, b, amount=Decimal("0.0452994864"), gigabytes="0.9437393", invoice=inv),
        credit(
            a,
            b,
            amount=Decimal("-0.0314159265"),
            service="Amazon Relational Database Service",
            invoice=inv,
        ),
        tax(a, b, amount=vat, invoice=inv, description="VAT 20 % (France)"),
        service_usage(
            a,
            b,
            service="Amazon CloudWatch",
            category="Management and Governance",
            subcategory="Observability",
            amount=Decimal("0.0136970000"),
            invoice=inv,
            unit="GB",
            quantity="0.027394",
            unit_price="0.5",
            description="$0.50 per GB of log data ingested",
        ),
        service_usage(
            a,
            b,
            service="Amazon Elastic Compute Cloud",
            category="Compute",
            subcategory="Virtual Machines",
            amount=Decimal("0.2240000000"),
            invoice=inv,
            resource="i-0fedcba9876543210",
            resource_type="Instance",
            description="m6i.xlarge Linux/UNIX instance-hour",
            SubAccountId=OTHER_BUSINESS_UNIT,
            SubAccountName="corporate-it",
            AvailabilityZone="eu-west-3b",
            Tags={"team": "corporate-it"},
        ),
    ]


if __name__ == "__main__":  # regenerate the example's billing file
    ROOT = Path(__file__).resolve().parents[1]
    print(
        write_focus_csv(
            ROOT / "examples/invoice-close/billing/2026-11/focus.csv", invoice_close_rows()
        )
    )
