"""``fx:`` and ``presentation:`` (top level): the exchange rates that present the ledger in
another currency.

``currency:`` stays the *ledger* currency: what OpenCost, the external costs and the invoice
are in, and what every cascade closes in. ``fx:`` says where the rates come from and which
policy picks the rate of an amount (IAS 21's choices: the spot rate of the transaction's date,
or a period's average where rates are stable); ``presentation:`` is the currency pages,
sheets and reports show by default. Conversion never changes a ledger figure
(docs/currency.md).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from tenantcost.config.base import Strict
from tenantcost.currency import is_currency
from tenantcost.month import is_month

ECB = "ecb"
"""``rates: ecb``: the ECB reference rates bundled offline (``tenantcost.readers.fx_rates``)."""

FxPolicy = Literal["daily", "monthly_average", "month_end", "fixed"]

_AGE = re.compile(r"^([1-9][0-9]{0,3})([dh])$")


def max_age_hours(text: str) -> int:
    """``4d`` or ``96h`` in hours (the form :class:`Fx` validated)."""
    found = _AGE.match(text)
    if found is None:  # pragma: no cover - validated on load
        raise ValueError(
            f"max_age: expected a number of days or hours such as 4d or 96h, got {text!r}"
        )
    number, unit = int(found.group(1)), found.group(2)
    return number * 24 if unit == "d" else number


def _decimal_text(value: Any, where: str) -> str:
    """A positive, finite rate as the exact decimal text it was written as. YAML reads
    ``0.9215`` as a float: its shortest repr is the text the user wrote."""
    text = repr(value) if isinstance(value, float) else str(value).strip()
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{where}: not a number: {value!r}") from None
    if not number.is_finite() or number <= 0:
        raise ValueError(f"{where}: a rate must be a positive number, got {value!r}")
    return text


class Fx(Strict):
    """Where the rates come from and which rate converts an amount."""

    rates: list[str] = Field(
        default_factory=list,
        description="'ecb' (the ECB reference rates, bundled offline) and/or rate files or "
        "folders (CSV or Parquet: date, base, quote, rate); a file's rate wins over the "
        "ECB's for the same date and pair.",
    )
    policy: FxPolicy = "daily"
    max_age: Annotated[str, Field(pattern=r"^[1-9][0-9]{0,3}[dh]$")] = "4d"
    fixed: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="policy fixed: per month (YYYY-MM), units of each currency per 1 unit "
        "of the ledger currency, as decimal text.",
    )

    @field_validator("rates", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("fixed", mode="before")
    @classmethod
    def _fixed_rates(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out: dict[str, dict[str, str]] = {}
        for month, quotes in value.items():
            month = str(month)
            if not is_month(month):
                raise ValueError(f"[{month!r}]: expected a month as YYYY-MM")
            if not isinstance(quotes, dict) or not quotes:
                raise ValueError(f"[{month!r}]: expected a mapping such as {{EUR: '0.9215'}}")
            out[month] = {}
            for code, rate in quotes.items():
                if not is_currency(str(code)):
                    raise ValueError(f"[{month!r}].{code}: unknown currency code '{code}'")
                out[month][str(code)] = _decimal_text(rate, f"[{month!r}].{code}")
        return out

    @model_validator(mode="after")
    def _policy_needs(self) -> Fx:
        if self.policy == "fixed" and not self.fixed:
            raise ValueError("fixed: policy 'fixed' needs the rate of each month")
        if self.policy != "fixed" and not self.rates:
            raise ValueError(f"rates: policy '{self.policy}' needs rates: ecb or a rates file")
        return self

    @property
    def max_age_hours(self) -> int:
        return max_age_hours(self.max_age)
