"""The finance summary of a period: the cascade, idle, every client under every key, the rules.

Finance checks one thing first: that every unit of the reference total landed on exactly one
line, with a gap of zero. The waterfall and the table show that; the client table shows what
the choice of key does to each client; the rule list says which rule made which number.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenantcost.config.keys import describe_key
from tenantcost.kinds import CascadeKind
from tenantcost.money import MINOR_UNIT_EXPONENT, round_for_display
from tenantcost.reconcile import cascade, residual_summary, unattributed_summary
from tenantcost.report.charts import Step, waterfall
from tenantcost.report.confidence import RULE
from tenantcost.report.display import (
    format_amount,
    format_column,
    format_share,
    format_units,
    key_label,
)
from tenantcost.report.exchange_view import summary_note
from tenantcost.report.figures import adjusted
from tenantcost.report.invoice_view import InvoiceView, invoice_ids_text, invoice_view
from tenantcost.report.pack import ReportPack
from tenantcost.report.provenance import Provenance
from tenantcost.report.sheet import PeriodView, Row, period_view
from tenantcost.report.statement import SummaryStatement, summary_statement


@dataclass(frozen=True)
class CascadeRow:
    label: str
    kind: str
    detail: str
    amount: str
    share: str


@dataclass(frozen=True)
class ClientRow:
    client: str
    href: str
    amounts: list[str]
    adjusted: list[bool]
    """Per amount: moved one unit from its own rounding so that the column adds up."""
    confidence: str


@dataclass(frozen=True)
class RuleRow:
    id: str
    effective_from: str
    description: str
    idle: str
    unmatched: str
    keys: list[str]


@dataclass(frozen=True)
class ChangeTable:
    title: str
    text: str
    columns: list[str]
    rows: list[tuple[str, list[str]]]


@dataclass(frozen=True)
class FinanceSummary:
    """Everything the finance summary templates print, already formatted."""

    currency: str
    places: int
    period: PeriodView
    cascade: list[CascadeRow]
    reference_total: str
    reference_detail: str
    gap: str
    closes: bool
    waterfall: str
    idle: list[Row]
    idle_ratio: str
    key_columns: list[str]
    clients: list[ClientRow]
    client_totals: list[str]
    any_adjusted: bool
    unattributed: list[Row]
    rules: list[RuleRow]
    changes: list[ChangeTable]
    provenance: Provenance
    statement: SummaryStatement | None = None
    """A restated, incomplete or draft revision (``report --from-db``); ``None`` otherwise."""
    invoice: InvoiceView | None = None
    """The invoice cascade and the repricing of a run on billing data; ``None`` otherwise."""
    cost_basis: str = ""
    """A run on billing data: the rate basis and the invoices the figures reconcile to."""
    fx_note: str = ""
    """A pack in another currency than the ledger's: the ledger total, policy and rates."""


def _reference_detail(pack: ReportPack) -> str:
    """What the reference total is made of: OpenCost's figure, or with billing data the
    billed effective cost in scope (repriced clusters and billed lines outside them)."""
    base = pack.base
    external = format_amount(base.external_total, pack.places)
    if base.invoice is not None:
        effective = format_amount(base.cost_total + base.billed_pool_total, pack.places)
        return f"billed effective {effective} + external {external}"
    return f"OpenCost {format_amount(base.cost_total, pack.places)} + external {external}"


def _cost_basis(pack: ReportPack) -> str:
    invoice = pack.base.invoice
    if invoice is None:
        return ""
    ids = invoice_ids_text([str(i["id"]) for i in invoice["invoices"]])
    return f"billed effective (amortized) rates; reconciles to {ids}"


def _rules(pack: ReportPack) -> list[RuleRow]:
    rows = []
    for r in pack.base.rules:
        keys = [
            f"{r.source_name(j)}: {describe_key(w.key)}"
            for j, w in enumerate(r.workloads)
            if w.class_ == "shared" and w.key is not None
        ]
        keys += [f"{e.name} (external): {describe_key(e.key)}" for e in r.external]
        rows.append(
            RuleRow(
                r.id,
                r.effective_from.date().isoformat(),
                r.description,
                r.idle,
                r.unmatched,
                keys,
            )
        )
    return rows


def _changes(pack: ReportPack) -> list[ChangeTable]:
    """The change notices: every client's figure in each column, the column rounded within
    itself like a key's (:func:`tenantcost.report.figures.plan`)."""
    tables = []
    for change, shown in zip(pack.changes, pack.shown.changes, strict=True):
        columns = [c.label for c in change.columns]
        rows = []
        for client in pack.all_clients:
            cells = [
                format_units(units.get(client, 0), pack.places)
                if units is not None
                else f"not computable: {c.reason}"
                for c, units in zip(change.columns, shown, strict=True)
            ]
            rows.append((client, cells))
        tables.append(ChangeTable(change.title, change.text, columns, rows))
    return tables


def build_summary(pack: ReportPack, client_files: dict[str, str]) -> FinanceSummary:
    """The finance summary of the pack; ``client_files`` maps a client to its sheet's HTML."""
    base = pack.base
    casc = cascade(base)
    shown = pack.shown
    amounts = [format_units(u, pack.places) for u in shown.cascade]
    reference = format_units(shown.reference, pack.places)
    rows = []
    residual = {str(i["class"]): i for i in residual_summary(base)}
    for line, amount in zip(casc.lines, amounts, strict=True):
        share = format_share(line.amount / casc.reference_total) if casc.reference_total else "-"
        detail = line.detail
        item = residual.get(line.label) if line.kind == "residual" else None
        if item is not None and item["distributed"]:
            detail = (
                f"{format_amount(int(item['before_distribution']), pack.places)} before "
                f"distribution, {format_amount(int(item['distributed']), pack.places)} "
                "distributed to clients"
            )
        rows.append(CascadeRow(line.label, line.kind, detail, amount, share))
    unit = 10**MINOR_UNIT_EXPONENT
    steps = []
    running = 0
    for line, amount in zip(casc.lines, amounts, strict=True):
        steps.append(Step(line.label, running / unit, (running + line.amount) / unit, amount))
        running += line.amount
    steps.append(Step("reference total", 0.0, casc.reference_total / unit, reference, total=True))
    chart = waterfall(
        "cascade-chart",
        "Reconciliation cascade",
        f"Each line of the cascade in {base.currency}, stacked from zero to the reference "
        f"total ({reference}); the gap is {format_amount(casc.gap, pack.places)}.",
        steps,
    )
    idle = next(i for i in residual_summary(base) if i["class"] == "idle")
    before = int(idle["before_distribution"])
    kinds = [(line.kind, line.label) for line in casc.lines]
    left = shown.cascade[kinds.index((CascadeKind.RESIDUAL, "idle"))]
    distributed = round_for_display([int(idle["distributed"])], pack.places)[0]
    idle_rows = [
        Row("distributed to clients", format_units(distributed, pack.places)),
        Row("left on the idle line (cascade)", format_units(left, pack.places)),
        Row("idle before distribution", format_units(distributed + left, pack.places)),
    ]
    key_columns = [RULE, *pack.keys]
    clients = [
        ClientRow(
            client,
            client_files.get(client, ""),
            [format_units(shown.by_key[k][client], pack.places) for k in key_columns],
            [adjusted(shown, pack.amounts, k, client) for k in key_columns],
            pack.confidence[client].level,
        )
        for client in pack.all_clients
    ]
    items = unattributed_summary(base)
    un_amounts, _ = format_column(
        [int(i["amount"]) for i in items], pack.places, total=shown.unattributed_line
    )
    return FinanceSummary(
        currency=base.currency,
        places=pack.places,
        fx_note=summary_note(base, pack.places),
        period=period_view(pack),
        cascade=rows,
        reference_total=reference,
        reference_detail=_reference_detail(pack),
        gap=format_amount(casc.gap, pack.places),
        closes=casc.closes,
        waterfall=chart,
        idle=idle_rows,
        idle_ratio=format_share(before / base.cost_total) if base.cost_total else "-",
        key_columns=["the rule" if k == RULE else key_label(k) for k in key_columns],
        clients=clients,
        client_totals=[format_units(shown.key_totals[k], pack.places) for k in key_columns],
        any_adjusted=any(any(c.adjusted) for c in clients),
        unattributed=[
            Row(f"{i['source']} ({i['kind']})", a, str(i["cause"]))
            for i, a in zip(items, un_amounts, strict=True)
        ],
        rules=_rules(pack),
        changes=_changes(pack),
        provenance=pack.provenance,
        statement=summary_statement(pack.statement, pack.places, shown.by_key[RULE]),
        invoice=invoice_view(base.invoice, pack.places),
        cost_basis=_cost_basis(pack),
    )
