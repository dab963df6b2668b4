"""The billing-file generators of tests/invoice_data.py: real FOCUS 1.2, and what they promise.

Other tests build invoices from them (several invoices, a daily grain, an all-upfront purchase),
so the files must be what a provider exports: the FinOps Foundation's validator passes them with
no failed mandatory rule, and each scenario has the shape its docstring says.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from . import focus_validator
from .invoice_data import (
    FOCUS_12_COLUMNS,
    all_upfront_purchase,
    daily_grain,
    several_invoices,
    write_focus_csv,
)
from .test_invoice_example import VALIDATOR_CONDITIONAL

START = datetime(2026, 11, 3, 10, tzinfo=UTC)


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_the_scenarios_pass_the_focus_validator(tmp_path):
    rows = several_invoices(START) + daily_grain(datetime(2026, 11, 10, tzinfo=UTC))
    rows += all_upfront_purchase(datetime(2026, 11, 20, 0, tzinfo=UTC))
    path = write_focus_csv(tmp_path / "scenarios.csv", rows)
    assert list(read(path)[0]) == list(FOCUS_12_COLUMNS) and len(FOCUS_12_COLUMNS) == 57
    report = focus_validator.validate(focus_validator.ensure_venv(), path)
    assert report.failed_mandatory == [], report.output
    assert set(report.failures) <= VALIDATOR_CONDITIONAL, report.output
    assert report.passed > 100, report.summary_line


def test_several_invoices_in_one_billing_period(tmp_path):
    rows = read(write_focus_csv(tmp_path / "f.csv", several_invoices(START, 4)))
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for r in rows:
        totals[r["InvoiceId"]] += Decimal(r["BilledCost"])
    assert sorted(totals) == ["INV-A", "INV-B", "INV-C"]
    assert totals["INV-A"] == 4 * Decimal("0.5") + 2 * Decimal("0.0123456789")
    assert totals["INV-B"] == totals["INV-C"] == Decimal("0.0123456789")
    assert {(r["BillingPeriodStart"], r["BillingPeriodEnd"]) for r in rows} == {
        ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")
    }


def test_daily_grain_has_day_long_charge_periods(tmp_path):
    day = datetime(2026, 11, 10, tzinfo=UTC)
    rows = read(write_focus_csv(tmp_path / "f.csv", daily_grain(day, 2)))
    periods = {(r["ChargePeriodStart"], r["ChargePeriodEnd"]) for r in rows}
    assert periods == {
        ("2026-11-10T00:00:00Z", "2026-11-11T00:00:00Z"),
        ("2026-11-11T00:00:00Z", "2026-11-12T00:00:00Z"),
    }
    node = [r for r in rows if r["ResourceType"] == "Instance"]
    assert [r["PricingQuantity"] for r in node] == ["24", "24"]
    assert all(Decimal(r["ListCost"]) == Decimal(r["ListUnitPrice"]) * 24 for r in node)


def test_all_upfront_purchase_then_covered_usage(tmp_path):
    at = datetime(2026, 11, 20, tzinfo=UTC)
    rows = read(write_focus_csv(tmp_path / "f.csv", all_upfront_purchase(at, 3)))
    purchase, *usage = rows
    assert (purchase["ChargeCategory"], purchase["ChargeFrequency"]) == ("Purchase", "One-Time")
    assert Decimal(purchase["BilledCost"]) == Decimal("0.25") * 8760
    assert Decimal(purchase["EffectiveCost"]) == 0
    assert [r["ChargePeriodStart"] for r in usage] == [
        (at + timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ") for i in range(3)
    ]
    for r in usage:
        assert (Decimal(r["BilledCost"]), Decimal(r["EffectiveCost"])) == (0, Decimal("0.25"))
        assert (r["CommitmentDiscountId"], r["CommitmentDiscountStatus"]) == (
            purchase["CommitmentDiscountId"],
            "Used",
        )
        assert '"eks:cluster-name":"cluster-one"' in r["Tags"]
