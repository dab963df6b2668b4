"""The invoice cascade: repricing, billed pools and the close on the invoice, in the core.

The billing rows are registered straight as the canonical billing view (the reader's own
tests cover files), so these tests run in milliseconds and hypothesis can vary them freely.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantcost.allocate import allocate
from tenantcost.billing import BillingRun, prepare_billing
from tenantcost.config.billing import BILLING_MATCH_COLUMNS
from tenantcost.errors import InputError
from tenantcost.invoice import invoice_cascade
from tenantcost.reconcile import cascade
from tenantcost.split import connect
from tests.factories import costs, hour, rules, usage

RULES = """
currency: USD
billing:
  clusters:
    - name: prod
      match: {tags: {"eks:cluster-name": prod}}
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {namespace: saas, controller: api}, class: shared, service: api, key: requests}
      - {match: {controller: proxy}, class: overhead}
      - {match: {name: __idle__}, class: idle}
    billed:
      - {match: {ServiceName: Database}, class: shared, key: requests, services: [api]}
      - {match: {tags: {tenant: "*"}}, class: direct, client_from: {tag: tenant}}
      - {match: {SubAccountId: "999*"}, class: outside, reason: another business unit}
      - {match: {ServiceName: CloudWatch}, class: excluded, reason: monitoring}
      - {match: {ChargeCategory: [Tax, Purchase]}, class: overhead}
      - {match: {ServiceName: "*"}, class: overhead, name: other billed}
"""


def _line(**values: Any) -> dict[str, Any]:
    start, _end = hour(values.pop("h", 0))
    hours = values.pop("hours", 1)
    row: dict[str, Any] = {c: "" for c in BILLING_MATCH_COLUMNS}
    row.update(
        x_file="billing.csv",
        InvoiceId="INV-1",
        ChargeCategory="Usage",
        SubAccountId="111",
        ServiceName="Compute",
        BillingPeriodStart=pd.Timestamp("2026-11-01T00:00:00Z"),
        BillingPeriodEnd=pd.Timestamp("2026-12-01T00:00:00Z"),
        ChargePeriodStart=start,
        ChargePeriodEnd=start + pd.Timedelta(hours=hours),
        BillingCurrency="USD",
        Tags="{}",
    )
    billed = values.pop("billed", None)
    row.update(values)
    row["EffectiveCost"] = str(row["EffectiveCost"])
    row["BilledCost"] = str(row["EffectiveCost"] if billed is None else billed)
    return row


def node(h: int, effective: str, **values: Any) -> dict[str, Any]:
    return _line(h=h, EffectiveCost=effective, Tags='{"eks:cluster-name": "prod"}', **values)


def register(con: Any, lines: list[dict[str, Any]]) -> str:
    frame = pd.DataFrame(lines)
    frame["x_row"] = range(2, len(frame) + 2)
    con.register("t_billing_rows", frame)
    text = ", ".join(f'"{c}"::VARCHAR AS "{c}"' for c in [*BILLING_MATCH_COLUMNS, "Tags"])
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE t_billing AS SELECT x_file, x_row::BIGINT AS x_row,
        {text}, BillingCurrency,
        ChargePeriodStart::TIMESTAMPTZ AS ChargePeriodStart,
        ChargePeriodEnd::TIMESTAMPTZ AS ChargePeriodEnd,
        BillingPeriodStart::TIMESTAMPTZ AS BillingPeriodStart,
        BillingPeriodEnd::TIMESTAMPTZ AS BillingPeriodEnd,
        BilledCost::DECIMAL(38,18) AS BilledCost, EffectiveCost::DECIMAL(38,18) AS EffectiveCost
        FROM t_billing_rows"""
    )
    con.unregister("t_billing_rows")
    return "t_billing"


def cost_rows(hours: int = 2) -> pd.DataFrame:
    rows = []
    for h in range(hours):
        rows += [
            {
                "h": h,
                "cluster": "prod",
                "namespace": "saas",
                "controller": "api",
                "total_cost": 0.3,
            },
            {
                "h": h,
                "cluster": "prod",
                "namespace": "ingress",
                "controller": "proxy",
                "total_cost": 0.05,
            },
            {"h": h, "cluster": "prod", "name": "__idle__", "total_cost": 0.15},
        ]
    return costs(rows)


def usage_rows(hours: int = 2) -> pd.DataFrame:
    rows = []
    for h in range(hours):
        rows += [
            {"h": h, "service": "api", "client": "a", "requests": 300.0},
            {"h": h, "service": "api", "client": "b", "requests": 100.0},
        ]
    return usage(rows)


def run(
    lines: list[dict[str, Any]],
    cost: pd.DataFrame | None = None,
    use: pd.DataFrame | None = None,
    rule_text: str = RULES,
    **options: Any,
) -> tuple[Any, BillingRun, Any]:
    con = connect()
    ruleset = rules(rule_text)
    cost = cost_rows() if cost is None else cost
    view = register(con, lines)
    billing = prepare_billing(cost, con, view, ruleset, **{"period": None, **options})
    result = allocate(
        billing.costs,
        usage_rows() if use is None else use,
        ruleset,
        period=options.get("period"),
        billed=billing,
    )
    return result, billing, invoice_cascade(result, billing)


def parts(invoice: Any) -> dict[tuple[str, str], int]:
    return {(str(ln.part), ln.name): ln.amount for ln in invoice.lines}


def test_repricing_and_billed_pools_close_on_the_invoice() -> None:
    lines = [
        node(0, "0.4", CommitmentDiscountType="Savings Plan", billed="0"),
        node(1, "0.4", CommitmentDiscountType="Savings Plan", billed="0"),
        _line(ChargeCategory="Purchase", EffectiveCost="0", billed="0.8", ServiceName="SP"),
        _line(hours=2, ServiceName="Database", EffectiveCost="0.0200000001"),
        _line(ServiceName="Storage", EffectiveCost="0.01", Tags='{"tenant": "b"}'),
        _line(ServiceName="S3", SubAccountId="999000", EffectiveCost="0.5"),
        _line(ChargeCategory="Tax", ServiceName="Tax", EffectiveCost="0.07"),
    ]
    result, billing, invoice = run(lines)
    assert invoice.gap == 0
    assert invoice.billed_total == 0 + 800_000 + 20_000 + 10_000 + 500_000 + 70_000
    # repricing conserves B: each hour's OpenCost rows (0.5) now carry the billed 0.4
    assert list(billing.repricing["opencost"]) == [500_000, 500_000]
    assert list(billing.repricing["billed_effective"]) == [400_000, 400_000]
    assert int(result.residual["amount"].sum()) == 2 * (40_000 + 120_000) + 70_000
    got = parts(invoice)
    assert got[("bridge", "Purchase")] == 800_000
    assert got[("bridge", "Usage / Savings Plan")] == -800_000
    assert got[("outside", "billed: 999*")] == 500_000
    assert got[("bridge", "rounding")] == 0
    # the database (0.0200000001 over 2 hours) is split 3:1 by requests; client b's storage
    totals = dict(
        zip(result.client_totals()["client"], result.client_totals()["amount"], strict=True)
    )
    assert totals == {"a": 2 * 180_000 + 15_000, "b": 2 * 60_000 + 5_000 + 10_000}
    # the existing cascade closes on the billed effective cost in scope
    casc = cascade(result)
    assert casc.gap == 0
    assert result.reference_total == invoice.effective_in_scope


def test_a_dropped_line_shows_as_a_gap() -> None:
    lines = [node(0, "0.4"), node(1, "0.4"), _line(ServiceName="Database", EffectiveCost="0.02")]
    result, billing, invoice = run(lines)
    assert invoice.gap == 0
    result.lines = result.lines.iloc[1:]  # one client line lost
    assert invoice_cascade(result, billing).gap != 0


def test_b_equal_to_o_gives_todays_figures() -> None:
    plain = allocate(cost_rows(), usage_rows(), rules(RULES))
    result, _, invoice = run([node(0, "0.5"), node(1, "0.5")])
    assert invoice.gap == 0
    pd.testing.assert_frame_equal(result.client_totals(), plain.client_totals())
    assert result.reference_total == plain.reference_total


def test_daily_billing_prices_the_day_and_a_cut_period_keeps_the_price() -> None:
    day = [node(0, "1.2", hours=24)]
    cost = cost_rows(24)
    use = usage_rows(24)
    _, billing, invoice = run(day, cost, use)
    assert len(billing.repricing) == 1 and invoice.gap == 0
    first = billing.costs["amount"].iloc[:3].tolist()
    from tenantcost.windows import Period

    cut = Period(hour(0)[0], hour(6)[0])
    _result, billing_cut, invoice_cut = run(day, cost, use, period=cut)
    assert billing_cut.costs["amount"].iloc[:3].tolist() == first  # same price when cut
    assert invoice_cut.gap == 0
    assert parts(invoice_cut)[("bridge", "outside the period")] == 1_200_000 * 18 // 24


def test_unbilled_hours_are_an_error_or_an_estimate() -> None:
    with pytest.raises(InputError, match=r"no billed line in .*allow-unbilled"):
        run([node(0, "0.4")])
    _result, billing, invoice = run([node(0, "0.4")], allow_unbilled=True)
    assert invoice.gap == 0
    assert parts(invoice)[("estimate", "OpenCost estimate")] == -500_000
    assert list(billing.repricing["estimate"]) == [False, True]


def test_credited_and_unseen_periods() -> None:
    lines = [node(0, "-0.1"), node(1, "0.4"), node(5, "0.3")]
    result, _billing, invoice = run(lines)
    assert invoice.gap == 0
    assert ("unseen", "billed, not seen by OpenCost") not in parts(invoice)  # hour 5: outside
    assert parts(invoice)[("bridge", "outside the period")] == 300_000
    credited = result.residual[result.residual["name"] == "credited: prod"]
    assert int(credited["amount"].sum()) == -100_000


def test_unlisted_cluster_and_unmatched_lines_are_errors() -> None:
    cost = cost_rows().assign(cluster="staging")
    with pytest.raises(InputError, match="cluster 'staging' is in the cost data but not listed"):
        run([node(0, "0.4"), node(1, "0.4")], cost)
    strict = RULES.replace(
        '      - {match: {ServiceName: "*"}, class: overhead, name: other billed}\n', ""
    )
    with pytest.raises(InputError) as err:
        run(
            [node(0, "0.4"), node(1, "0.4"), _line(ServiceName="Mystery", EffectiveCost="1")],
            rule_text=strict,
        )
    assert err.value.one_line().startswith("billing.csv, row 4, column 'ServiceName': the billed")


AMOUNT = st.decimals(
    min_value=Decimal("-2"),
    max_value=Decimal("5"),
    places=10,
    allow_nan=False,
    allow_infinity=False,
)
SERVICES = st.sampled_from(["Database", "CloudWatch", "Tax", "Other", "Storage"])


@st.composite
def billing_lines(draw: st.DrawFn) -> list[dict[str, Any]]:
    lines = [
        node(
            h, str(draw(st.decimals(min_value=Decimal("0.01"), max_value=Decimal("3"), places=10)))
        )
        for h in range(2)
    ]
    for _ in range(draw(st.integers(0, 8))):
        service = draw(SERVICES)
        tags = (
            '{{"tenant": "{}"}}'.format(draw(st.sampled_from(["a", "b", "c", ""])))
            if (service == "Storage")
            else "{}"
        )
        lines.append(
            _line(
                h=draw(st.integers(0, 1)),
                hours=draw(st.sampled_from([1, 2, 3])),
                ServiceName=service,
                Tags=tags,
                ChargeCategory="Tax" if service == "Tax" else "Usage",
                SubAccountId=draw(st.sampled_from(["111", "999123"])),
                EffectiveCost=str(draw(AMOUNT)),
                billed=str(draw(AMOUNT)),
            )
        )
    return lines


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(billing_lines(), st.randoms(use_true_random=False))
def test_the_invoice_closes_for_any_billing_data_in_any_order(
    lines: list[dict[str, Any]], rnd: Any
) -> None:
    result, _billing, invoice = run(lines)
    assert invoice.gap == 0
    assert abs(parts(invoice)[("bridge", "rounding")]) * 2 <= len(lines) + 8
    exact = sum(Decimal(line["BilledCost"]) for line in lines)
    assert invoice.billed_total == int((exact * 10**6).quantize(Decimal(1), "ROUND_HALF_EVEN"))
    shuffled = list(lines)
    rnd.shuffle(shuffled)
    again, _, invoice_again = run(shuffled, cost_rows().sample(frac=1, random_state=1))
    assert invoice_again.to_json() == invoice.to_json()
    pd.testing.assert_frame_equal(again.client_totals(), result.client_totals())
