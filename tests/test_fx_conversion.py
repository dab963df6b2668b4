"""Conversion into a presentation currency, against an independent exact computation.

The reference here is plain :class:`fractions.Fraction` arithmetic, written apart from
``tenantcost.fx`` and ``tenantcost.convert``: the rate of each day is looked up in the
published quotes (the last on or before the day, within ``max_age``; a cross as the ratio of
two EUR quotes), every window's ledger amount is multiplied by it, and each client's exact
figure is summed. The converted allocation must hold each client within one micro-unit of
that exact figure, close its cascade with gap 0, and not depend on input order.
"""

from __future__ import annotations

from datetime import date, timedelta
from fractions import Fraction

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenantcost.allocate import allocate, allocate_stream
from tenantcost.config.fx import Fx
from tenantcost.convert import convert_result, result_days
from tenantcost.errors import InputError
from tenantcost.fx import build_conversion, fraction_text
from tenantcost.readers.fx_rates import RATE_COLUMNS
from tenantcost.reconcile import cascade
from tenantcost.usage_source import FrameUsage
from tests.factories import BASIC_RULES, costs, rules, usage

HOLIDAY = date(2026, 11, 11)
"""A weekday without a published rate: its rate is the day before's."""


def published_rates(days: int = 20) -> pd.DataFrame:
    """EUR-based USD and GBP quotes on working days from 2026-10-29, with four decimals."""
    rows = []
    start = date(2026, 10, 29)
    for i in range(days):
        day = start + timedelta(days=i)
        if day.weekday() >= 5 or day == HOLIDAY:
            continue
        rows.append((day, "EUR", "USD", f"{1.05 + (i * 37 % 101) / 1000:.4f}"))
        rows.append((day, "EUR", "GBP", f"{0.83 + (i * 53 % 89) / 1000:.4f}"))
    frame = pd.DataFrame(rows, columns=["date", "base", "quote", "rate"])
    frame["date"] = pd.to_datetime(frame["date"])
    frame["source"] = "rates.csv"
    frame["origin"] = [f"rates.csv:row {i + 2}" for i in range(len(frame))]
    return frame[RATE_COLUMNS]


def reference_multiplier(rates: pd.DataFrame, day: date, target: str) -> Fraction:
    """USD -> target on ``day``: the last published quotes on or before it (max 4 days)."""
    known = sorted({d.date() for d in rates["date"] if d.date() <= day})
    assert known and (day - known[-1]).days <= 4
    on = rates.loc[rates["date"].dt.date == known[-1]]
    quote = {q: Fraction(r) for q, r in zip(on["quote"], on["rate"], strict=True)}
    return (Fraction(1) if target == "EUR" else quote[target]) / quote["USD"]


def round_half_even(value: Fraction) -> int:
    return round(value)  # Fraction.__round__ rounds half to even


pytestmark = pytest.mark.filterwarnings("ignore::tenantcost.errors.InputWarning")

amounts = st.integers(min_value=0, max_value=5_000_000)


@st.composite
def months(draw: st.DrawFn) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Windows over the first 12 days of November 2026 (a weekend and a holiday), costs of
    shared, direct, residual and excluded workloads, and requests of up to 4 clients."""
    hours = sorted(set(draw(st.lists(st.integers(0, 12 * 24 - 1), min_size=1, max_size=6))))
    clients = ["a", "b", "c", "d"][: draw(st.integers(1, 4))]
    cost_rows, usage_rows = [], []
    for h in hours:
        for namespace, controller in (
            ("saas", "api"), ("saas", "reserve"), ("ingress", "proxy"),
            ("monitoring", "prom"), ("tenant-a", "db"),
        ):  # fmt: skip
            cost_rows.append(
                {"h": h, "namespace": namespace, "controller": controller,
                 "total_cost": draw(amounts) / 1e6}
            )  # fmt: skip
        for client in clients:
            requests = draw(st.integers(0, 50))
            if requests:
                usage_rows.append({"h": h, "service": "api", "client": client,
                                   "requests": float(requests)})  # fmt: skip
    return costs(cost_rows), usage(usage_rows)


def converted(cost: pd.DataFrame, use: pd.DataFrame, target: str, policy: str = "daily"):
    ruleset = rules(BASIC_RULES)
    ledger = allocate(cost, use, ruleset)
    fx = Fx(rates=["rates.csv"], policy=policy)
    rates = published_rates()
    conversion = build_conversion(rates, fx, "USD", target, result_days(ledger), "rates.csv")
    return ledger, convert_result(ledger, conversion), rates


@pytest.mark.parametrize("target", ["EUR", "GBP"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(month=months())
def test_each_client_is_its_exact_conversion_rounded_and_the_cascade_closes(month, target):
    cost, use = month
    ledger, result, rates = converted(cost, use, target)
    day = ledger.lines["window_start"].dt.date if not ledger.lines.empty else None
    exact: dict[str, Fraction] = {}
    if day is not None:
        for client, amount, d in zip(ledger.lines["client"], ledger.lines["amount"], day,
                                     strict=True):  # fmt: skip
            exact[client] = exact.get(client, Fraction(0)) + amount * reference_multiplier(
                rates, d, target
            )
    totals = dict(zip(result.client_totals()["client"], result.client_totals()["amount"],
                      strict=True))  # fmt: skip
    assert set(totals) == set(exact)
    for client, value in exact.items():
        assert abs(totals[client] - value) < 1, (client, totals[client], value)
    everything = Fraction(0)
    for frame in (ledger.lines, ledger.unattributed, ledger.residual, ledger.exclusions,
                  ledger.unclassified):  # fmt: skip
        for amount, start in zip(frame["amount"], frame["window_start"], strict=True):
            everything += amount * reference_multiplier(rates, start.date(), target)
    assert result.reference_total == round_half_even(everything)
    casc = cascade(result)
    assert casc.gap == 0
    assert not any(line.label == "rounding" for line in casc.lines)
    assert int(result.lines["amount"].sum()) == sum(totals.values())
    assert int(result.lines["ledger_amount"].sum()) == int(ledger.lines["amount"].sum())
    parts = result.cost_total + result.external_total + result.billed_pool_total
    assert parts == result.reference_total


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(month=months(), seed=st.integers(0, 2**16))
def test_no_figure_depends_on_input_order(month, seed):
    cost, use = month
    _, first, _ = converted(cost, use, "GBP")
    shuffled = cost.sample(frac=1, random_state=seed).reset_index(drop=True)
    use_shuffled = use.sample(frac=1, random_state=seed).reset_index(drop=True)
    _, second, _ = converted(shuffled, use_shuffled, "GBP")
    key = ["client", "source", "kind", "window_start"]
    a = first.lines.sort_values(key).reset_index(drop=True)[[*key, "amount"]]
    b = second.lines.sort_values(key).reset_index(drop=True)[[*key, "amount"]]
    pd.testing.assert_frame_equal(a, b)
    assert first.reference_total == second.reference_total


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(month=months(), chunk_hours=st.sampled_from([5, 24 * 30]))
def test_period_lines_convert_as_window_lines(month, chunk_hours):
    """The engine's period lines (summed per day in DuckDB, in chunks that may cut a day)
    give the same figures, and the same period lines as a run without day sums."""
    cost, use = month
    ruleset = rules(BASIC_RULES)
    _, by_window, rates = converted(cost, use, "GBP")
    chunk = pd.Timedelta(hours=chunk_hours)
    source = FrameUsage(use, origin="usage")
    ledger = allocate_stream(cost, source, ruleset, days=True, chunk=chunk)
    plain = allocate_stream(cost, source, ruleset, chunk=chunk)
    pd.testing.assert_frame_equal(ledger.lines, plain.lines)
    fx = Fx(rates=["rates.csv"])
    conversion = build_conversion(rates, fx, "USD", "GBP", result_days(ledger), "rates.csv")
    by_period = convert_result(ledger, conversion)
    window_totals = by_window.client_totals().set_index("client")["amount"]
    period_totals = by_period.client_totals().set_index("client")["amount"]
    pd.testing.assert_series_equal(window_totals.sort_index(), period_totals.sort_index())
    assert by_period.reference_total == by_window.reference_total


def test_monthly_average_of_a_cross_is_the_mean_of_the_daily_crosses():
    rates = published_rates(40)
    fx = Fx(rates=["rates.csv"], policy="monthly_average")
    days = [date(2026, 11, 2), date(2026, 11, 20)]
    conversion = build_conversion(rates, fx, "USD", "GBP", days, "rates.csv")
    november = rates.loc[rates["date"].dt.month == 11]
    crosses = [
        reference_multiplier(november, d.date(), "GBP") for d in sorted(set(november["date"]))
    ]
    assert conversion.multiplier(days[0]) == sum(crosses, Fraction(0)) / len(crosses)
    assert conversion.multiplier(days[1]) == conversion.multiplier(days[0])
    assert conversion.document()["periods"][0]["published_days"] == len(crosses)


def test_month_end_and_fixed_policies():
    rates = published_rates(40)
    day = date(2026, 11, 5)
    end = build_conversion(rates, Fx(rates=["r"], policy="month_end"), "USD", "EUR", [day], "r")
    last = max(d for d in rates["date"] if d.month == 11).date()
    assert end.multiplier(day) == reference_multiplier(rates, last, "EUR")
    fixed = Fx(policy="fixed", fixed={"2026-11": {"EUR": "0.9215"}})
    assert build_conversion(rates, fixed, "USD", "EUR", [day], "").multiplier(day) == Fraction(
        "0.9215"
    )
    with pytest.raises(InputError, match=r'fx.fixed."2026-12".EUR.*no USD->EUR rate for 2026-12'):
        build_conversion(rates, fixed, "USD", "EUR", [date(2026, 12, 1)], "")


def test_a_day_past_max_age_and_an_unreachable_currency_are_refused():
    rates = published_rates(20)  # the last quote is 2026-11-17
    with pytest.raises(InputError, match=r"no USD->EUR rate within 4d of 2026-11-22"):
        build_conversion(rates, Fx(rates=["r"]), "USD", "EUR", [date(2026, 11, 22)], "r")
    with pytest.raises(InputError, match=r"cannot reach JPY from USD"):
        build_conversion(rates, Fx(rates=["r"]), "USD", "JPY", [date(2026, 11, 5)], "r")
    late = build_conversion(rates, Fx(rates=["r"]), "USD", "EUR", [date(2026, 11, 19)], "r")
    assert late.provisional and late.document()["rates"][0]["published"] == "2026-11-17"


def test_a_weekend_carries_fridays_rate_and_a_cross_names_its_quotes():
    rates = published_rates(20)
    saturday = date(2026, 11, 7)
    conversion = build_conversion(rates, Fx(rates=["r"]), "USD", "GBP", [saturday], "r")
    used = conversion.document()["rates"][0]
    assert used["published"] == "2026-11-06" and not conversion.provisional
    gbp, usd = (q["rate"] for q in used["quotes"])
    assert used["rate"] == f"{gbp}/{usd}"
    assert conversion.multiplier(saturday) == Fraction(gbp) / Fraction(usd)


def test_fraction_text_is_exact():
    assert fraction_text(Fraction(9215, 10000)) == "0.9215"
    assert fraction_text(Fraction(1, 3)) == "1/3"
    assert fraction_text(Fraction(5, 4)) == "1.25"
