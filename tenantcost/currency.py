"""Currency codes: ISO 4217, from the ``iso4217`` package.

Amounts inside tenantcost are always micro-units (:mod:`tenantcost.money`), whatever the
currency: the ledger's, or a presentation currency the amounts were converted into
(:mod:`tenantcost.convert`). Which codes are currencies is maintained by ISO's agency and
shipped by the ``iso4217`` package; a hand-written list would go stale (currencies are added
and withdrawn every few years). The decimals a sheet shows stay the display rule's
(:mod:`tenantcost.report.display_rule`): an issued statement's strings never change.
"""

from __future__ import annotations

from functools import cache

from tenantcost.errors import InputError


@cache
def codes() -> frozenset[str]:
    """Every ISO 4217 alphabetic code in force."""
    from iso4217 import Currency

    return frozenset(c.code for c in Currency)


def is_currency(code: str) -> bool:
    """``code`` is an ISO 4217 alphabetic code in force."""
    return code in codes()


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
