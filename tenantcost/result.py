"""The result of an allocation: its tables and the totals the cascade closes on.

Built by the chunk fold (``tenantcost.engine.fold``) and read by the cascade
(``tenantcost.reconcile``), the writers (``tenantcost.writers``) and the report
(``tenantcost.report``). The table shapes are in ``tenantcost.tables``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tenantcost.config.rules import RuleVersion
from tenantcost.kinds import KEYED_KINDS, Detail
from tenantcost.windows import Period


@dataclass
class AllocationResult:
    """Everything one allocation produced; all ``amount`` columns are int64 micro-units.

    * ``lines``: client lines (kinds ``shared``, ``external``, ``direct``, ``idle`` for
      distributed idle). With ``detail == "window"`` one row per client, source and window;
      with ``detail == "period"`` one row per client and source over the period, with a
      ``windows`` count (``measure``/``total_measure`` are then sums over the windows);
    * ``unattributed``: cost that no client carries, per window, with its cause;
    * ``residual``: idle, overhead and reserve per window and workload, *before* any idle
      distribution (the distributed part is in ``lines`` with kind ``idle``);
    * ``exclusions``: excluded workloads per window with their reason;
    * ``unclassified``: cost rows no entry matched (with ``unmatched: unattributed``);
    * ``pool_clients``: per pool source (``rule_id, kind, source, key``, distributed idle as
      ``idle, idle, <method>``), ``min_clients``: the fewest clients with usage among which
      one window of the period split it (windows that reached no client do not count; 0 if
      none did). Sheets show a pool's totals only above a threshold (``privacy:``); not part
      of the JSON/CSV outputs.
    """

    currency: str
    period: Period
    rules: list[RuleVersion]
    key_override: str | None
    reference_total: int
    cost_total: int
    external_total: int
    lines: pd.DataFrame
    unattributed: pd.DataFrame
    residual: pd.DataFrame
    exclusions: pd.DataFrame
    unclassified: pd.DataFrame
    windows: int
    hours: float
    detail: Detail = Detail.WINDOW
    usage_rows: int = 0
    chunks: int = 1
    warnings: list[str] = field(default_factory=list)
    pool_clients: pd.DataFrame = field(default_factory=pd.DataFrame)
    billed_pool_total: int = 0
    """Billed lines outside the clusters split as pools (``billed:`` shared entries)."""
    line_days: pd.DataFrame | None = None
    """With ``days=True`` (a conversion at daily rates), the lines per client, source and UTC
    day (``tenantcost.split.DAY_LINE_COLUMNS``; a day cut by a chunk boundary has one row per
    chunk, so readers sum per line); window-level lines need none."""
    fx: dict[str, Any] | None = None
    """A result converted into a presentation currency (``tenantcost.convert``): the rates
    used (``tenantcost.fx.Conversion.document``); None for a ledger result."""
    ledger: AllocationResult | None = None
    """A converted result's ledger result, unchanged (its amounts are the ``ledger_amount``
    columns too)."""
    invoice: dict[str, Any] | None = None
    """The invoice cascade (``tenantcost.invoice``, as its JSON object) of a run on billing
    data; ``None`` otherwise."""

    def client_totals(self) -> pd.DataFrame:
        """One row per client: ``client, amount`` (sorted by amount desc, then client), and
        ``ledger_amount`` for a converted result."""
        columns = ["amount", "ledger_amount"] if "ledger_amount" in self.lines else ["amount"]
        totals = (
            self.lines.groupby("client", sort=True, observed=True)[columns]
            .sum()
            .reset_index()
            .sort_values(["amount", "client"], ascending=[False, True], kind="mergesort")
            .reset_index(drop=True)
        )
        return totals

    def pool_total(self) -> int:
        """Shared + external cost split by keys (identical for every key)."""
        keyed = self.lines["kind"].isin(KEYED_KINDS)
        pool_unattr = self.unattributed["kind"].isin(KEYED_KINDS)
        return int(self.lines.loc[keyed, "amount"].sum()) + int(
            self.unattributed.loc[pool_unattr, "amount"].sum()
        )
