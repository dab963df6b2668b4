"""Plain-text tables for the terminal: readable, aligned, exact to the micro-unit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tenantcost.money import MINOR_UNIT_EXPONENT, format_amount
from tenantcost.reconcile import Cascade
from tenantcost.result import AllocationResult


def money(micros: int) -> str:
    """An exact amount with all its decimals (the table never rounds away a micro-unit)."""
    return format_amount(micros, MINOR_UNIT_EXPONENT)


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    """Align columns; ``right`` holds the indexes of right-aligned (numeric) columns."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(headers), rule, *(fmt(r) for r in rows)])


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def header(result: AllocationResult) -> str:
    rules = ", ".join(f"{r.id} (from {r.effective_from.date()})" for r in result.rules)
    key = f"; key override: {result.key_override}" if result.key_override else ""
    return (
        f"Period {result.period.start.isoformat()} to {result.period.end.isoformat()} "
        f"({result.windows} windows, {result.hours:g} h); rules: {rules}{key}\n"
        f"Amounts in {result.currency}, exact to 10^-{MINOR_UNIT_EXPONENT}.{_fx_line(result)}"
    )


def _fx_line(result: AllocationResult) -> str:
    """How a converted result was converted: from what, at which rates, by which policy."""
    fx = result.fx
    if fx is None or result.ledger is None:
        return ""
    per = f"{fx['currency']} per {fx['ledger_currency']}"
    if fx.get("periods"):
        months = "; ".join(
            f"{p['month']}: {p['rate']}"
            + (
                f", mean of {p['published_days']} published days"
                if p.get("published_days", 1) > 1
                else ""
            )
            for p in fx["periods"]
        )
        used = f"at {per} {months}"
    else:
        rates = [r["rate"] for r in fx["rates"]]
        dates = [r["date"] for r in fx["rates"]]
        span = dates[0] if len(set(dates)) == 1 else f"{dates[0]} to {dates[-1]}"
        shown = rates[0] if len(set(rates)) == 1 else f"{len(set(rates))} daily rates"
        used = f"at {shown} {per} ({span})"
    provisional = " (provisional: a day's rate is not published yet)" if fx["provisional"] else ""
    return (
        f"\nConverted from {fx['ledger_currency']} (reference total "
        f"{money(result.ledger.reference_total)} {fx['ledger_currency']}) {used}; policy "
        f"{fx['policy']}; source {fx['source']}{provisional}; --format json lists every rate."
    )


def clients_table(result: AllocationResult) -> str:
    totals = result.client_totals()
    attributed = int(totals["amount"].sum())
    rows = [
        [str(r.client), money(int(r.amount)), _pct(int(r.amount), attributed)]
        for r in totals.itertuples(index=False)
    ]
    rows.append(["(all clients)", money(attributed), _pct(attributed, attributed)])
    return render_table(["client", f"amount {result.currency}", "share"], rows, {1, 2})


def sources_table(result: AllocationResult) -> str:
    """Each client's amount per source (shared workload, external cost, direct, idle)."""
    lines = result.lines
    if lines.empty:
        return "(no client lines)"
    matrix = lines.pivot_table(
        index="client", columns="source", values="amount", aggfunc="sum", fill_value=0
    ).astype("int64")
    order = result.client_totals()["client"].tolist()
    matrix = matrix.reindex(order)
    sources = [str(c) for c in matrix.columns]
    rows = [
        [str(client), *(money(int(v)) for v in values)]
        for client, values in zip(matrix.index, matrix.to_numpy(), strict=True)
    ]
    return render_table(["client", *sources], rows, set(range(1, len(sources) + 1)))


def cascade_table(casc: Cascade, currency: str, detail: str = "OpenCost + external") -> str:
    rows = [
        [line.label, money(line.amount), _pct(line.amount, casc.reference_total), line.detail]
        for line in casc.lines
    ]
    rows.append(["reference total", money(casc.reference_total), "100.0 %", detail])
    rows.append(["gap", money(casc.gap), "", "closes" if casc.closes else "DOES NOT CLOSE"])
    return render_table(["cascade", f"amount {currency}", "of total", "detail"], rows, {1, 2})


def invoice_table(invoice: dict[str, Any]) -> str:
    """The invoice cascade (``reconcile --against invoice``): its lines, the effective cost
    in scope after the allocation's own parts, the invoices, the repricing, and the gap."""
    currency = invoice["currency"]
    rows: list[list[str]] = []
    subtotal_after = _last_in_scope(invoice["lines"])
    for i, line in enumerate(invoice["lines"]):
        name = str(line["name"])
        if line.get("hours") is not None:  # billed without cost data: its hours
            to_clients = money(int(line.get("to_clients", 0)))
            name += f" ({int(line['hours'])} h; {to_clients} charged to clients)"
        rows.append([str(line["part"]), name, money(int(line["amount"]))])
        if i == subtotal_after:
            rows.append(["=", "effective cost in scope", money(int(invoice["effective_in_scope"]))])
    for inv in invoice["invoices"]:
        rows.append(["", f"invoice {inv['id']}", money(int(inv["billed_total"]))])
    rows.append(["=", "invoice total (billed)", money(int(invoice["billed_total"]))])
    gap = int(invoice["gap"])
    rows.append(["gap", "closes" if gap == 0 else "DOES NOT CLOSE", money(gap)])
    table = render_table(["part", "line", f"amount {currency}"], rows, {2})
    return table + "\n\n" + repricing_table(invoice)


def _last_in_scope(lines: list[dict[str, Any]]) -> int:
    """The index of the last line before the outside lines and the bridge."""
    last = -1
    for i, line in enumerate(lines):
        if line["part"] not in ("outside", "bridge"):
            last = i
    return last


def repricing_table(invoice: dict[str, Any]) -> str:
    """Per cluster: OpenCost's estimate, what was billed, and the ratio (estimates marked)."""
    per: dict[str, list[int]] = {}
    estimated: set[str] = set()
    for r in invoice["repricing"]:
        totals = per.setdefault(str(r["cluster"]), [0, 0, 0])
        totals[0] += int(r["opencost"])
        totals[1] += int(r["billed_effective"])
        totals[2] += 1
        if r["estimate"]:
            estimated.add(str(r["cluster"]))
    rows = [
        [
            name or '""',
            money(o),
            money(b),
            f"{b / o:.4f}" if o else "-",
            f"{n}" + (" (estimates kept)" if name in estimated else ""),
        ]
        for name, (o, b, n) in sorted(per.items())
    ]
    return render_table(
        ["cluster", "OpenCost estimate", "billed effective", "ratio", "periods"], rows, {1, 2, 3}
    )
