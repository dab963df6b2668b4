"""A run's report figures in SQL: written with the run, read back to render its sheets.

A statement is rendered from what was recorded when its run ran, never from the store's
current inputs: after a reopen and a correction, revision 1's sheet must read exactly as it
was issued. So ``run`` records, beside its per-client totals, everything the report pack takes
from an allocation and its inputs: the allocation's own tables at period level per rule
version (lines, residual, exclusions, unclassified; the pool client counts; the unattributed
part of each pool per window, whose windows the confidence grades count) and the pack's
figures (:class:`~tenantcost.report.pack.PackFigures`: the clients' totals under every
alternative key and in each change notice, the usage's no-client shares, the services each
client used, the hours no usage row covers). Per-window usage stays in Parquet.

Every table is written with one bulk insert and read with one query; frames are built column
by column, never row by row. The format of each table lives here, writer and reader side by
side, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Connection, insert, select

from tenantcost.collect import CostInput
from tenantcost.config.rules import RuleSet, parse_rules
from tenantcost.errors import InputError
from tenantcost.inputs import Inputs
from tenantcost.kinds import Detail
from tenantcost.report.changes import Column, RuleChange
from tenantcost.report.confidence import UsageFigures
from tenantcost.report.pack import PackFigures, pack_figures
from tenantcost.result import AllocationResult
from tenantcost.split import DAY_LINE_COLUMNS, connect
from tenantcost.store.billing import stored_billing_run
from tenantcost.store.connection import result_frame
from tenantcost.store.data import Store
from tenantcost.store.models import (
    Run,
    RunClientFigure,
    RunClientService,
    RunFx,
    RunFxDay,
    RunFxLine,
    RunFxUnattributed,
    RunFxWorkload,
    RunInput,
    RunLine,
    RunPack,
    RunPool,
    RunReport,
    RunUnattributed,
    RunWorkload,
    StoreModel,
    table,
    utcnow,
)
from tenantcost.store.month_inputs import StoredRules, month_inputs
from tenantcost.tables import (
    ITEM_COLUMNS,
    PERIOD_LINE_COLUMNS,
    PERIOD_LINE_DTYPES,
    UNATTRIBUTED_COLUMNS,
    UNATTRIBUTED_DTYPES,
)
from tenantcost.windows import Period


class Frame(StrEnum):
    """The allocation tables kept per workload in ``run_workload``."""

    RESIDUAL = "residual"
    EXCLUSIONS = "exclusions"
    UNCLASSIFIED = "unclassified"


KEY_FIGURE = "key:"
CHANGE_FIGURE = "change:"
WORKLOAD_KEYS = ["rule_id", "class", "name", "reason"]
POOL_KEYS = ["rule_id", "kind", "source", "key"]


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Plain Python values (NaN as NULL) for one bulk insert."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def _insert(connection: Connection, model: type[StoreModel], frame: pd.DataFrame) -> None:
    if not frame.empty:
        connection.execute(insert(table(model)), _rows(frame))


def _client_figures(figures: PackFigures) -> pd.DataFrame:
    """Long ``figure, client, amount`` rows of the key amounts and the change notices."""
    amounts = figures.amounts.rename_axis("client").reset_index()
    keyed = amounts.melt(id_vars="client", var_name="figure", value_name="amount")
    parts = [keyed.assign(figure=KEY_FIGURE + keyed["figure"].astype(str))]
    for i, change in enumerate(figures.changes):  # a few notices of a few columns each
        for j, column in enumerate(change.columns):
            if column.amounts is not None:
                part = column.amounts.rename("amount").rename_axis("client").reset_index()
                parts.append(part.assign(figure=f"{CHANGE_FIGURE}{i}:{j}"))
    frame = pd.concat(parts, ignore_index=True)
    return frame.astype({"client": str, "figure": str, "amount": "int64"})


def _changes_json(changes: list[RuleChange]) -> str:
    return json.dumps(
        [
            {"kind": c.kind, "title": c.title, "text": c.text,
             "columns": [{"label": k.label, "reason": k.reason, "computed": k.amounts is not None}
                         for k in c.columns]}
            for c in changes
        ]
    )  # fmt: skip


def workload_sums(result: AllocationResult, values: tuple[str, ...] = ("amount",)) -> pd.DataFrame:
    """Residual, exclusions and unclassified cost summed over the period per workload (the
    ``values`` columns: a converted result's ``ledger_amount`` too, :mod:`.run_fx`)."""
    parts = []
    for frame in Frame:
        items = getattr(result, frame.value)
        items = items[[*ITEM_COLUMNS, *values[1:]]].astype({"reason": object})
        items = items.assign(reason=items["reason"].fillna("")).astype(dict.fromkeys(
            WORKLOAD_KEYS, str))  # fmt: skip
        summed = items.groupby(WORKLOAD_KEYS, sort=True, observed=True)[list(values)].sum()
        parts.append(summed.reset_index().assign(frame=frame.value))
    return pd.concat(parts, ignore_index=True)


def record_run_tables(
    connection: Connection, run_id: str, result: AllocationResult, rules: StoredRules
) -> None:
    """Write what ``run`` keeps for its sheets beside its lines (inside the run's
    transaction): totals, hours, rule set, pools, unattributed per window, workloads."""
    connection.execute(insert(table(RunReport)), [{
        "run_id": run_id, "cost_total": result.cost_total,
        "external_total": result.external_total, "windows": result.windows,
        "hours": result.hours, "rules": json.dumps(rules.document, default=str),
        "rules_origin": rules.origin,
    }])  # fmt: skip
    pools = result.pool_clients
    if not pools.empty:
        pools = pools[[*POOL_KEYS, "min_clients"]].astype(dict.fromkeys(POOL_KEYS, str))
        _insert(connection, RunPool, pools.assign(run_id=run_id))
    unattributed = result.unattributed[UNATTRIBUTED_COLUMNS]
    _insert(connection, RunUnattributed, unattributed.assign(run_id=run_id))
    _insert(connection, RunWorkload, workload_sums(result).assign(run_id=run_id))


def record_converted_tables(
    connection: Connection, run_id: str, converted: AllocationResult
) -> None:
    """Write what a conversion of the run keeps beside its lines and client totals (inside
    the run's transaction, :func:`tenantcost.store.run_fx.record_conversions`): its workloads
    and unattributed windows at the ledger tables' grain, each beside its ledger amount."""
    currency = converted.currency
    unattributed = converted.unattributed[[*UNATTRIBUTED_COLUMNS, "ledger_amount"]]
    _insert(connection, RunFxUnattributed, unattributed.assign(run_id=run_id, currency=currency))
    workloads = workload_sums(converted, ("amount", "ledger_amount"))
    _insert(connection, RunFxWorkload, workloads.assign(run_id=run_id, currency=currency))


def record_client_days(connection: Connection, run_id: str, ledger: AllocationResult) -> None:
    """Each client's ledger amount per UTC day (``run_fx_day``), for a run converted under
    the daily policy: the day lines summed per client and day, in SQL-sized bulk."""
    days = ledger.line_days
    if days is None or days.empty:
        return
    frame = days.assign(client=days["client"].astype(str), day=pd.to_datetime(days["day"]))
    sums = frame.groupby(["client", "day"], sort=True)["amount"].sum().reset_index()
    pairs = '"' + sums["day"].dt.strftime("%Y-%m-%d") + '":' + sums["amount"].astype(str)
    joined = pairs.groupby(sums["client"], sort=True).agg(",".join)  # one string per client
    rows = pd.DataFrame({"run_id": run_id, "client": joined.index, "days": "{" + joined + "}"})
    _insert(connection, RunFxDay, rows.reset_index(drop=True))


def record_pack_figures(connection: Connection, run_id: str, figures: PackFigures) -> None:
    """Write a run's pack figures (``close``, inside its transaction)."""
    usage = figures.usage
    no_client = [[s, k, float(v)] for (s, k), v in usage.no_client.items()]
    connection.execute(insert(table(RunPack)), [{
        "run_id": run_id, "keys": json.dumps(figures.keys),
        "changes": _changes_json(figures.changes), "no_client": json.dumps(no_client),
        "uncovered_hours": json.dumps([[s, float(h)] for s, h in usage.uncovered_hours.items()]),
        "other_clients": json.dumps(figures.other_clients), "recorded_at": utcnow(),
    }])  # fmt: skip
    _insert(connection, RunClientFigure, _client_figures(figures).assign(run_id=run_id))
    used = pd.Series(usage.used, dtype=object).explode().dropna()
    services = pd.DataFrame({"client": used.index.astype(str), "service": used.astype(str)})
    _insert(connection, RunClientService, services.assign(run_id=run_id))


@dataclass(frozen=True)
class StoredResult:
    """A recorded run read back: its allocation at period level, as the report reads it, and
    the rule set it ran with."""

    run_id: str
    month: str
    result: AllocationResult
    ruleset: RuleSet
    rules_origin: str


def _frame(connection: Connection, model: type[StoreModel], run_id: str) -> pd.DataFrame:
    t = table(model)
    result = connection.execute(select(t).where(t.c.run_id == run_id))
    return result_frame(result)


def _period_lines(lines: pd.DataFrame, period: Period) -> pd.DataFrame:
    """``run_line`` rows as the fold's period lines (sorted as the fold sorts them)."""
    lines = lines.assign(window_start=period.start, window_end=period.end)
    lines = lines[PERIOD_LINE_COLUMNS].astype(PERIOD_LINE_DTYPES)
    lines = lines.sort_values(["rule_id", "client", "source", "kind", "key"], kind="mergesort")
    return lines.sort_values(["client", "kind", "source"], kind="mergesort").reset_index(drop=True)


def _items(
    workloads: pd.DataFrame, frame: Frame, period: Period, extra: tuple[str, ...] = ()
) -> pd.DataFrame:
    """One result table's rows of ``run_workload`` (``extra``: more columns kept beside, a
    conversion's ``ledger_amount``)."""
    rows = workloads[workloads["frame"] == frame.value]
    rows = rows.assign(window_start=period.start, window_end=period.end)
    return (
        rows[[*ITEM_COLUMNS, *extra]]
        .astype({**dict.fromkeys(WORKLOAD_KEYS, "str"), **dict.fromkeys(
            ("amount", *extra), "int64")})
        .reset_index(drop=True)
    )  # fmt: skip


def _unattributed(rows: pd.DataFrame, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """``run_unattributed`` rows as the result's table, sorted (``extra``: more int64
    columns kept with their rows, a conversion's ``ledger_amount``)."""
    for column in ("window_start", "window_end"):
        rows[column] = pd.to_datetime(rows[column], utc=True)
    return (
        rows[[*UNATTRIBUTED_COLUMNS, *extra]]
        .astype({**UNATTRIBUTED_DTYPES, **dict.fromkeys(extra, "int64")})
        .sort_values(["window_start", "source", "cause"], kind="mergesort")
        .reset_index(drop=True)
    )  # fmt: skip


def load_pack_figures(connection: Connection, run_id: str) -> PackFigures | None:
    """A run's pack figures, or ``None`` when no close recorded them (a run not issued)."""
    pack = connection.execute(
        select(table(RunPack)).where(table(RunPack).c.run_id == run_id)
    ).first()
    if pack is None:
        return None
    figures = _frame(connection, RunClientFigure, run_id)
    keys = json.loads(pack.keys)
    keyed = figures[figures["figure"].str.startswith(KEY_FIGURE)]
    amounts = keyed.assign(figure=keyed["figure"].str.slice(len(KEY_FIGURE))).pivot(
        index="client", columns="figure", values="amount"
    )
    amounts = amounts.reindex(columns=["rule", *keys]).fillna(0).astype("int64").sort_index()
    amounts.index = amounts.index.astype(str)
    amounts.columns.name = None
    changes = [
        RuleChange(change["kind"], change["title"], change["text"], _columns(figures, i, change))
        for i, change in enumerate(json.loads(pack.changes))
    ]  # a few notices
    no_client = json.loads(pack.no_client)
    index = pd.MultiIndex.from_tuples([(s, k) for s, k, _ in no_client], names=["service", "key"])
    used = _frame(connection, RunClientService, run_id).sort_values(
        ["client", "service"], kind="mergesort"
    )  # code point order, as DuckDB sorted them
    uncovered = json.loads(pack.uncovered_hours)
    usage = UsageFigures(
        pd.Series([v for _, _, v in no_client], index=index, dtype="float64"),
        _services_by_client(used),
        pd.Series([h for _, h in uncovered], index=[s for s, _ in uncovered], dtype="float64"),
    )
    return PackFigures(keys, amounts, changes, usage, json.loads(pack.other_clients))


def _services_by_client(used: pd.DataFrame) -> dict[str, list[str]]:
    """Each client's services from ``client, service`` rows sorted by client: cut at the
    client changes with numpy (a pandas group per client took seconds at 10,000 clients)."""
    import numpy as np

    clients = used["client"].astype(str).to_numpy(dtype=object)
    services = used["service"].astype(str).to_numpy(dtype=object)
    if not len(clients):
        return {}
    starts = np.flatnonzero(np.r_[True, clients[1:] != clients[:-1]])
    groups = np.split(services, starts[1:])
    return dict(zip(clients[starts].tolist(), (g.tolist() for g in groups), strict=True))


def _columns(figures: pd.DataFrame, i: int, change: dict[str, Any]) -> list[Column]:
    """The columns of change notice ``i``, with their per-client amounts."""
    columns = []
    for j, column in enumerate(change["columns"]):
        part = figures[figures["figure"] == f"{CHANGE_FIGURE}{i}:{j}"]
        series = part.set_index("client")["amount"].astype("int64").rename("amount")
        amounts = series if column["computed"] else None
        columns.append(Column(column["label"], amounts, column["reason"]))
    return columns


def load_run(connection: Connection, run_id: str) -> StoredResult:
    """A recorded run's allocation at period level and its rule set; a run recorded before
    the store kept them (schema 0006 and older) is one ``error:`` line: run the month again."""
    run = connection.execute(select(table(Run)).where(table(Run).c.id == run_id)).first()
    if run is None:
        raise InputError(f"--run: no run '{run_id}' in the store")
    report = connection.execute(
        select(table(RunReport)).where(table(RunReport).c.run_id == run_id)
    ).first()
    if report is None:
        raise InputError(
            f"run {run_id} was recorded without its report tables (an older tenantcost): "
            f"run `tenantcost run --month {run.month}` again to render it"
        )
    ruleset = parse_rules(json.loads(report.rules), origin=report.rules_origin)
    period = Period(pd.Timestamp(run.period_start), pd.Timestamp(run.period_end))
    in_force = json.loads(run.rule_ids)
    workloads = _frame(connection, RunWorkload, run_id)
    pools = _frame(connection, RunPool, run_id)
    result = AllocationResult(
        currency=run.currency, period=period,
        rules=[v for v in ruleset.rules if v.id in in_force], key_override=run.key_override,
        reference_total=run.reference_total, cost_total=report.cost_total,
        external_total=report.external_total,
        lines=_period_lines(_frame(connection, RunLine, run_id), period),
        unattributed=_unattributed(_frame(connection, RunUnattributed, run_id)),
        residual=_items(workloads, Frame.RESIDUAL, period),
        exclusions=_items(workloads, Frame.EXCLUSIONS, period),
        unclassified=_items(workloads, Frame.UNCLASSIFIED, period),
        windows=int(report.windows), hours=float(report.hours), detail=Detail.PERIOD,
        pool_clients=pools[[*POOL_KEYS, "min_clients"]].astype(
            {**dict.fromkeys(POOL_KEYS, "str"), "min_clients": "int64"}),
        # a run on billing data: its recorded invoice cascade; billed pools are the rest
        # of the reference total beyond the cost rows and the external costs
        billed_pool_total=int(run.reference_total) - int(report.cost_total)
        - int(report.external_total),
        invoice=json.loads(run.invoice) if run.invoice else None,
    )  # fmt: skip
    return StoredResult(run_id, str(run.month), result, ruleset, report.rules_origin)


def _converted_frame(
    connection: Connection, model: type[StoreModel], run_id: str, currency: str
) -> pd.DataFrame:
    t = table(model)
    rows = connection.execute(select(t).where(t.c.run_id == run_id, t.c.currency == currency))
    return result_frame(rows)


LINE_KEYS = ["client", "rule_id", "source", "kind", "key"]


def load_converted(connection: Connection, stored: StoredResult, currency: str) -> AllocationResult:
    """The run of ``stored`` in ``currency`` as its conversion split it when it ran (frozen by
    the close that issued it): every line, workload and unattributed window converted, each
    beside its ``ledger_amount``, the cascade's totals, ``fx`` and ``ledger`` set, as
    :func:`tenantcost.convert.convert_result` gives from the files. A run without that
    conversion, or recorded before the store kept a conversion's workloads (0032), is one
    ``error:`` line."""
    from tenantcost.convert import reference_parts

    ledger, run_id = stored.result, stored.run_id
    fx = table(RunFx).c
    found = {
        str(c): (int(total), json.loads(document))
        for c, total, document in connection.execute(
            select(fx.currency, fx.reference_total, fx.document).where(fx.run_id == run_id)
        ).all()
    }  # the run's conversions, by currency (a few)
    if currency not in found:
        raise InputError(
            f"run {run_id} of {stored.month} was not converted into {currency} (its "
            f"conversions: {', '.join(sorted(found)) or 'none'}): a run converts into "
            "presentation: and the catalog's client currencies",
            where="--currency",
        )
    workloads = _converted_frame(connection, RunFxWorkload, run_id, currency)
    ledger_items = [ledger.residual, ledger.exclusions, ledger.unclassified]
    if workloads.empty and any(not f.empty for f in ledger_items):
        raise InputError(
            f"run {run_id} of {stored.month} was recorded before the store kept its "
            f"conversions whole: run `tenantcost run --month {stored.month}` again (a closed "
            "month: reopen it) to render it in another currency",
            where="--currency",
        )
    lines = _converted_lines(ledger.lines, _converted_frame(connection, RunFxLine, run_id,
                                                           currency))  # fmt: skip
    workloads = workloads.rename(columns={"class_": "class"})
    period = ledger.period
    kept = ("ledger_amount",)  # each row's ledger amount travels with it through the sort
    items = {f: _items(workloads, f, period, kept) for f in Frame}
    unattributed = _unattributed(
        _converted_frame(connection, RunFxUnattributed, run_id, currency), kept
    )
    reference_total, document = found[currency]
    parts = reference_parts(ledger, reference_total)
    if document.get("policy") == "daily":
        ledger = replace(ledger, line_days=_client_days(connection, run_id))
    return replace(
        ledger,
        currency=currency,
        reference_total=reference_total,
        cost_total=parts["cost"],
        external_total=parts["external"],
        billed_pool_total=parts["billed"],
        lines=lines,
        unattributed=unattributed,
        residual=items[Frame.RESIDUAL],
        exclusions=items[Frame.EXCLUSIONS],
        unclassified=items[Frame.UNCLASSIFIED],
        fx=document,
        ledger=ledger,
    )


def _client_days(connection: Connection, run_id: str) -> pd.DataFrame:
    """``run_fx_day`` as day lines of one line per client and day (the day's sum over the
    client's lines: the key columns empty), what a converted sheet lists per day."""
    rows = _frame(connection, RunFxDay, run_id)
    if rows.empty:
        return pd.DataFrame({c: pd.Series(dtype="str") for c in DAY_LINE_COLUMNS}).astype(
            {"day": "datetime64[ns]", "amount": "int64"}
        )
    wide = pd.DataFrame(rows["days"].map(json.loads).tolist(), index=rows["client"].astype(str))
    long = wide.stack().reset_index()  # a client without an amount on a day has no row
    long.columns = pd.Index(["client", "day", "amount"])
    days = long.assign(rule_id="", source="", kind="", key="", day=pd.to_datetime(long["day"]))
    return days[DAY_LINE_COLUMNS].astype({"client": str, "amount": "int64"})


def _converted_lines(lines: pd.DataFrame, converted: pd.DataFrame) -> pd.DataFrame:
    """The ledger's period lines with their converted ``amount`` and ``ledger_amount``."""
    keys = lines[LINE_KEYS].astype(object).where(lines[LINE_KEYS].notna(), "").astype(str)
    index = pd.MultiIndex.from_frame(keys)
    by_key = converted.assign(key=converted["key"].fillna("")).set_index(LINE_KEYS)["amount"]
    amounts = by_key.reindex(index)
    if amounts.isna().any():
        raise InputError(
            "a converted run lacks some of its lines: run the month again", where="--currency"
        )  # pragma: no cover - written in one transaction
    return lines.assign(amount=amounts.astype("int64").to_numpy(),
                        ledger_amount=lines["amount"].astype("int64"))  # fmt: skip


def load_run_figures(connection: Connection, run_id: str) -> StoredResult:
    """:func:`load_run` under the name other modules first used (``cli/economics.py``)."""
    return load_run(connection, run_id)


def _run_batches(connection: Connection, run_id: str) -> pd.DataFrame:
    i = table(RunInput).c
    rows = connection.execute(
        select(i.batch_id, i.kind, i.sha256).where(i.run_id == run_id).order_by(i.batch_id)
    ).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=["batch_id", "kind", "sha256"])


def _check_inputs(connection: Connection, stored: StoredResult, action: str) -> None:
    """Refuse unless the store's inputs of the run's month are still those the run read."""
    now = month_inputs(connection, stored.result.period)
    if not now.astype(str).equals(_run_batches(connection, stored.run_id).astype(str)):
        raise InputError(
            f"the inputs of {stored.month} changed since run {stored.run_id}: {action}"
        )


def inputs_unchanged(connection: Connection, stored: StoredResult) -> bool:
    """Whether the store's inputs of the run's month are still those the run read (what a
    restatement from them needs: :mod:`tenantcost.store.month_bridge`)."""
    try:
        _check_inputs(connection, stored, "")
    except InputError:
        return False
    return True


@dataclass(frozen=True)
class PendingFigures:
    """A run's pack figures computed from its inputs, to record in a write transaction."""

    stored: StoredResult
    figures: PackFigures

    def record(self, connection: Connection) -> None:
        """Record them, unless another process did; refused if the month's inputs changed
        while they were computed (they would not be the run's)."""
        if load_pack_exists(connection, self.stored.run_id):
            return
        _check_inputs(connection, self.stored, "run the command again")
        record_pack_figures(connection, self.stored.run_id, self.figures)


def load_pack_exists(connection: Connection, run_id: str) -> bool:
    t = table(RunPack)
    return connection.execute(select(t.c.run_id).where(t.c.run_id == run_id)).first() is not None


def compute_pack_figures(store: Store, stored: StoredResult) -> PackFigures:
    """The pack figures of a stored run, from the store's inputs of its month, which must be
    the run's own (checked): the same re-runs and usage aggregates ``report`` computes from
    files, so a pack from the store equals the pack from the files."""
    from tenantcost.store.stored import stored_costs, stored_usage

    with store.engine.connect() as connection:
        _check_inputs(connection, stored, f"run `tenantcost run --month {stored.month}` again")
    period = stored.result.period
    con = connect()
    costs, usage = stored_costs(store, period), stored_usage(store, period, con)
    # the run's billing side again (its inputs are unchanged: checked above); estimates are
    # allowed, which changes nothing for a run that had none
    billing = stored_billing_run(store, period, con, stored.ruleset, costs, allow_unbilled=True)
    inputs = Inputs(Path(stored.rules_origin), stored.ruleset, CostInput(costs, []), usage, [],
                    con, billing)  # fmt: skip
    return pack_figures(inputs, stored.result)


def pending_figures(store: Store, run_id: str) -> PendingFigures | None:
    """For ``close``: ``None`` when the run's pack figures are recorded; else computed now
    (slow: a re-run per alternative key; call it outside the write lock), to
    :meth:`PendingFigures.record` in the close's transaction."""
    with store.engine.connect() as connection:
        if load_pack_exists(connection, run_id):
            return None
        stored = load_run(connection, run_id)
    return PendingFigures(stored, compute_pack_figures(store, stored))


__all__ = [
    "Frame",
    "PendingFigures",
    "StoredResult",
    "compute_pack_figures",
    "inputs_unchanged",
    "load_pack_figures",
    "load_run",
    "load_run_figures",
    "pending_figures",
    "record_pack_figures",
    "record_run_tables",
]
