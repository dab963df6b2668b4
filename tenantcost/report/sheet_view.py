"""Who a cost sheet is for: the client, or finance.

An account manager sends a client's sheet to that client, who needs to check and defend the
figure: the rule, its scope and exclusions, the unattributed share, and the fingerprints of
the inputs that produced it. Everything else on the sheet is finance's workshop: how
confident the figure is (a grade and the criteria behind it), what the client would pay under
every other key (figures that invite the client to pick the cheapest rule), the command that
reproduces the sheet and the input files' names (a company's folders and naming are nobody
else's business). So one sheet has two views of the same figures, rendered by the same
template:

* :attr:`SheetView.CLIENT`, the default everywhere: the title names the client by its catalog
  name; the confidence grade, the key comparison, the reproduction command and file names are
  left out. It is what the service keeps for an issued revision (prerendered) and what
  ``report`` writes unless told otherwise.
* :attr:`SheetView.INTERNAL`, for finance and admin (``?view=internal`` on the service's
  sheet routes, :attr:`tenantcost.service.permissions.Action.VIEW_INTERNAL_SHEET`;
  ``report --view internal``): all of the above as well, marked as internal. The service
  renders it on demand and never keeps it.

Privacy rules (withheld pools, redaction) are the same in both views: the internal view adds
finance's workings, it does not show another client's figures.
"""

from __future__ import annotations

from enum import StrEnum


class SheetView(StrEnum):
    """Which view of a sheet (its value is what ``?view=`` and ``--view`` take)."""

    CLIENT = "client"
    INTERNAL = "internal"

    @property
    def internal(self) -> bool:
        return self is SheetView.INTERNAL


INTERNAL_NOTE = (
    "Internal version, for finance: it adds the confidence grade, the client's amount under "
    "each key, the input files and the command that reproduces this sheet. Do not send it "
    "to the client; the client version leaves these out."
)
"""What the internal view says at its top (it must never reach a client by mistake)."""


def sheet_heading(client: str, name: str) -> str:
    """The sheet's title: the client's catalog name with its id, or the id alone."""
    return f"{name} ({client})" if name and name != client else client
