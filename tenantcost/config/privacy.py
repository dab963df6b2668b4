"""The ``privacy:`` section of the rule file: what a client's sheet may show about a pool.

A sheet explains a client's share of a shared cost with the pool's figures: its total measure,
its cost, the client's share. Where few clients use a source, those figures give the others
away: with two, the total minus the reader's own measure *is* the other client's usage, and
its cost follows; with three, the other two's sum. So a sheet shows a pool's figures only
where every window of the period split the pool among at least ``min_pool_clients`` clients
(``tenantcost.report.sheet``); otherwise the line shows the client's own measure, amount and
unit cost only. The threshold lives in the rule file, dated with it, so a sheet is as
reproducible as its figures; its default comes from ``defaults.yaml``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tenantcost.config.base import Strict
from tenantcost.config.defaults import factory


class Privacy(Strict):
    """What client sheets may show about pools shared with other clients (see the module doc)."""

    min_pool_clients: Annotated[int, Field(ge=1)] = Field(
        default_factory=factory("privacy", "min_pool_clients"), validate_default=True
    )
    """The fewest clients with usage a pool must have had in every window of the period for
    a sheet to show its totals. 1 shows every pool's figures (internal use only)."""
