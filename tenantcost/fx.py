"""Which exchange rate converts each day's ledger amount: the policies, exactly.

The rates table (``tenantcost.readers.fx_rates``) holds published quotes, ``1 base = rate
quote`` on a date. A conversion needs, for each UTC day of a period, the *multiplier* from
the ledger currency to the presented one: presented units per ledger unit. It is a
:class:`~fractions.Fraction`, never a float, because it is rarely a finite decimal:

* a direct quote (``USD -> EUR`` published as such) is the published decimal;
* its inverse (``EUR -> USD`` published, USD ledger) is ``1 / 1.0823``;
* a cross (USD ledger, GBP presented, both quoted against EUR by the ECB) is the ratio of
  the two published quotes, ``0.8541 / 1.0823``.

So a sheet shows the published quotes and how the multiplier is formed, not a rounded
"rate", and :mod:`tenantcost.convert` multiplies amounts by the exact fraction.

Policies (``fx.policy``; IAS 21's spot rate of the transaction's date, or a period average
where rates are stable):

* ``daily``: each day at the last rate published on or before it, at most ``max_age`` old
  (the ECB publishes on working days: a weekend carries Friday's rate);
* ``monthly_average``: each month at the mean of the multipliers of its published days (a
  cross's average is the mean of the daily crosses, not a ratio of averages);
* ``month_end``: each month at its last published multiplier;
* ``fixed``: each month at the rule file's rate.

A day after the last published date of the rates is *provisional*: its rate is the latest
within ``max_age`` until its own is published, and the figure says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pandas as pd

from tenantcost.config.fx import Fx
from tenantcost.errors import InputError


@dataclass(frozen=True)
class Quote:
    """One published rate: ``1 base = rate quote`` on ``date``, from ``source``."""

    date: date
    base: str
    quote: str
    rate: str
    source: str

    def document(self) -> dict[str, str]:
        return {
            "date": self.date.isoformat(),
            "base": self.base,
            "quote": self.quote,
            "rate": self.rate,
            "source": self.source,
        }


@dataclass(frozen=True)
class Multiplier:
    """Ledger-to-presented multiplier of one publication date (or of a fixed month)."""

    value: Fraction
    text: str
    """How it is formed from published decimals: ``0.9215``, ``1/1.0823``, ``0.8541/1.0823``."""
    quotes: tuple[Quote, ...] = ()


@dataclass(frozen=True)
class DayRate:
    """The multiplier that converts one UTC day, and where it comes from."""

    day: date
    multiplier: Multiplier
    published: date | None
    """The publication date of the rate used (None for an average or a fixed rate)."""
    provisional: bool = False
    period: str | None = None
    """For a monthly policy: the month whose rate this is."""


@dataclass(frozen=True)
class Conversion:
    """Every day's multiplier from ``ledger`` to ``currency`` under one policy."""

    ledger: str
    currency: str
    policy: str
    source: str
    days: dict[date, DayRate]
    periods: list[dict[str, Any]] = field(default_factory=list)
    rates_used: list[dict[str, Any]] = field(default_factory=list)

    @property
    def provisional(self) -> bool:
        return any(d.provisional for d in self.days.values())

    def multiplier(self, day: date) -> Fraction:
        return self.days[day].multiplier.value

    def document(self) -> dict[str, Any]:
        """The ``fx`` part of a JSON output: the rates actually used, exact decimal text."""
        doc: dict[str, Any] = {
            "ledger_currency": self.ledger,
            "currency": self.currency,
            "policy": self.policy,
            "source": self.source,
            "provisional": self.provisional,
            "rates": self.rates_used,
        }
        if self.periods:
            doc["periods"] = self.periods
        return doc


def fraction_text(value: Fraction) -> str:
    """``value`` as exact decimal text when it is a finite decimal, else ``p/q``."""
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den //= 2
        twos += 1
    while den % 5 == 0:
        den //= 5
        fives += 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    text = str(Decimal(value.numerator * 10**places // value.denominator).scaleb(-places))
    return text


def _decimal(text: str) -> Fraction:
    return Fraction(Decimal(text))


def pair_multipliers(rates: pd.DataFrame, ledger: str, target: str) -> dict[date, Multiplier]:
    """Per publication date, the ledger-to-target multiplier the quotes of that date give:
    direct, inverse, or a cross through a common currency (the first by code)."""
    involved = rates.loc[
        rates["base"].isin([ledger, target]) | rates["quote"].isin([ledger, target])
    ]
    out: dict[date, Multiplier] = {}
    for day, group in involved.groupby(involved["date"].dt.date, sort=True):
        quotes = {
            (b, q): Quote(day, b, q, r, s)
            for b, q, r, s in zip(
                group["base"], group["quote"], group["rate"], group["source"], strict=True
            )
        }
        found = _resolve(quotes, ledger, target)
        if found is not None:
            out[day] = found
    return out


def _resolve(quotes: dict[tuple[str, str], Quote], ledger: str, target: str) -> Multiplier | None:
    direct = quotes.get((ledger, target))
    if direct is not None:
        return Multiplier(_decimal(direct.rate), direct.rate, (direct,))
    inverse = quotes.get((target, ledger))
    if inverse is not None:
        return Multiplier(1 / _decimal(inverse.rate), f"1/{inverse.rate}", (inverse,))
    pivots = sorted({b for b, _ in quotes} | {q for _, q in quotes})
    for pivot in pivots:
        to_target, to_ledger = quotes.get((pivot, target)), quotes.get((pivot, ledger))
        if to_target is not None and to_ledger is not None:  # 1 pivot = a target = b ledger
            value = _decimal(to_target.rate) / _decimal(to_ledger.rate)
            return Multiplier(value, f"{to_target.rate}/{to_ledger.rate}", (to_target, to_ledger))
        from_target, from_ledger = quotes.get((target, pivot)), quotes.get((ledger, pivot))
        if from_target is not None and from_ledger is not None:
            value = _decimal(from_ledger.rate) / _decimal(from_target.rate)
            text = f"{from_ledger.rate}/{from_target.rate}"
            return Multiplier(value, text, (from_ledger, from_target))
    return None


def _month(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


def build_conversion(
    rates: pd.DataFrame,
    fx: Fx,
    ledger: str,
    target: str,
    days: list[date],
    source: str,
) -> Conversion:
    """The conversion of ``days`` from ``ledger`` to ``target`` under ``fx.policy``.

    Raises :class:`InputError` (one line, the date and the currencies) for a day or month
    without a usable rate, and for a target the rates never reach."""
    days = sorted(set(days))
    if fx.policy == "fixed":
        return _fixed(fx, ledger, target, days)
    published = pair_multipliers(rates, ledger, target)
    if not published:
        raise InputError(
            f"the rates cannot reach {target} from {ledger}: no quote of {ledger}->{target}, "
            f"{target}->{ledger}, or of both against a third currency",
            where="fx.rates",
        )
    if fx.policy == "daily":
        return _daily(published, fx, ledger, target, days, source)
    return _monthly(published, fx, ledger, target, days, source)


def _daily(
    published: dict[date, Multiplier],
    fx: Fx,
    ledger: str,
    target: str,
    days: list[date],
    source: str,
) -> Conversion:
    dates = pd.DatetimeIndex(sorted(published))
    last = dates[-1].date()
    positions = dates.searchsorted(pd.DatetimeIndex(days), side="right") - 1
    out: dict[date, DayRate] = {}
    for day, position in zip(days, positions, strict=True):
        if position < 0:
            raise InputError(
                f"no {ledger}->{target} rate on or before {day} (the rates start on "
                f"{dates[0].date()})",
                where="fx.rates",
            )
        when = dates[position].date()
        if (day - when) > timedelta(hours=fx.max_age_hours):
            raise InputError(
                f"no {ledger}->{target} rate within {fx.max_age} of {day}: the latest before "
                f"it was published on {when} (fx.max_age)",
                where="fx.rates",
            )
        out[day] = DayRate(day, published[when], when, provisional=day > last)
    used = [_rate_entry(d.day, d.multiplier, d.published) for d in out.values()]
    return Conversion(ledger, target, "daily", source, out, rates_used=used)


def _rate_entry(day: date, multiplier: Multiplier, published: date | None = None) -> dict[str, Any]:
    """One entry of the ``fx.rates`` list: the day, its multiplier's text, the publication
    date when an earlier rate was carried, and the quotes a ratio was formed from."""
    entry: dict[str, Any] = {"date": day.isoformat(), "rate": multiplier.text}
    if published is not None and published != day:
        entry["published"] = published.isoformat()
    if "/" in multiplier.text:  # formed from quotes, not one published decimal
        entry["quotes"] = [q.document() for q in multiplier.quotes]
    return entry


def _monthly(
    published: dict[date, Multiplier],
    fx: Fx,
    ledger: str,
    target: str,
    days: list[date],
    source: str,
) -> Conversion:
    last = max(published)
    by_month: dict[str, list[date]] = {}
    for published_on in published:
        by_month.setdefault(_month(published_on), []).append(published_on)
    out: dict[date, DayRate] = {}
    periods: list[dict[str, Any]] = []
    used: list[dict[str, Any]] = []
    for month in sorted({_month(d) for d in days}):
        dates = sorted(by_month.get(month, []))
        if not dates:
            raise InputError(
                f"no {ledger}->{target} rate published in {month} (policy {fx.policy})",
                where="fx.rates",
            )
        chosen = dates if fx.policy == "monthly_average" else dates[-1:]
        value = sum((published[w].value for w in chosen), Fraction(0)) / len(chosen)
        text = published[chosen[0]].text if len(chosen) == 1 else fraction_text(value)
        multiplier = Multiplier(value, text)
        month_days = [d for d in days if _month(d) == month]
        for d in month_days:
            out[d] = DayRate(d, multiplier, None, provisional=d > last, period=month)
        periods.append({"month": month, "rate": text, "published_days": len(chosen)})
        used += [_rate_entry(w, published[w]) for w in chosen]
    return Conversion(ledger, target, fx.policy, source, out, periods, used)


def _fixed(fx: Fx, ledger: str, target: str, days: list[date]) -> Conversion:
    out: dict[date, DayRate] = {}
    periods = []
    for month in sorted({_month(d) for d in days}):
        text = fx.fixed.get(month, {}).get(target)
        if text is None:
            raise InputError(
                f"policy fixed: no {ledger}->{target} rate for {month}",
                where=f'fx.fixed."{month}".{target}',
            )
        multiplier = Multiplier(_decimal(text), text)
        for d in days:
            if _month(d) == month:
                out[d] = DayRate(d, multiplier, None, period=month)
        periods.append({"month": month, "rate": text})
    used = [{"date": p["month"], "rate": p["rate"]} for p in periods]
    return Conversion(ledger, target, "fixed", "rule file (fx.fixed)", out, periods, used)
