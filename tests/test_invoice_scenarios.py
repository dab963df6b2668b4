"""Invoices as providers write them (tests/invoice_data.py, FOCUS 1.2 CSV through the reader):
several invoices, a daily billing grain against hourly OpenCost, an all-upfront purchase."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd

from tenantcost.allocate import allocate
from tenantcost.billing import prepare_billing
from tenantcost.invoice import invoice_cascade
from tenantcost.readers.billing import open_billing
from tenantcost.split import connect
from tests.factories import costs, rules, usage
from tests.invoice_data import all_upfront_purchase, daily_grain, several_invoices, write_focus_csv

RULES = """
currency: USD
billing:
  clusters:
    - {name: cluster-one, match: {tags: {"eks:cluster-name": cluster-one}}}
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {namespace: saas, controller: api}, class: shared, service: api, key: requests}
      - {match: {name: __idle__}, class: idle}
    billed:
      - {match: {ServiceName: Amazon Relational Database Service}, class: shared, key: requests,
         services: [api]}
      - {match: {ServiceName: Amazon Virtual Private Cloud}, class: overhead, name: NAT}
      - {match: {ChargeCategory: Purchase}, class: overhead, name: commitments}
"""
T0 = pd.Timestamp("2026-11-01T00:00:00Z")


def micros(text: str | Decimal) -> int:
    return int((Decimal(text) * 10**6).quantize(Decimal(1), "ROUND_HALF_EVEN"))


def hours_of(start: datetime, count: int) -> list[int]:
    first = int((pd.Timestamp(start) - T0) / pd.Timedelta(hours=1))
    return list(range(first, first + count))


def run(tmp_path: Path, rows: list[dict[str, str]], hours: list[int]) -> tuple[Any, Any, Any]:
    path = write_focus_csv(tmp_path / "focus.csv", rows)
    con = connect()
    data = open_billing([path], con, currency="USD")
    cost = costs(
        row
        for h in hours
        for row in (
            {"h": h, "cluster": "cluster-one", "namespace": "saas", "controller": "api",
             "total_cost": 0.2},
            {"h": h, "cluster": "cluster-one", "name": "__idle__", "total_cost": 0.3},
        )
    )  # fmt: skip
    use = usage(
        row
        for h in hours
        for row in (
            {"h": h, "service": "api", "client": "a", "requests": 2.0},
            {"h": h, "service": "api", "client": "b", "requests": 1.0},
        )
    )
    ruleset = rules(RULES)
    billing = prepare_billing(cost, con, data.view, ruleset, period=None, origin=str(path))
    result = allocate(billing.costs, use, ruleset, billed=billing)
    return result, billing, invoice_cascade(result, billing)


def test_several_invoices_each_total_rounded_once(tmp_path: Path) -> None:
    start = datetime(2026, 11, 3, 10, tzinfo=UTC)
    rows = several_invoices(start, 3)
    _, billing, invoice = run(tmp_path, rows, hours_of(start, 3))
    assert invoice.gap == 0
    exact: dict[str, Decimal] = {}
    for row in rows:
        exact[row["InvoiceId"]] = exact.get(row["InvoiceId"], Decimal(0)) + Decimal(
            row["BilledCost"]
        )
    assert invoice.invoices == [(k, micros(v)) for k, v in sorted(exact.items())]
    assert invoice.billed_total == micros(sum(exact.values(), Decimal(0)))
    assert list(billing.repricing["billed_effective"]) == [500_000] * 3


def test_daily_billing_grain_against_hourly_opencost(tmp_path: Path) -> None:
    day = datetime(2026, 11, 10, tzinfo=UTC)
    rows = daily_grain(day, 2)
    result, billing, invoice = run(tmp_path, rows, hours_of(day, 48))
    assert invoice.gap == 0
    repricing = billing.repricing
    assert len(repricing) == 2  # one period per billed day, 24 hourly windows each
    assert list(repricing["billed_effective"]) == [micros("12.3456789012")] * 2
    assert list(repricing["opencost"]) == [24 * 500_000] * 2
    # the repriced rows of a day add up to the day's bill, hour by hour at one price
    day_one = billing.costs[
        billing.costs["window_start"] < pd.Timestamp(day) + pd.Timedelta(days=1)
    ]
    assert int(day_one["amount"].sum()) == micros("12.3456789012")
    nat = result.residual[result.residual["name"] == "NAT"]
    assert len(nat) == 48 and int(nat["amount"].sum()) == 2 * micros("1.0000000007")
    assert nat["amount"].max() - nat["amount"].min() <= 1  # accrued evenly over 24 hours


def test_all_upfront_purchase_is_billed_not_effective(tmp_path: Path) -> None:
    bought = datetime(2026, 11, 20, tzinfo=UTC)
    rows = all_upfront_purchase(bought, 3)
    result, billing, invoice = run(tmp_path, rows, hours_of(bought, 3))
    assert invoice.gap == 0
    bridge = {ln.name: ln.amount for ln in invoice.lines if ln.part == "bridge"}
    assert bridge["Purchase"] == micros(Decimal("0.25") * 8760)
    assert bridge["Usage / Savings Plan"] == -3 * 250_000
    assert invoice.billed_total == micros(Decimal("0.25") * 8760)
    # clients carry the amortized cost: 3 hours of 0.25 repriced over api (0.2) and idle (0.3)
    assert int(result.lines["amount"].sum()) == 3 * 100_000
    assert list(billing.repricing["billed_effective"]) == [250_000] * 3
