"""Which currency a figure is shown in, and the result converted into it.

First match wins (docs/currency.md):

1. ``--currency`` (or ``?currency=``), what the reader asked for;
2. for one client's own pages and sheets, the client's currency (the catalog's);
3. the rule file's ``presentation:``;
4. the ledger currency (``currency:``), when nothing converts.

The rates come from the rule file's ``fx.rates`` (the bundled ECB history, rate files); a
user's file wins over the ECB for the same date and pair
(:func:`tenantcost.readers.fx_rates.merge_rates`). The store's runs convert with the rates
``tenantcost fx load`` keeps (:mod:`tenantcost.store.run_fx`), passed in as ``rates``.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pandas as pd

from tenantcost.config.fx import ECB, Fx
from tenantcost.config.rules import RuleSet
from tenantcost.convert import convert_result, result_days
from tenantcost.currency import require_currency
from tenantcost.errors import InputError
from tenantcost.fx import build_conversion
from tenantcost.readers.fx_rates import ecb_label, read_rates
from tenantcost.result import AllocationResult
from tenantcost.windows import Period


def presentation_currency(
    ruleset: RuleSet, asked: str | None, client_currency: str | None = None
) -> str:
    """The currency to show: ``asked``, else the client's, else ``presentation:``, else the
    ledger's. An unknown code is refused (``--currency``)."""
    if asked:
        return require_currency(asked.strip().upper(), where="--currency")
    return client_currency or ruleset.presentation or ruleset.currency


def rates_for(ruleset: RuleSet) -> tuple[pd.DataFrame, str]:
    """The rule file's rates and a label of their sources."""
    fx = ruleset.fx
    if fx is None:
        return read_rates([]), "no rates"
    labels = [ecb_label() if s == ECB else s for s in fx.rates]
    return read_rates(fx.rates), ", ".join(labels) or "rule file"


def needs_days(ruleset: RuleSet, start: pd.Timestamp, end: pd.Timestamp) -> bool:
    """Whether converting ``[start, end)`` needs the lines per day: with more than one rate
    in the period (the daily policy, or a period over several months). One rate converts
    the period's lines as they are, so the engine keeps no day rows."""
    fx = ruleset.fx
    if fx is None or fx.policy == "daily":
        return True
    last = end - pd.Timedelta(microseconds=1)
    return (start.year, start.month) != (last.year, last.month)


def present(
    result: AllocationResult,
    ruleset: RuleSet,
    currency: str,
    rates: tuple[pd.DataFrame, str] | None = None,
) -> AllocationResult:
    """``result`` shown in ``currency``: itself when that is the ledger currency, else
    converted (:func:`tenantcost.convert.convert_result`) with the rule set's policy, at
    ``rates`` (the table and its sources' label; default: the rule file's ``fx.rates``)."""
    if currency == result.currency:
        return result
    fx = ruleset.fx
    if fx is None:
        raise InputError(
            f"showing {result.currency} amounts in {currency} needs exchange rates: add an "
            "fx: section (rates: ecb or a rates file, and a policy) to the rule file",
            where="--currency",
        )
    table, source = rates if rates is not None else rates_for(ruleset)
    days = result_days(result)
    window = _rate_window(table, days, fx.max_age_hours)
    conversion = build_conversion(window, fx, result.currency, currency, days, source)
    return convert_result(result, conversion)


def _rate_window(rates: pd.DataFrame, days: list, max_age_hours: int) -> pd.DataFrame:
    """Only the quotes a conversion of ``days`` can use: from ``max_age`` before the first
    day's month to the end of the last day's month (a month's average or its last rate), and
    the last publication date before that, so a rate too old is named as such."""
    if not days or rates.empty:
        return rates
    first = pd.Timestamp(min(days)).to_period("M").start_time - pd.Timedelta(hours=max_age_hours)
    last = pd.Timestamp(max(days)).to_period("M").end_time
    dates = pd.to_datetime(rates["date"])
    earlier = dates.loc[dates < first]
    if not earlier.empty:  # the last day before the window: an error can name it
        first = earlier.max()
    return rates.loc[(dates >= first) & (dates <= last)]


def revenue_rates(
    catalog: pd.DataFrame,
    ruleset: RuleSet,
    currency: str,
    period: Period,
    rates: tuple[pd.DataFrame, str] | None = None,
) -> pd.DataFrame:
    """``catalog`` (:attr:`tenantcost.catalog.Catalog.frame`) with, per client, the exact
    multiplier ``fx_num / fx_den`` from its revenue's currency into ``currency``, the currency
    its costs are compared in (:func:`tenantcost.economics.prorated_revenue` applies it and
    rounds once). A monthly amount converts at the month's rate: the mean of the rates
    published in the month (``daily`` and ``monthly_average``), its last rate
    (``month_end``), or the rule file's (``fixed``, a cross of two fixed rates when neither
    currency is the ledger's). One conversion per currency, vectorised over its clients."""
    out = catalog.assign(fx_num=1, fx_den=1)
    codes = sorted(set(out["currency"].astype("str")) - {currency, ""})
    if not codes:
        return out
    fx = ruleset.fx
    if fx is None:
        raise InputError(
            f"the catalog's revenue in {', '.join(codes)} is compared with costs in {currency}: "
            "converting it needs exchange rates, an fx: section in the rule file "
            "(docs/currency.md)",
            where="fx",
        )
    month = f"{period.start:%Y-%m}"
    for code in codes:
        value = _month_rate(fx, ruleset.currency, code, currency, month, rates, ruleset)
        chosen = (out["currency"] == code).to_numpy()
        out.loc[chosen, "fx_num"] = value.numerator
        out.loc[chosen, "fx_den"] = value.denominator
    return out.astype({"fx_num": "object", "fx_den": "object"})


def _month_rate(
    fx: Fx,
    ledger: str,
    source: str,
    target: str,
    month: str,
    rates: tuple[pd.DataFrame, str] | None,
    ruleset: RuleSet,
) -> Fraction:
    """One unit of ``source`` in ``target`` for a monthly amount of ``month``."""
    if fx.policy == "fixed":
        given = fx.fixed.get(month, {})

        def per_ledger(code: str) -> Fraction:
            if code == ledger:
                return Fraction(1)
            if code not in given:
                raise InputError(
                    f"policy fixed: no {ledger}->{code} rate for {month} (revenue in "
                    f"{source} shown in {target})",
                    where=f'fx.fixed."{month}".{code}',
                )
            return Fraction(Decimal(given[code]))

        return per_ledger(target) / per_ledger(source)
    table, label = rates if rates is not None else rates_for(ruleset)
    policy = "month_end" if fx.policy == "month_end" else "monthly_average"
    first = pd.Period(month, freq="M").start_time.date()
    try:
        conversion = build_conversion(
            table, fx.model_copy(update={"policy": policy}), source, target, [first], label
        )
    except InputError as exc:
        raise InputError(
            f"revenue in {source} compared with costs in {target}: {exc.message}", where="fx.rates"
        ) from None
    return conversion.multiplier(first)


def rate_to_date(
    ruleset: RuleSet,
    target: str,
    month: str,
    as_of: pd.Timestamp,
    rates: tuple[pd.DataFrame, str] | None = None,
) -> tuple[Fraction, bool]:
    """One ledger unit in ``target`` for a month still in progress at ``as_of`` (a budget
    set in a client's currency, :mod:`tenantcost.store.watch_run`): the mean of the rates
    published in the month up to ``as_of`` (the month's last one for ``month_end``; the fixed
    rate for ``fixed``); before the month's first publication, the latest rate within
    ``max_age``. The flag says the rate is provisional: the month's rate is not final yet."""
    fx = ruleset.fx
    if fx is None:
        raise InputError(
            f"a budget in {target} is compared with costs in {ruleset.currency}: that needs "
            "exchange rates, an fx: section in the rule file (docs/currency.md)",
            where="fx",
        )
    if fx.policy == "fixed":
        return _month_rate(fx, ruleset.currency, ruleset.currency, target, month, rates,
                           ruleset), False  # fmt: skip
    table, label = rates if rates is not None else rates_for(ruleset)
    day = min(as_of, pd.Period(month, freq="M").end_time.tz_localize(as_of.tz)).date()
    known = table.loc[pd.to_datetime(table["date"]).dt.date <= day]
    first = pd.Period(month, freq="M").start_time.date()
    published = known.loc[pd.to_datetime(known["date"]).dt.date >= first]
    if published.empty or not _reaches(published, ruleset.currency, target):
        carried = build_conversion(known, fx.model_copy(update={"policy": "daily"}),
                                   ruleset.currency, target, [day], label)  # fmt: skip
        return carried.multiplier(day), True
    final = day >= pd.Period(month, freq="M").end_time.date()
    return _month_rate(fx, ruleset.currency, ruleset.currency, target, month,
                       (published, label), ruleset), not final  # fmt: skip


def _reaches(rates: pd.DataFrame, ledger: str, target: str) -> bool:
    from tenantcost.fx import pair_multipliers

    return bool(pair_multipliers(rates, ledger, target))
