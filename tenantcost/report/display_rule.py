"""The display rule: how many decimals a run's figures are shown with, versioned.

Every page, sheet and CSV-free surface shows a client's amount as one string, rounded once
(:mod:`tenantcost.store.shown`). The decimals of that string come from this rule. A revision
that was sent to a client must read the same, byte for byte, whenever it is shown again, even
after the rule changes (a currency's decimals corrected, a larger smallest figure). So the rule
has a version, a close records the version and the decimals it chose
(:mod:`tenantcost.store.display`), and a later rule is a new entry of :data:`RULES`, never an
edit of an old one.

* **Version 1**: the currency's ISO 4217 decimals, raised until every non-zero client amount
  of the run shows two significant digits (:func:`tenantcost.report.display.auto_places`).
  Revisions closed before the rule was recorded were shown so.
* **Version 2**: version 1, and never fewer decimals than the latest issued month before, in
  the same currency: a client's history then does not read ``0.116`` beside ``0.1234``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tenantcost.money import MINOR_UNIT_EXPONENT
from tenantcost.report.display import CURRENCY_PLACES, MIN_SIGNIFICANT_UNITS


@dataclass(frozen=True)
class DisplayRule:
    """One version of the rule (see the module doc)."""

    version: int
    currency_places: Mapping[str, int] = field(default_factory=lambda: dict(CURRENCY_PLACES))
    min_significant_units: int = MIN_SIGNIFICANT_UNITS
    carry_history: bool = True
    """Never fewer decimals than the latest issued month before (same currency)."""

    def places(self, currency: str, amounts: Iterable[int], before: int | None = None) -> int:
        """Decimals for a run of ``currency`` with client ``amounts``; ``before``: the
        decimals of the latest issued month before (used when :attr:`carry_history`)."""
        places = self.currency_places.get(currency, 2)
        nonzero = [abs(int(a)) for a in amounts if int(a) != 0]
        if nonzero:
            smallest = min(nonzero)
            while places < MINOR_UNIT_EXPONENT and smallest < self.min_significant_units * 10 ** (
                MINOR_UNIT_EXPONENT - places
            ):
                places += 1
        if self.carry_history and before is not None:
            places = max(places, min(int(before), MINOR_UNIT_EXPONENT))
        return places


RULES: dict[int, DisplayRule] = {
    1: DisplayRule(1, carry_history=False),
    2: DisplayRule(2),
}
"""Every version ever used; a change of the rule is a new version."""
CURRENT = 2
"""The version a close records from now on (and a draft is shown by)."""


def display_rule(version: int | None = None) -> DisplayRule:
    """The rule of ``version`` (None: the current one); an unknown version reads as the
    current one (a store written by a newer tenantcost)."""
    return RULES.get(CURRENT if version is None else version, RULES[CURRENT])
