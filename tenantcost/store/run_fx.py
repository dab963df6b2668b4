"""A run's conversions: the ledger shown in other currencies, recorded with the run, frozen
by the close that issues it.

``tenantcost run`` converts the month it allocated into every currency the store shows
figures in (the rule file's ``presentation:`` and the catalog's client currencies; the
ledger currency needs none) with the
exact, rounded-once conversion of ``allocate --currency`` (:mod:`tenantcost.convert`), and
records each conversion beside the run (``run_fx``: the ``fx`` document, the converted
cascade; ``run_fx_client``: each client's converted and ledger totals).

**Which rates.** The rates ``tenantcost fx load`` stored (:mod:`tenantcost.store.fx_rates`),
and the bundled ECB history when the rule file's ``fx.rates`` names ``ecb`` (it is part of
the package, so every machine has the same). A rates *file* named in the rule file is not
read by ``run``: the store's machines need not have it, and a statement must be redone from
what the store holds. So ``fx load`` it first; the refusal of a missing rate says so.

**Frozen at close.** A close issues a run, and the run's conversions are rows that nothing
rewrites: rates loaded later never change an issued statement. They do make the month's
latest run stale (``run_fx.fx_load_id`` is the newest load the run could read), so the next
close of a reopened month runs again with the rates in force then; when its rates differ
from the issued revision's, the close says so (:func:`rates_changed`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, func, insert, select

from tenantcost.config.fx import ECB
from tenantcost.config.rules import RuleSet
from tenantcost.economics import MonthCosts
from tenantcost.errors import InputError, warn
from tenantcost.presentation import present
from tenantcost.readers.fx_rates import ecb_label, ecb_rates, merge_rates
from tenantcost.reconcile import cascade
from tenantcost.result import AllocationResult
from tenantcost.store.connection import connected, result_frame
from tenantcost.store.fx_rates import stored_rates
from tenantcost.store.models import FxLoad, RunFx, RunFxClient, RunFxLine, table
from tenantcost.store.report_figures import record_client_days, record_converted_tables


def run_currencies(ruleset: RuleSet, clients: set[str] | None = None) -> list[str]:
    """The currencies a run of ``ruleset`` records a conversion for (never the ledger's):
    ``presentation:`` and the catalog's client currencies (``clients``)."""
    shown = ({ruleset.presentation} if ruleset.presentation else set()) | (clients or set())
    return sorted(c for c in shown if c != ruleset.currency)


@dataclass(frozen=True)
class StoreRates:
    """The rates a run converts at: the table, its sources' label and the newest load."""

    table: pd.DataFrame
    source: str
    load_id: int | None


def store_rates(connection: Connection, ruleset: RuleSet) -> StoreRates:
    """The stored loads' rates, with the bundled ECB history under them when ``fx.rates``
    names ``ecb`` (a stored rate wins over the ECB's for the same day and pair)."""
    stored = stored_rates(connection)
    uses_ecb = ruleset.fx is not None and ECB in ruleset.fx.rates
    frames = ([ecb_rates()] if uses_ecb else []) + [stored]
    used = sorted({int(o.split()[-1]) for o in stored["origin"]})
    load = table(FxLoad).c
    origins = dict(connection.execute(select(load.id, load.origin).where(load.id.in_(used))).all())
    loads = "; ".join(f"fx load {i}: {origins[i]}" for i in used)
    labels = [ecb_label()] if uses_ecb else []
    labels += [f"the store's rates ({loads})"] if used else []
    newest = connection.execute(select(func.max(load.id))).scalar()
    return StoreRates(
        merge_rates(frames), "; ".join(labels) or "no rates", int(newest) if newest else None
    )


def convert_run(
    result: AllocationResult, ruleset: RuleSet, currencies: list[str], rates: StoreRates
) -> list[AllocationResult]:
    """``result`` converted into each of ``currencies``. The ``presentation:`` currency is
    required: a rate the store lacks is refused with the way to add it (``fx load``). A
    client's own currency (the catalog's) the rates cannot reach is skipped with a warning:
    a catalog accepted at load must never stop the month's run or close; that client's pages
    stay in the ledger currency, as their currency code says."""
    out = []
    for currency in currencies:
        try:
            out.append(present(result, ruleset, currency, (rates.table, rates.source)))
        except InputError as exc:
            fix = ("a run converts at the rates in the store: `tenantcost fx load FILE` (or "
                   "`fx load ecb`) stores them")  # fmt: skip
            if currency == ruleset.presentation:
                raise InputError(
                    f"converting {result.currency} into {currency} (presentation:): "
                    f"{exc.message}; {fix}"
                ) from None
            warn(f"not converted into {currency}, a client's currency in the catalog: "
                 f"{exc.message}; its clients are shown in {result.currency}; {fix}")  # fmt: skip
    return out


def record_conversions(
    connection: Connection, run_id: str, converted: list[AllocationResult], load_id: int | None
) -> None:
    """One ``run_fx`` row, the clients' ``run_fx_client`` rows, the lines' ``run_fx_line``
    rows and the rest of the converted cascade (``run_fx_workload``, ``run_fx_unattributed``)
    per conversion (inside the run's write transaction)."""
    for result in converted:
        assert result.fx is not None and result.ledger is not None
        casc = cascade(result)
        lines = [[c.label, str(c.kind), c.detail, c.amount] for c in casc.lines]
        connection.execute(insert(table(RunFx)), [{
            "run_id": run_id, "currency": result.currency, "policy": result.fx["policy"],
            "source": result.fx["source"], "provisional": bool(result.fx["provisional"]),
            "document": json.dumps(result.fx, sort_keys=True), "cascade": json.dumps(lines),
            "reference_total": result.reference_total,
            "ledger_reference_total": result.ledger.reference_total, "fx_load_id": load_id,
        }])  # fmt: skip
        clients = _client_totals(result)
        if not clients.empty:
            rows = clients.assign(run_id=run_id, currency=result.currency)
            connection.execute(insert(table(RunFxClient)), rows.to_dict("records"))
        lines = _lines(result)
        if not lines.empty:
            rows = lines.assign(run_id=run_id, currency=result.currency)
            connection.execute(insert(table(RunFxLine)), rows.to_dict("records"))
        record_converted_tables(connection, run_id, result)
    daily = [r for r in converted if r.fx is not None and r.fx["policy"] == "daily"]
    if daily and daily[0].ledger is not None:
        record_client_days(connection, run_id, daily[0].ledger)


LINE_COLUMNS = ["client", "rule_id", "source", "kind", "key"]
"""What identifies a converted line (``run_fx_line``)."""


def _lines(result: AllocationResult) -> pd.DataFrame:
    """A converted result's lines as ``run_fx_line`` rows (plain Python values)."""
    lines = result.lines
    if lines.empty:
        return pd.DataFrame(columns=[*LINE_COLUMNS, "amount", "ledger_amount"])
    out = lines[[*LINE_COLUMNS, "amount", "ledger_amount"]].astype(
        {c: "str" for c in LINE_COLUMNS} | {"amount": "int64", "ledger_amount": "int64"}
    )
    return out.astype(object)


def _client_totals(result: AllocationResult) -> pd.DataFrame:
    """``client, amount, ledger_amount`` per client of a converted result (plain ints)."""
    lines = result.lines
    if lines.empty:
        return pd.DataFrame(columns=["client", "amount", "ledger_amount"])
    sums = (
        lines.assign(client=lines["client"].astype("str"))
        .groupby("client", sort=True)[["amount", "ledger_amount"]]
        .sum()
        .reset_index()
    )
    return sums.astype({"amount": "int64", "ledger_amount": "int64"}).astype(object)


@dataclass(frozen=True)
class StoredConversion:
    """A run's recorded conversion into one currency."""

    currency: str
    document: dict[str, Any]
    cascade: list[list[Any]]
    reference_total: int
    ledger_reference_total: int
    provisional: bool
    fx_load_id: int | None


def run_conversions(bind: Engine | Connection, run_id: str) -> dict[str, StoredConversion]:
    """The conversions recorded with ``run_id``, by currency."""
    f = table(RunFx).c
    with connected(bind) as connection:
        rows = connection.execute(select(table(RunFx)).where(f.run_id == run_id)).mappings()
        return {
            r["currency"]: StoredConversion(
                r["currency"],
                json.loads(r["document"]),
                json.loads(r["cascade"]),
                int(r["reference_total"]),
                int(r["ledger_reference_total"]),
                bool(r["provisional"]),
                r["fx_load_id"],
            )
            for r in rows
        }


def client_conversions(
    bind: Engine | Connection,
    run_ids: list[str],
    currency: str,
    clients: list[str] | None = None,
) -> pd.DataFrame:
    """``run_id, client, amount, ledger_amount`` of ``run_ids`` in ``currency`` (of
    ``clients`` only, when given: a page reads its own rows by the primary key)."""
    c = table(RunFxClient).c
    query = select(c.run_id, c.client, c.amount, c.ledger_amount).where(
        c.run_id.in_(run_ids), c.currency == currency
    )
    if clients is not None:
        query = query.where(c.client.in_(clients))
    with connected(bind) as connection:
        frame = result_frame(
            connection.execute(query), ["run_id", "client", "amount", "ledger_amount"]
        )
    return frame


def rates_stale(connection: Connection, run_id: str) -> bool:
    """Whether rates were loaded after ``run_id`` converted (a run with no conversion never
    is: rates do not touch the ledger)."""
    recorded = run_conversions(connection, run_id)
    if not recorded:
        return False
    newest = connection.execute(select(func.max(table(FxLoad).c.id))).scalar()
    return any((newest or 0) > (c.fx_load_id or 0) for c in recorded.values())


def rates_changed(connection: Connection, before: str | None, after: str) -> list[str]:
    """The currencies whose rates (or policy, or source) differ between run ``before`` and
    run ``after``: a restatement of ``before``'s revision by ``after`` says so."""
    if before is None:
        return []
    old, new = run_conversions(connection, before), run_conversions(connection, after)

    def used(c: StoredConversion) -> Any:
        return (c.document.get("policy"), c.document.get("rates"), c.document.get("periods"))

    return sorted(code for code in set(old) & set(new) if used(old[code]) != used(new[code]))


def converted_month_costs(
    connection: Connection, run_id: str, currency: str, ledger: MonthCosts
) -> MonthCosts | None:
    """``ledger`` (the economics' view of the stored run, :func:`tenantcost.economics.month_costs`)
    in ``currency`` as the run converted it: each client's total, each keyed line (its
    measure unchanged) and the residual left after distribution (the converted cascade's
    idle, overhead and reserve lines). None when the run has no such conversion, or was
    recorded before its lines were kept."""
    from dataclasses import replace

    from tenantcost.kinds import KEYED_KINDS, RESIDUAL_CLASSES

    recorded = run_conversions(connection, run_id).get(currency)
    f = table(RunFxLine).c
    lines = result_frame(
        connection.execute(
            select(f.client, f.kind, f.source, f.key, f.amount).where(
                f.run_id == run_id, f.currency == currency
            )
        ),
        ["client", "kind", "source", "key", "amount"],
    )
    if recorded is None or (lines.empty and not ledger.costs.empty):
        return None
    totals = lines.groupby("client", sort=True)["amount"].sum()
    costs = ledger.costs.assign(cost=ledger.costs["client"].map(totals).fillna(0).astype("int64"))
    keyed = lines.loc[lines["kind"].isin([str(k) for k in KEYED_KINDS])]
    sums = keyed.groupby(["client", "kind", "source", "key"], sort=True)["amount"].sum()
    grouped = ledger.lines.drop(columns="amount").merge(
        sums.rename("amount").reset_index(), on=["client", "kind", "source", "key"], how="left"
    )
    grouped["amount"] = grouped["amount"].fillna(0).astype("int64")
    residual = sum(int(line[3]) for line in recorded.cascade
                   if str(line[0]) in {str(c) for c in RESIDUAL_CLASSES})  # fmt: skip
    return replace(ledger, currency=currency, costs=costs, lines=grouped, residual=residual)
