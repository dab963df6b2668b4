"""Each client's month-over-month bridge from the store: against the previous month as issued.

An account manager asks "why do we pay more this month?". The answer is ``explain``'s bridge
(:mod:`tenantcost.bridge`: volume, rate, rule, residual, direct, new_source, ended_source,
parts that add up exactly to the change), computed here from two *recorded* runs, never from
the store's current inputs: the month's run (the issued revision shown, or a draft) and the
run of the previous calendar month's **latest issued revision**. A month whose previous
month was never closed has no bridge; neither has a client without a figure in both runs.

**Cached per pair of runs.** Every client of the month is bridged at once (vectorised, the
same code as the report pack's :func:`tenantcost.report.changes.bridges_between`) the first
time any reader asks, and written to ``month_bridge``/``month_bridge_client``/
``month_bridge_part`` keyed by (run, previous run). Which previous run applies is read at
each request (one indexed query), so when the previous month is reopened, corrected and
closed again, its new revision is another pair: the bridge follows with no invalidation, and
the old pair stays as it was (what an earlier sheet said). Two processes computing the same
pair race on the unique key; the loser reads the winner's rows.

**A rule change between the runs** is restated from the store's inputs of each month, as
``explain --from-db`` does, but only while those are still the runs' own inputs (checked;
otherwise, or without a data folder, the runs are bridged as recorded: a source whose keys
differ is then ``rule`` whole, and the parts still add up exactly). ``restated`` records which.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
from sqlalchemy import Connection, Engine, insert, select
from sqlalchemy.exc import IntegrityError

from tenantcost.bridge import Restate, signed_amounts
from tenantcost.report.changes import PackBridges, bridges_between, client_spans, quiet_allocate
from tenantcost.result import AllocationResult
from tenantcost.store.connection import connected
from tenantcost.store.cycle import latest_issued
from tenantcost.store.data import DataDir, Store
from tenantcost.store.models import (
    MonthBridge,
    MonthBridgeClient,
    MonthBridgePart,
    Run,
    table,
)
from tenantcost.store.report_figures import StoredResult, inputs_unchanged, load_run
from tenantcost.windows import Period

INT64 = 2**63 - 1
PART_FIELDS = ["client", "effect", "source", "key", "amount", "reason"]


@dataclass(frozen=True)
class Previous:
    """The previous month's latest issued revision: what a bridge compares with."""

    month: str
    revision: int
    run_id: str


def previous_month(month: str) -> str:
    """``2026-10`` → ``2026-09``."""
    return (pd.Period(month, freq="M") - 1).strftime("%Y-%m")


def previous_issued(bind: Connection | Engine, month: str) -> Previous | None:
    """The latest issued revision of the month before ``month`` (``None``: never closed)."""
    before = previous_month(month)
    issued = latest_issued(bind, before)
    return None if issued is None else Previous(before, int(issued.revision), issued.run_id)


@dataclass(frozen=True)
class ClientBridge:
    """One client's bridge as the API and the pages read it (micro-units)."""

    previous: Previous
    previous_amount: int
    amount: int
    parts: pd.DataFrame
    """``effect, source, key, amount, reason`` in canonical order."""

    @property
    def difference(self) -> int:
        return self.amount - self.previous_amount


def _bridge_id(connection: Connection, run_id: str, previous: Previous) -> int | None:
    b = table(MonthBridge).c
    found = connection.execute(
        select(b.id).where(b.run_id == run_id, b.previous_run_id == previous.run_id)
    ).scalar()
    return None if found is None else int(found)


def ensure_bridge(
    engine: Engine, run_id: str, previous: Previous, data: DataDir | None = None
) -> int | None:
    """The id of the cached bridge of ``run_id`` against ``previous``, computed and written
    first when no reader asked yet; ``None`` when it cannot be stored (a part beyond 64 bits:
    :func:`compute_bridge` then gives it on each read)."""
    with engine.connect() as connection:
        found = _bridge_id(connection, run_id, previous)
    if found is not None:
        return found
    computed, restated = compute_bridge(engine, run_id, previous, data)
    try:
        with engine.begin() as connection:
            return _write(connection, run_id, previous, computed, restated)
    except IntegrityError:  # another process wrote the same pair meanwhile: read its rows
        with engine.connect() as connection:
            return _bridge_id(connection, run_id, previous)


def compute_bridge(
    engine: Engine, run_id: str, previous: Previous, data: DataDir | None = None
) -> tuple[PackBridges | None, bool]:
    """Every client's bridge of ``run_id`` against ``previous`` from the two recorded runs,
    and whether a rule change between them was restated."""
    with engine.connect() as connection:
        early, late = load_run(connection, previous.run_id), load_run(connection, run_id)
        restate = _restate(connection, engine, early, late, data)
    pb = bridges_between(early.result, late.result, late.ruleset, restate, previous.revision)
    return pb, restate is not None


def _restate(
    connection: Connection,
    engine: Engine,
    early: StoredResult,
    late: StoredResult,
    data: DataDir | None,
) -> Restate | None:
    """A restatement from the store's inputs, when the rules differ, every rule version is
    known to the later run's rule set, and both months' inputs are still the runs' own."""
    ids = {r.id for r in early.result.rules} | {r.id for r in late.result.rules}
    if early.result.rules == late.result.rules or data is None:
        return None
    known = {v.id for v in late.ruleset.rules}
    if not ids <= known or not all(inputs_unchanged(connection, s) for s in (early, late)):
        return None
    from tenantcost.collect import CostInput
    from tenantcost.inputs import Inputs
    from tenantcost.split import connect
    from tenantcost.store.stored import stored_costs, stored_usage

    store = Store(engine, data)

    def restate(rules: object, period: Period) -> AllocationResult:
        con = connect()
        costs, usage = stored_costs(store, period), stored_usage(store, period, con)
        inputs = Inputs(Path(late.rules_origin), late.ruleset, CostInput(costs, []), usage, [],
                        con)  # fmt: skip
        return quiet_allocate(inputs, rules, period)  # type: ignore[arg-type]

    return restate


def _fits(pb: PackBridges | None) -> bool:
    if pb is None or pb.parts.empty:
        return True
    return bool((pb.parts["amount"].astype(object).abs() <= INT64).all())


def _write(
    connection: Connection,
    run_id: str,
    previous: Previous,
    pb: PackBridges | None,
    restated: bool,
) -> int | None:
    """One header row and two bulk inserts (``None`` when a part does not fit 64 bits)."""
    if not _fits(pb):
        return None
    month = connection.execute(select(table(Run).c.month).where(table(Run).c.id == run_id))
    header = {"month": month.scalar_one(), "run_id": run_id, "previous_month": previous.month,
              "previous_run_id": previous.run_id, "restated": restated}  # fmt: skip
    written = connection.execute(insert(table(MonthBridge)).values(**header))
    bridge_id = int(written.inserted_primary_key[0])  # type: ignore[index]
    if pb is None:
        return bridge_id
    amounts = pb.amounts.rename_axis("client").reset_index()
    clients = pd.DataFrame({
        "bridge_id": bridge_id, "client": amounts["client"].astype(str),
        "previous_amount": amounts["early"].astype("int64"),
        "amount": amounts["late"].astype("int64"),
    })  # fmt: skip
    parts = (
        pb.parts[PART_FIELDS]
        .astype({"amount": "int64"})
        .assign(bridge_id=bridge_id, position=range(len(pb.parts)))
    )
    for model, frame in ((MonthBridgeClient, clients), (MonthBridgePart, parts)):
        if not frame.empty:
            connection.execute(insert(table(model)), frame.astype(object).to_dict("records"))
    return bridge_id


def _parts(connection: Connection, bridge_id: int, client: str | None) -> pd.DataFrame:
    p = table(MonthBridgePart).c
    query = select(*(p[c] for c in PART_FIELDS)).where(p.bridge_id == bridge_id)
    if client is not None:
        query = query.where(p.client == client)
    rows = connection.execute(query.order_by(p.position)).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=PART_FIELDS)
    texts = dict.fromkeys(["client", "effect", "source", "key", "reason"], str)
    return frame.astype({"amount": "int64", **texts})


def _amounts(connection: Connection, bridge_id: int, client: str | None) -> pd.DataFrame:
    c = table(MonthBridgeClient).c
    query = select(c.client, c.previous_amount, c.amount).where(c.bridge_id == bridge_id)
    if client is not None:
        query = query.where(c.client == client)
    rows = connection.execute(query.order_by(c.client)).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=["client", "early", "late"])
    frame = frame.astype({"client": str, "early": "int64", "late": "int64"}).set_index("client")
    return frame.assign(change=frame["late"] - frame["early"])


def _one_client(
    engine: Engine, run_id: str, previous: Previous, client: str, data: DataDir | None
) -> PackBridges | None:
    with engine.connect() as connection:
        early, late = load_run(connection, previous.run_id), load_run(connection, run_id)
    if early.result.rules != late.result.rules:
        bridge_id = ensure_bridge(engine, run_id, previous, data)
        if bridge_id is None:
            return compute_bridge(engine, run_id, previous, data)[0]
        return month_bridges(engine, late.month, run_id, late.result.currency, data)

    def own(result: AllocationResult) -> AllocationResult:
        return replace(result, lines=result.lines.loc[result.lines["client"] == client])

    return bridges_between(own(early.result), own(late.result), late.ruleset, None,
                           previous.revision)  # fmt: skip


def month_bridges(
    engine: Engine, month: str, run_id: str, currency: str, data: DataDir | None = None
) -> PackBridges | None:
    """Every client's bridge of ``run_id`` (a run of ``month``) against the previous month's
    latest issued revision, as a report pack shows it (its sheets' "What changed" notice);
    ``None`` without an issued previous month or a client in both runs."""
    previous = previous_issued(engine, month)
    if previous is None:
        return None
    bridge_id = ensure_bridge(engine, run_id, previous, data)
    if bridge_id is None:
        return compute_bridge(engine, run_id, previous, data)[0]
    with connected(engine) as connection:
        amounts, parts = _amounts(connection, bridge_id, None), _parts(connection, bridge_id, None)
    if amounts.empty:
        return None
    parts["text"] = signed_amounts(parts["amount"], currency) + ": " + parts["reason"]
    spans = client_spans(parts["client"])
    return PackBridges(previous.month, month, currency, amounts, parts, spans, previous.revision)


def client_bridge(
    engine: Engine, month: str, run_id: str, client: str, data: DataDir | None = None
) -> ClientBridge | None:
    """``client``'s bridge of ``run_id`` against the previous month's latest issued revision
    (two indexed queries once cached); ``None`` without one. Not cached yet: the client's own
    bridge from its own lines (a bridge needs nothing else, so it equals its row of the
    month's), in milliseconds, unless a rule change needs the months restated: then the
    whole month's, cached."""
    previous = previous_issued(engine, month)
    if previous is None:
        return None
    with engine.connect() as connection:
        bridge_id = _bridge_id(connection, run_id, previous)
    if bridge_id is None:
        pb = _one_client(engine, run_id, previous, client, data)
        if pb is None or client not in pb.amounts.index:
            return None
        row, parts = pb.amounts.loc[client], pb.client_parts(client)
        early, late = int(row["early"]), int(row["late"])
    else:
        with connected(engine) as connection:
            amounts = _amounts(connection, bridge_id, client)
            if amounts.empty:
                return None
            parts = _parts(connection, bridge_id, client)
        early, late = int(amounts["early"].iloc[0]), int(amounts["late"].iloc[0])
    shown = parts[["effect", "source", "key", "amount", "reason"]].reset_index(drop=True)
    return ClientBridge(previous, early, late, shown)


def next_month(month: str) -> str:
    """``2026-09`` → ``2026-10``."""
    return (pd.Period(month, freq="M") + 1).strftime("%Y-%m")


def cache_after_close(engine: Engine, month: str, data: DataDir | None = None) -> int:
    """Compute and cache, once, the bridges a close of ``month`` makes readable: its issued
    run against the previous month, and the next month's issued run against this new
    revision (a restatement). Slow on 10,000 clients (the exact fractions of the engine),
    so ``close`` does it rather than the first reader of a sheet; returns how many pairs
    were there to cache."""
    pairs = 0
    for later in (month, next_month(month)):
        issued, previous = latest_issued(engine, later), previous_issued(engine, later)
        if issued is not None and previous is not None:
            ensure_bridge(engine, issued.run_id, previous, data)
            pairs += 1
    return pairs


def cache_after_run(engine: Engine, month: str, run_id: str, data: DataDir | None = None) -> bool:
    """Compute and cache the bridge of a new run of ``month`` against the previous month's
    issued revision: the draft's movers and What changed read it (finance, admin). The first
    reader of an open month computed it (7 s at 10,000 clients, and both workers at once);
    ``run`` does it instead. False: no previous month issued, nothing to cache."""
    previous = previous_issued(engine, month)
    if previous is None:
        return False
    ensure_bridge(engine, run_id, previous, data)
    return True


__all__ = [
    "ClientBridge",
    "Previous",
    "cache_after_close",
    "cache_after_run",
    "client_bridge",
    "compute_bridge",
    "ensure_bridge",
    "month_bridges",
    "previous_issued",
    "previous_month",
]
