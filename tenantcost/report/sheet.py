"""One client's cost sheet, as display-ready data: every figure a person needs to defend it.

The sheet shows the client's own figures and aggregates of the cluster, never another client:
lines and charts are filtered to the client, the key comparison shows only this client's
amount under each key, and free text is redacted (:mod:`tenantcost.report.privacy`).

An aggregate over few clients is another client's figure in disguise: with two clients on a
source, the pool's measure minus the reader's own *is* the other's usage. So a pool's figures
(total measure, cost, the reader's share, its unattributed part) appear only where every
window of the period split the pool among at least ``privacy.min_pool_clients`` clients
(``AllocationResult.pool_clients``); otherwise the line keeps the reader's own measure, amount
and unit cost and says why the rest is withheld. The cluster aggregates of section 3 (the cost
meant for clients, the unattributed total) follow the same rule with the number of clients of
the period: their sum minus the reader's total is the others' sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.config.keys import EVEN
from tenantcost.reconcile import unattributed_summary
from tenantcost.report.changes import RuleChange, bridge_notice
from tenantcost.report.charts import Bar, bar_chart
from tenantcost.report.confidence import RULE, ClientConfidence, Criterion
from tenantcost.report.display import (
    format_amount,
    format_column,
    format_measure,
    format_rate,
    format_share,
    format_units,
    gauge_measure,
    key_label,
    period_label,
    unit_basis,
)
from tenantcost.report.exchange_view import ExchangeView, exchange_view
from tenantcost.report.invoice_view import BillingBasis, billing_basis
from tenantcost.report.pack import ReportPack
from tenantcost.report.privacy import Redaction, too_few_clients, withheld_pools
from tenantcost.report.provenance import Provenance, client_facing
from tenantcost.report.rounding import client_lines as round_lines
from tenantcost.report.rule_text import Scope, SeenWorkloads, scope, seen_workloads
from tenantcost.report.sheet_view import INTERNAL_NOTE, SheetView, sheet_heading
from tenantcost.report.statement import StatementView, statement_view
from tenantcost.timefmt import iso_z
from tenantcost.writers.json_output import client_lines

KIND_ORDER = {"shared": 0, "billed": 1, "external": 2, "direct": 3, "idle": 4}
KIND_LABELS = {
    "shared": "shared workload",
    "external": "external cost",
    "billed": "billed service",
    "direct": "your workload",
    "idle": "distributed idle",
}
BILLED_DIRECT_LABEL = "your billed service"
"""A direct line from a ``billed:`` entry (a billed line tagged with the client)."""


@dataclass(frozen=True)
class PeriodView:
    """The period as shown (a display model of ``tenantcost.windows.Period``): its label,
    bounds and how much data it held."""

    label: str
    is_month: bool
    start: str
    end: str
    hours: str
    windows: int
    coverage: str
    """Says how much of the period the cost data covers, when not all of it; else empty."""


WITHHELD = "withheld"
"""What a sheet shows in place of a figure that would reveal other clients' figures."""


@dataclass(frozen=True)
class SheetLine:
    source: str
    kind: str
    key: str
    measure: str
    total_measure: str
    share: str
    pool: str
    amount: str
    unit_cost: str
    unit_basis: str
    withheld: bool = False
    """Whether the pool's figures (total measure, share, source cost) are withheld."""


@dataclass(frozen=True)
class Row:
    """A labelled figure (label, figure, detail) for small tables."""

    label: str
    value: str
    detail: str = ""


@dataclass(frozen=True)
class CriterionView:
    name: str
    figure: str
    grade: str
    thresholds: str
    detail: str


@dataclass(frozen=True)
class KeyRow:
    key: str
    label: str
    amount: str
    change: str
    counted: str


@dataclass(frozen=True)
class ConfidenceView:
    level: str
    criteria: list[CriterionView]
    keys: list[KeyRow]
    chart: str


@dataclass(frozen=True)
class NoticeView:
    title: str
    text: str
    rows: list[Row]


@dataclass(frozen=True)
class UnattributedView:
    client_bound: str
    """The cost meant for clients (every client's lines and the unattributed cost); empty
    when withheld."""
    total: str
    """The unattributed total; empty when withheld."""
    share: str
    rows: list[Row]
    note: str = ""
    """Why figures of this section are withheld; empty when none is."""


@dataclass(frozen=True)
class ClientSheet:
    """Everything the client sheet templates print, already formatted."""

    client: str
    slug: str
    currency: str
    places: int
    period: PeriodView
    total: str
    lines: list[SheetLine]
    sources_chart: str
    scope: Scope
    unattributed: UnattributedView
    confidence: ConfidenceView
    notices: list[NoticeView]
    provenance: Provenance
    min_pool_clients: int = 1
    withheld_note: str = ""
    """Why some lines' pool figures are withheld; empty when every line shows them."""
    statement: StatementView | None = None
    """A restated revision or a draft (``report --from-db``); ``None`` otherwise."""
    billing: BillingBasis | None = None
    """A run on billing data: the rate basis and the invoice ids; ``None`` otherwise."""
    name: str = ""
    """The client's catalog name (redacted for the reader); empty when none is known."""
    view: SheetView = SheetView.CLIENT
    """Who the sheet is for (:mod:`tenantcost.report.sheet_view`): the templates leave the
    internal items out of the client view."""
    exchange: ExchangeView | None = None
    """A sheet in another currency than the ledger's: how to redo the conversion."""

    @property
    def heading(self) -> str:
        """The client as the title names it: catalog name and id, or the id alone."""
        return sheet_heading(self.client, self.name)

    @property
    def internal(self) -> bool:
        return self.view.internal

    @property
    def internal_note(self) -> str:
        return INTERNAL_NOTE


def period_view(pack: ReportPack) -> PeriodView:
    base = pack.base
    return PeriodView(
        label=period_label(base.period.start, base.period.end),
        is_month=len(period_label(base.period.start, base.period.end)) == 7,
        start=iso_z(base.period.start),
        end=iso_z(base.period.end),
        hours=format_measure(base.hours),
        windows=base.windows,
        coverage=(
            f"the cost data covers {format_measure(base.hours)} h of the period's "
            f"{format_measure(base.period.hours)} h"
            if abs(base.period.hours - base.hours) > 1e-9
            else ""
        ),
    )


def pools(pack: ReportPack) -> pd.Series:
    """Each (kind, source, key)'s cost over the period: every client's part plus its
    unattributed part, so a source split by two keys (a rule change) has two pools."""
    lines = pack.base.lines
    keyed = lines.drop_duplicates(["rule_id", "kind", "source"])[
        ["rule_id", "kind", "source", "key"]
    ]
    gaps = pack.base.unattributed.merge(keyed, on=["rule_id", "kind", "source"], how="inner")
    parts = pd.concat(
        [lines[["kind", "source", "key", "amount"]], gaps[["kind", "source", "key", "amount"]]]
    )
    return parts.groupby(["kind", "source", "key"], observed=True)["amount"].sum().astype("int64")


def withheld_note(threshold: int, kind: str = "source") -> str:
    """The sheet's short reason for a withheld figure."""
    return (
        f"Withheld: fewer than {threshold} clients used this {kind} in at least one hour of "
        "the period, so its totals (total measure, source cost, your share of it, its "
        "unattributed part) would reveal other clients' usage and cost. Your own measure, "
        "amount and unit cost (your amount over your measure) are shown in full."
    )


def lines_by_client(pack: ReportPack) -> dict[str, list[Any]]:
    """Each client's lines (:func:`client_lines` rows), in sheet order (kind, source, key):
    grouped and sorted once for the whole pack, then cut by client."""
    grouped = client_lines(pack.base)
    if grouped.empty:
        return {}
    ordered = grouped.assign(order=grouped["kind"].map(KIND_ORDER)).sort_values(
        ["client", "order", "source", "key"], kind="mergesort"
    )  # a stable sort: within a client, the order of sorting that client's lines alone
    records = list(ordered.itertuples(index=False))
    clients = ordered["client"].astype(str).to_numpy()
    starts = np.flatnonzero(np.r_[True, clients[1:] != clients[:-1]])
    ends = np.r_[starts[1:], len(clients)]
    return {str(clients[a]): records[a:b] for a, b in zip(starts, ends, strict=True)}


def billed_sources(pack: ReportPack) -> set[str]:
    """The source names of the ``billed:`` entries in force (direct billed lines carry them)."""
    return {entry.label for version in pack.base.rules for entry in version.billed}


def _kind_label(kind: str, source: str, billed: set[str]) -> str:
    if kind == "direct" and source in billed:
        return BILLED_DIRECT_LABEL
    return KIND_LABELS.get(kind, kind)


def _lines(
    pack: ReportPack,
    client: str,
    mine: Sequence[Any],
    pool: dict[tuple[Any, ...], Any],
    hidden: set[tuple[str, str, str]],
) -> tuple[list[SheetLine], str]:
    """The client's lines (from :func:`lines_by_client`), formatted for the sheet: rounded to
    the client's total as every page shows it (:mod:`tenantcost.report.rounding`)."""
    shown_total = pack.shown.by_key[RULE].get(client, 0)
    units = round_lines([int(line.amount) for line in mine], pack.places, shown_total)
    amounts = [format_units(u, pack.places) for u in units]
    total = format_units(shown_total, pack.places)
    billed = billed_sources(pack)
    gauges = {g: m.unit for g, m in pack.inputs.ruleset.gauges.items()}
    out = []
    for line, amount in zip(mine, amounts, strict=True):
        keyed = line.kind in ("shared", "external", "billed")
        basis = unit_basis(str(line.key), gauges) if keyed else None
        shown = gauge_measure(gauges[str(line.key)])[1] if str(line.key) in gauges else 1.0
        rate = "-"
        if basis is not None and line.measure > 0:
            rate = format_rate(line.amount / (line.measure / basis[1]), pack.places)
        pool_amount = pool.get((line.kind, line.source, line.key))
        share = line.share if keyed else (1.0 if line.kind == "direct" else math.nan)
        if line.kind == "idle" and pool_amount:
            share = line.amount / pool_amount
        hide = line.kind != "direct" and (str(line.kind), str(line.source), str(line.key)) in hidden
        out.append(
            SheetLine(
                source=str(line.source),
                kind=_kind_label(str(line.kind), str(line.source), billed),
                key=key_label(str(line.key), gauges) if line.key else "-",
                measure=format_measure(line.measure / shown) if keyed else "-",
                total_measure=(
                    format_measure(line.total_measure / shown) if keyed and not hide else "-"
                ),
                share=WITHHELD if hide else format_share(share),
                pool=(
                    WITHHELD
                    if hide
                    else format_amount(int(pool_amount), pack.places)
                    if pool_amount is not None and line.kind != "direct"
                    else "-"
                ),
                amount=amount,
                unit_cost=rate,
                unit_basis=basis[0] if basis is not None and rate != "-" else "",
                withheld=hide,
            )
        )
    return out, total


def _criterion(c: Criterion, figure: str, detail: str) -> CriterionView:
    return CriterionView(
        name=c.name,
        figure=figure,
        grade=c.grade,
        thresholds=(
            f"high up to {format_share(c.band.high)}, medium up to {format_share(c.band.medium)}"
        ),
        detail=detail,
    )


def _confidence(
    pack: ReportPack, client: str, conf: ClientConfidence, hide_even: bool = False
) -> ConfidenceView:
    """Section 4. With ``hide_even`` (some pool of the client's is withheld) the client's
    amount under ``even`` is withheld too: each pool's even part is its cost over its client
    count, so a reader who knows how many clients there are would get the pool's cost back."""
    row = pack.amounts.loc[client]
    rule = int(row[RULE])
    shown = {k: format_units(pack.shown.by_key[k][client], pack.places) for k in [RULE, *pack.keys]}
    name = {RULE: "the rule as written"} | {k: f"{key_label(k)} everywhere" for k in pack.keys}
    keys = []
    bars = []
    for key in [RULE, *pack.keys]:
        if hide_even and key == EVEN:
            keys.append(KeyRow(key, name[key], WITHHELD, "-", "no (withheld: small pools)"))
            continue
        amount = int(row[key])
        change = "-" if key == RULE else (format_share((amount - rule) / rule) if rule else "n/a")
        if change not in ("-", "n/a") and amount > rule:
            change = "+" + change
        counted = "yes" if key == RULE or key in conf.spread_keys else "no (ignores usage)"
        keys.append(KeyRow(key, name[key], shown[key], change, counted))
        label = name[key] + (" (applied)" if key == RULE else "")
        bars.append(Bar(label, amount, shown[key], key == RULE))
    counted_amounts = {
        k: int(row[k]) for k in [RULE, *conf.spread_keys] if not (hide_even and k == EVEN)
    }
    low = min(counted_amounts, key=lambda k: counted_amounts[k])
    high = max(counted_amounts, key=lambda k: counted_amounts[k])
    spread_detail = (
        f"From {shown[low]} ({name[low]}) to {shown[high]} ({name[high]}), relative to your "
        "amount under the rule."
        if len(counted_amounts) > 1
        else "No alternative key: the usage data has no measure to compare with."
    )
    if hide_even and EVEN in pack.keys:
        spread_detail += (
            " The even split is withheld: with pools this small it would reveal their cost."
        )
    elif EVEN in pack.keys and EVEN not in conf.spread_keys:
        spread_detail += " The even split is shown but not counted: it ignores usage."
    nc = conf.no_client_by_service
    nc_detail = (
        "; ".join(f"{s}: {format_share(v)}" for s, v in nc.items())
        if nc
        else "No usage of shared services in the period."
    )
    mh = conf.missing_hours_by_service
    hours = format_measure(pack.base.hours)
    mh_detail = (
        "; ".join(f"{s}: {format_measure(v)} h of {hours} h" for s, v in mh.items())
        if mh
        else "No shared service in your figure."
    )
    criteria = [
        _criterion(conf.spread, format_share(conf.spread.value), spread_detail),
        _criterion(conf.no_client, format_share(conf.no_client.value), nc_detail),
        _criterion(conf.missing, format_share(conf.missing.value), mh_detail),
    ]
    chart = bar_chart(
        "keys-chart",
        "Your amount under each key",
        f"Your amount in {pack.base.currency} under the rule as written and with each "
        "alternative key applied to every split; only your own figures.",
        bars,
    )
    return ConfidenceView(conf.level, criteria, keys, chart)


def _notices(
    pack: ReportPack, changes: list[RuleChange], client: str, redact: Callable[[str], str]
) -> list[NoticeView]:
    out = []
    for change, shown in zip(changes, pack.shown.changes, strict=True):
        rows = []
        for column, units in zip(change.columns, shown, strict=True):
            if units is None:
                rows.append(Row(redact(column.label), "not computable", redact(column.reason)))
            else:  # the column's one rounding (the figure the summary shows)
                value = units.get(client, 0)
                rows.append(Row(redact(column.label), format_units(value, pack.places)))
        out.append(NoticeView(redact(change.title), redact(change.text), rows))
    return out


def _bridge(pack: ReportPack, client: str, redact: Callable[[str], str]) -> list[NoticeView]:
    """The bridge from last period (``explain``'s parts), when the pack has both periods."""
    shown = pack.shown.by_key[RULE].get(client)  # the sheet's total: the bridge ends there
    found = bridge_notice(pack.bridges, client, pack.places, shown) if pack.bridges else None
    if found is None:
        return []
    title, text, rows = found
    return [NoticeView(redact(title), redact(text), [Row(redact(a), b, c) for a, b, c in rows])]


def _unattributed(pack: ReportPack, hidden: set[tuple[str, str, str]]) -> UnattributedView:
    """Section 3, before redaction (the same for every sheet). A row of a withheld pool is
    withheld (pool cost minus its unattributed part is the clients' part); the total is
    withheld with any row (total minus the rows shown is the row); the cost meant for clients
    and the share are withheld unless the period had ``min_pool_clients`` clients (that cost
    minus the unattributed minus the reader's total is the other clients' sum)."""
    threshold = pack.inputs.ruleset.privacy.min_pool_clients
    items = unattributed_summary(pack.base)
    amounts, total = format_column([int(i["amount"]) for i in items], pack.places)
    hidden_pools = {(kind, source) for kind, source, _ in hidden}
    hide = [(str(i["kind"]), str(i["source"])) in hidden_pools for i in items]
    unattributed = sum(int(i["amount"]) for i in items)
    bound = int(pack.base.lines["amount"].sum()) + unattributed
    few = too_few_clients(pack.base, threshold)
    rows = [
        Row(f"{i['source']} ({i['kind']})", WITHHELD if h else amount, str(i["cause"]))
        for i, amount, h in zip(items, amounts, hide, strict=True)
    ]
    notes = []
    if any(hide):
        notes.append(
            f"The unattributed part of a source that fewer than {threshold} clients used in "
            "some hour is withheld, and with it the total: with the source's cost, it would "
            "reveal what the other clients were charged."
        )
    if few:
        notes.append(
            f"The cost meant for all clients is withheld: this period had fewer than "
            f"{threshold} clients, so that sum minus your total would reveal the others'."
        )
    return UnattributedView(
        client_bound="" if few else format_amount(bound, pack.places),
        total="" if any(hide) else total,
        share="" if few or any(hide) else (format_share(unattributed / bound) if bound else "-"),
        rows=rows,
        note=" ".join(notes),
    )


@dataclass(frozen=True)
class PackViews:
    """What every sheet of a pack shares, computed once per pack (:func:`prepare`): the
    pack's lines grouped by client, the pools and which are withheld, section 3, the workloads
    seen, and the compiled ids to redact. A sheet then costs its own lines, not all lines: a
    pack is linear in clients."""

    period: PeriodView
    lines: dict[str, list[Any]]
    pool: dict[tuple[Any, ...], Any]
    hidden: set[tuple[str, str, str]]
    unattributed: UnattributedView
    """Section 3 before redaction."""
    seen: SeenWorkloads
    redaction: Redaction


def prepare(pack: ReportPack, names: Mapping[str, str] | None = None) -> PackViews:
    """The shared part of every sheet of ``pack``; ``names``: the catalog names, by client id,
    redacted as the ids are (the service passes its store's catalog)."""
    hidden = withheld_pools(pack.base, pack.inputs.ruleset.privacy.min_pool_clients)
    pool = pools(pack)
    return PackViews(
        period=period_view(pack),
        lines=lines_by_client(pack),
        pool=dict(zip(pool.index.tolist(), pool.to_numpy(), strict=True)),
        hidden=hidden,
        unattributed=_unattributed(pack, hidden),
        seen=seen_workloads(pack.base),
        redaction=Redaction(pack.known_clients, names),
    )


def slug(client: str) -> str:
    """A file-name-safe form of a client id (the id itself stays in the page)."""
    import re

    text = re.sub(r"[^A-Za-z0-9._-]+", "-", client).strip("-.")
    return text or "client"


def build_sheet(
    pack: ReportPack,
    client: str,
    file_slug: str | None = None,
    views: PackViews | None = None,
    view: SheetView = SheetView.CLIENT,
    name: str = "",
) -> ClientSheet:
    """The sheet of one client of the pack (``views``: :func:`prepare` of the pack, shared by
    its sheets; computed here when not given), for ``view``'s reader; ``name``: the client's
    catalog name for the title (redacted like every text: a name may hold another's id)."""
    views = views if views is not None else prepare(pack)
    redact = views.redaction.reader(client)
    threshold = pack.inputs.ruleset.privacy.min_pool_clients
    lines, total = _lines(pack, client, views.lines.get(client, []), views.pool, views.hidden)
    chart = bar_chart(
        "sources-chart",
        "Your cost by source",
        f"Your amount in {pack.base.currency} per source (shared workload, external cost, "
        "direct workload, distributed idle).",
        [
            Bar(
                redact(f"{line.source} ({line.key})" if line.key != "-" else line.source),
                float(line.amount.replace(",", "")),
                line.amount,
            )
            for line in lines
        ],
    )
    provenance = client_facing(pack.provenance, redact)
    section3 = views.unattributed
    return ClientSheet(
        client=client,
        slug=file_slug or slug(client),
        currency=pack.base.currency,
        places=pack.places,
        period=views.period,
        total=total,
        lines=[SheetLine(**{**line.__dict__, "source": redact(line.source)}) for line in lines],
        sources_chart=chart,
        scope=scope(pack.base, client, redact, views.seen, views.hidden),
        unattributed=replace(
            section3, rows=[replace(row, label=redact(row.label)) for row in section3.rows]
        ),
        confidence=_confidence(
            pack, client, pack.confidence[client], hide_even=any(line.withheld for line in lines)
        ),
        notices=_notices(pack, pack.changes, client, redact) + _bridge(pack, client, redact),
        provenance=provenance,
        min_pool_clients=threshold,
        withheld_note=withheld_note(threshold) if any(line.withheld for line in lines) else "",
        statement=statement_view(
            pack.statement, client, pack.places, redact, pack.shown.by_key[RULE].get(client)
        ),
        billing=billing_basis(pack.base.invoice, redact),
        name=redact(name),
        view=view,
        exchange=exchange_view(pack.base, client, view.internal),
    )
