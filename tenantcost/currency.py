"""Currency codes and their decimals: ISO 4217, from the ``iso4217`` package.

Amounts inside tenantcost are always micro-units (:mod:`tenantcost.money`), whatever the
currency: the ledger's, or a presentation currency the amounts were converted into
(:mod:`tenantcost.convert`). What differs between currencies is only how many decimals a
page or a sheet *shows*: JPY 0, EUR 2, BHD 3, the ISO 4217 minor unit. That table is
maintained by ISO's agency and shipped by the ``iso4217`` package; a hand-written copy
would go stale (currencies are added and withdrawn every few years).
"""

from __future__ import annotations

from functools import cache

from tenantcost.errors import InputError

DEFAULT_DECIMALS = 2
"""Shown decimals of a code ISO lists without a minor unit (XDR, XAU: not a circulating
currency, but a treasury feed may quote one)."""


@cache
def _codes() -> dict[str, int | None]:
    from iso4217 import Currency

    return {c.code: c.exponent for c in Currency}


def codes() -> frozenset[str]:
    """Every ISO 4217 alphabetic code in force."""
    return frozenset(_codes())


def is_currency(code: str) -> bool:
    """``code`` is an ISO 4217 alphabetic code in force."""
    return code in _codes()


def decimals(code: str) -> int:
    """The ISO 4217 minor unit of ``code`` (JPY 0, EUR 2, BHD 3); 2 for an unknown code
    or one without a minor unit, so an old statement's label never breaks a page."""
    exponent = _codes().get(code)
    return DEFAULT_DECIMALS if exponent is None else exponent


def require_currency(code: str, *, where: str, file: str | None = None) -> str:
    """``code`` when it is an ISO 4217 code in force; else an :class:`InputError` naming
    ``where`` (an option, a rule-file path or a column)."""
    if not is_currency(code):
        raise InputError(
            f"unknown currency code '{code}': expected an ISO 4217 code such as EUR, GBP, JPY",
            file=file,
            where=where,
        )
    return code
