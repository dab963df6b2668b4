"""The closed-period cycle: ``close`` issues a month's statements, ``reopen`` unlocks it.

A month's state is the action of its latest ``month_event`` (closed after a close; open
before any event and after a reopen), so the state and its whole history are one append-only
table and nothing issued is ever updated or deleted. The state and the writers' guard live in
:mod:`tenantcost.store.month_state` (re-exported here), which the writers import without this
module and its runs.

``close`` issues revision N+1 (1 at first) of every client's statement from a run of the
month on the current inputs: the latest recorded run when nothing it depends on changed
since (the month's committed batches and their sha256, the stored rule file, the rule
versions in force for the month, no ``--key`` override, the same tenantcost), else a new run.
Every client of the new run and of revision N gets a row; a client revision N had and the new
run no longer has gets amount 0, so each client's latest row is always the month's latest
revision and its difference says what was withdrawn. A close after a reopen that would change
no client's amount, no rule and not the month's completeness is refused
(:class:`NothingChanged`: "nothing changed since revision N") unless forced.

With billing data (the month closed on the cloud invoice), ``close`` also refuses a month its
billing data does not cover (:func:`tenantcost.store.status.billing_coverage`: an hour of the
month no stored billed usage line covers; checked when the month has billing data or the
stored rule file a ``billing:`` section, so a store without billing closes as before), unless
``--allow-incomplete``, which also lets the run keep OpenCost's estimate for cluster periods
not billed yet (marked in the invoice cascade). The revision's run carries the invoice
cascade (``run.invoice``).

Writers check a month's state inside their own write transaction
(:func:`~tenantcost.store.month_state.refuse_if_closed`,
:func:`~tenantcost.store.month_state.refuse_rule_version`), and close writes inside the same
lock, so a close and an ingest never race: whichever commits second sees the other's result.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import Connection, Engine, delete, func, insert, select

from tenantcost import __version__
from tenantcost.errors import InputError
from tenantcost.store.connection import connected, result_frame
from tenantcost.store.data import Store
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import (
    CatalogLoad,
    MonthEvent,
    RuleFile,
    RuleVersion,
    Run,
    RunClient,
    RunInput,
    SheetRender,
    SheetRenderJob,
    Statement,
    table,
    utcnow,
)
from tenantcost.store.month_inputs import latest_rule_document, month_inputs, presentation_of
from tenantcost.store.month_state import (
    FOREVER,
    MonthAction,
    MonthClosed,
    MonthState,
    closed_months,  # re-exported
    issued_revision,
    latest_event,
    month_state,
    refuse_if_closed,  # re-exported
    refuse_rule_version,  # re-exported
    stored_cycle_months,  # re-exported
)
from tenantcost.store.run_fx import rates_changed, rates_stale
from tenantcost.store.status import Missing, billing_coverage, missing_hours
from tenantcost.timefmt import iso_offset, utc
from tenantcost.windows import Period

CLOSE_ATTEMPTS = 3
"""How often a close moves to another process's run of the same inputs before giving up."""


class MonthNotClosed(InputError):
    """``reopen`` of a month that is not closed (exit 2)."""


class ClosedMeanwhile(MonthClosed):
    """``close`` of a month that was open when it began and that another process closed while
    it ran or waited for the lock: this close issued nothing (exit 2 like any refusal, so a
    script that sends statements after a close does not send them twice; 409 from the API)."""


class IncompleteMonth(InputError):
    """``close`` of a month with hours lacking costs or usage, without ``--allow-incomplete``."""


class UnbilledMonth(IncompleteMonth):
    """``close`` of a month its billing data does not cover, without ``--allow-incomplete``."""


class NothingChanged(InputError):
    """``close`` of a reopened month whose run changes nothing revision N issued: every
    client's amount, the rules in force and the month's completeness are revision N's. A
    revision that restates every client by 0 tells readers nothing and buries the one that
    matters, so it takes ``--force`` (exit 2 without; 409 from the API)."""

    def __init__(self, month: str, revision: int) -> None:
        super().__init__(
            f"nothing changed since revision {revision} of {month}: every client's amount and "
            f"the rules are revision {revision}'s; ingest or load the correction first, or "
            f'force the close (`close --force`, API "force": true) to issue revision '
            f"{revision + 1} anyway"
        )
        self.revision = revision


@dataclass(frozen=True)
class Closed:
    """What a close issued: ``statements`` has one row per client (``client, amount,
    previous_amount`` (nullable), ``difference``), by client, in micro-units."""

    month: str
    revision: int
    run_id: str
    reused_run: bool
    incomplete: bool
    detail: str | None
    reason: str | None
    issued_at: datetime
    currency: str
    statements: pd.DataFrame
    client_reason: str | None = None
    """What clients' readers are told instead of ``reason`` (None: the fixed note)."""
    rates_changed: list[str] = field(default_factory=list)
    """The currencies whose exchange rates differ from the restated revision's (its run's
    conversions, :func:`tenantcost.store.run_fx.rates_changed`)."""


@dataclass(frozen=True)
class Reopened:
    """A reopen: the revision it unlocked (the next close issues ``revision + 1``)."""

    month: str
    revision: int
    reason: str
    at: datetime
    actor: str
    client_reason: str | None = None


@dataclass(frozen=True)
class Issued:
    """A month's latest issued revision (it stays the latest issued while reopened)."""

    month: str
    revision: int
    run_id: str
    event_id: int
    issued_at: datetime
    issued_by: str
    reason: str | None
    incomplete: bool
    detail: str | None
    rule_ids: list[str]
    state: MonthState
    client_reason: str | None = None


def latest_issued(bind: Connection | Engine, month: str) -> Issued | None:
    """The month's latest issued revision and the run it was issued from (``None`` when the
    month was never closed). ``report --from-db`` renders this run's figures."""
    e = table(MonthEvent).c
    with connected(bind) as connection:
        row = connection.execute(
            select(table(MonthEvent), table(Run).c.rule_ids)
            .join(table(Run), table(Run).c.id == e.run_id)
            .where(e.month == month, e.action == MonthAction.CLOSE.value)
            .order_by(e.revision.desc())
            .limit(1)
        ).first()
        if row is None:
            return None
        state = month_state(connection, month)
    return Issued(month, row.revision, str(row.run_id), row.id, row.at, row.actor, row.reason,
                  bool(row.incomplete), row.detail, json.loads(row.rule_ids), state,
                  row.client_reason)  # fmt: skip


def statements(bind: Connection | Engine, month: str, revision: int | None = None) -> pd.DataFrame:
    """The statements of ``month`` at ``revision`` (default: the latest issued), by client:
    ``client, revision, amount, previous_amount, difference, currency, run_id, reason,
    incomplete, issued_at, issued_by, client_reason`` (amounts in micro-units;
    previous_amount nullable)."""
    s = table(Statement).c
    columns = ["client", "revision", "amount", "previous_amount", "difference", "currency",
               "run_id", "reason", "incomplete", "issued_at", "issued_by",
               "client_reason"]  # fmt: skip
    with connected(bind) as connection:
        wanted = revision if revision is not None else issued_revision(connection, month)
        result = connection.execute(
            select(*(s[c] for c in columns))
            .where(s.month == month, s.revision == wanted)
            .order_by(s.client)
        )
        frame = result_frame(result, columns)
    return frame.astype({"amount": "int64", "previous_amount": "Int64", "difference": "int64"})


def rules_in_force(connection: Connection, period: Period) -> list[str]:
    """The stored rule versions in force for some hour of ``period``, by effective date."""
    v = table(RuleVersion).c
    rows = connection.execute(select(v.rule_id, v.effective_from).order_by(v.effective_from))
    versions = result_frame(rows, ["rule_id", "effective_from"])
    if versions.empty:
        return []
    starts = pd.to_datetime(versions["effective_from"], utc=True)
    ends = starts.shift(-1).fillna(pd.Timestamp(FOREVER))
    return versions["rule_id"][(starts < period.end) & (ends > period.start)].tolist()


def _reusable(
    connection: Connection, run: dict[str, Any], period: Period, allow_estimates: bool = False
) -> bool:
    """True when ``run`` used exactly what a run now would: the month's committed batches with
    their sha256, the latest stored rule file, no key override, this tenantcost; and, unless
    ``allow_estimates`` (``close --allow-incomplete``), no OpenCost estimate for unbilled
    cluster periods (``run --allow-unbilled``).

    Any new rule version comes with a new ``rule_file`` row (the latest file then differs), so
    the file's sha256 covers the rules; the versions the run used must also still be in force
    (they always are, versions never change: a cheap guard). The run names only the versions
    its cost windows used, so equality with every version in force would refuse to reuse a
    run for a version in force over hours without costs, which changes nothing."""
    i = table(RunInput).c
    used = pd.DataFrame(
        connection.execute(
            select(i.batch_id, i.kind, i.sha256).where(i.run_id == run["id"]).order_by(i.batch_id)
        ).all(),
        columns=["batch_id", "kind", "sha256"],
    )
    now = month_inputs(connection, period)
    latest_file = connection.execute(
        select(table(RuleFile).c.sha256).order_by(table(RuleFile).c.id.desc()).limit(1)
    ).scalar()
    return (
        used.astype(str).equals(now.astype(str))
        and (allow_estimates or not _has_estimates(run))
        and run["rule_file_sha256"] == latest_file
        and set(json.loads(str(run["rule_ids"]))) <= set(rules_in_force(connection, period))
        and run["key_override"] is None
        and run["code_version"] == __version__
        and not rates_stale(connection, str(run["id"]))
        and _converts_all(connection, run)
    )


def _converts_all(connection: Connection, run: dict[str, Any]) -> bool:
    """Whether ``run`` converted into every currency a run now would: ``presentation:``
    (its rule file is the latest, or the run is not reused anyway) and the client currencies
    of the catalog it read: a catalog loaded since may give a client a new one. A currency
    the rates cannot reach is skipped by every run, so this asks which catalog the run read,
    not which conversions it holds (else no run of such a month could ever be issued)."""
    from tenantcost.store.catalog import catalog_currencies
    from tenantcost.store.run_fx import run_conversions

    shown = presentation_of(connection)
    if shown and shown != run["currency"] and shown not in run_conversions(connection, run["id"]):
        return False
    loaded = connection.execute(select(func.max(table(CatalogLoad).c.loaded_at))).scalar()
    others = catalog_currencies(connection) - {str(run["currency"])}
    return not others or loaded is None or utc(loaded) <= utc(run["started_at"])


def _has_estimates(run: dict[str, Any]) -> bool:
    """Whether the run kept OpenCost's estimate for some unbilled cluster period."""
    invoice = json.loads(run["invoice"]) if run.get("invoice") else None
    return invoice is not None and any(r["estimate"] for r in invoice["repricing"])


def _rules_have_billing(connection: Connection) -> bool:
    """Whether the latest stored rule file has a ``billing:`` section."""
    return latest_rule_document(connection).get("billing") is not None


def _billing_note(connection: Connection, month: str, allow_incomplete: bool) -> str | None:
    """Refuse a month its billing data does not cover (unless ``allow_incomplete``: then the
    note of what is not covered); ``None`` when covered or when billing is not in use."""
    coverage = billing_coverage(connection, month)
    if coverage.complete or not (coverage.stored or _rules_have_billing(connection)):
        return None
    if not allow_incomplete:
        raise UnbilledMonth(
            f"{month} is not covered by its billing data: {coverage.text()}; ingest the "
            f"billing export (`tenantcost ingest billing --billing PATH`), or pass "
            "--allow-incomplete to issue statements at OpenCost's estimate where nothing "
            "was billed yet"
        )
    return coverage.text()


def _latest_run(connection: Connection, month: str) -> dict[str, Any] | None:
    r = table(Run).c
    row = (
        connection.execute(
            select(table(Run)).where(r.month == month).order_by(r.started_at.desc()).limit(1)
        )
        .mappings()
        .first()
    )
    return dict(row) if row is not None else None


def _check_closable(connection: Connection, month: str, allow_incomplete: bool) -> str | None:
    """Refuse a closed or (without ``allow_incomplete``) incomplete month; returns the note of
    what is missing (``None`` when complete)."""
    event = latest_event(connection, month)
    if event is not None and event["action"] == MonthAction.CLOSE:
        raise MonthClosed(
            f"{month} is already closed (revision {event['revision']} issued "
            f"{iso_offset(event['at'])} by {event['actor']}): to issue revision "
            f"{event['revision'] + 1}, run `tenantcost reopen --month {month} --reason "
            "TEXT`, ingest the corrections, then close again"
        )
    missing = missing_hours(connection, month)
    if not missing.complete and not allow_incomplete:
        raise IncompleteMonth(
            f"{month} is incomplete: {missing.text()}; ingest the missing hours, or pass "
            "--allow-incomplete to issue statements that say the month is incomplete"
        )
    return _gaps_note(connection, month, missing, allow_incomplete)


def _gaps_note(
    connection: Connection, month: str, missing: Missing, allow_incomplete: bool
) -> str | None:
    """The statements' note of what the month lacks (hours, billing); ``None``: nothing."""
    notes = [missing.text()] if not missing.complete else []
    unbilled = _billing_note(connection, month, allow_incomplete)
    return "; ".join(notes + ([unbilled] if unbilled else [])) or None


def incomplete_note(bind: Connection | Engine, month: str) -> str | None:
    """What a close with ``--allow-incomplete`` would write on the statements (the hours
    lacking costs or usage, the billing not covered), or ``None`` for a complete month: the
    web form's confirmation step shows it before such a close is issued."""
    with connected(bind) as connection:
        return _gaps_note(connection, month, missing_hours(connection, month), True)


def _run_for_close(
    store: Store, month: str, actor: str, wait: float, allow_incomplete: bool = False
) -> tuple[str, bool]:
    """The run to issue from: the latest one when still current, else a new one (which,
    with ``allow_incomplete``, keeps OpenCost's estimate for cluster periods not billed)."""
    from tenantcost.store.runs import run_month

    period = Period.month(month)
    with store.engine.connect() as connection:
        latest = _latest_run(connection, month)
        if latest is not None and _reusable(connection, latest, period, allow_incomplete):
            return str(latest["id"]), True
    return run_month(store, month, key=None, actor=actor, wait=wait,
                     allow_unbilled=allow_incomplete).run_id, False  # fmt: skip


def close_month(
    store: Store,
    month: str,
    *,
    allow_incomplete: bool = False,
    actor: str,
    wait: float = 0.0,
    force: bool = False,
) -> Closed:
    """Issue the next revision of every client's statement for ``month`` and close it.

    Checks run twice: before the (possibly long) run, to fail fast, and again under the write
    lock with the run's inputs compared to the store's, so a concurrent ingest or rule load
    makes the close fail (run it again) rather than issue figures of stale inputs.

    Two closes of one month racing (``--wait``): each may record its own run, and the one that
    takes the lock first finds the other's run latest. That run is of the same inputs, so
    nothing changed: this close issues it instead (its figures computed again outside the
    lock), or finds the month closed by the other (:class:`ClosedMeanwhile`). Either way one
    revision is issued, and the other close says who issued it.

    Unless ``force``, a revision N+1 identical to revision N is refused under the lock
    (:class:`NothingChanged`), nothing written."""
    period = Period.month(month)
    with store.engine.connect() as connection:
        _check_closable(connection, month, allow_incomplete)
    run_id, reused = _run_for_close(store, month, actor, wait, allow_incomplete)
    from tenantcost.store.report_figures import pending_figures

    for _ in range(CLOSE_ATTEMPTS):
        pending = pending_figures(store, run_id)  # the sheets' figures; slow, so before the lock
        with write_transaction(store.engine, wait) as connection:
            _refuse_closed_meanwhile(connection, month)
            detail = _check_closable(connection, month, allow_incomplete)
            run = _latest_run(connection, month)
            current = run is not None and _reusable(connection, run, period, allow_incomplete)
            if run is not None and run["id"] == run_id and current:
                if pending is not None:
                    pending.record(connection)
                return _issue(connection, run, detail, actor, reused, force)
            same_inputs = current
        if not same_inputs or run is None:
            raise InputError(
                f"the inputs or rules of {month} changed while closing; run close again"
            )
        run_id, reused = str(run["id"]), True
    raise InputError(
        f"other runs of {month} were recorded while closing ({CLOSE_ATTEMPTS} times); "
        "run close again"
    )


def _refuse_closed_meanwhile(connection: Connection, month: str) -> None:
    """Under the lock: the month, open when this close began, is closed now (exit 2)."""
    event = latest_event(connection, month)
    if event is not None and event["action"] == MonthAction.CLOSE:
        raise ClosedMeanwhile(
            f"{month} was closed by another process (revision {event['revision']} issued "
            f"{iso_offset(event['at'])} by {event['actor']}) while this close was running or "
            f"waiting: this close issued nothing; `tenantcost history --month {month}` lists "
            "the statements"
        )


def _issue(
    connection: Connection,
    run: dict[str, Any],
    detail: str | None,
    actor: str,
    reused: bool,
    force: bool = False,
) -> Closed:
    """Write the close event and the statements of revision N+1 (one bulk insert); unless
    ``force``, refuse one that changes nothing revision N issued."""
    month, run_id = str(run["month"]), str(run["id"])
    previous = issued_revision(connection, month)
    c = table(RunClient).c
    current = pd.DataFrame(
        connection.execute(select(c.client, c.amount).where(c.run_id == run_id)).all(),
        columns=["client", "amount"],
    )
    before = statements(connection, month, previous)[["client", "amount"]]
    rows = _statement_rows(current, before.rename(columns={"amount": "previous_amount"}))
    issued = latest_issued(connection, month) if previous else None
    moved = rates_changed(connection, issued.run_id if issued else None, run_id)
    if previous and not force and not moved and _unchanged(connection, month, run, rows, detail):
        raise NothingChanged(month, previous)
    revision = previous + 1
    last = latest_event(connection, month)
    reopened = last is not None and last["action"] == MonthAction.REOPEN
    reason = str(last["reason"]) if last is not None and reopened else None
    client_reason = last["client_reason"] if last is not None and reopened else None
    now = utcnow()
    from tenantcost.store.display import freeze

    rule, places = freeze(connection, run_id)  # the decimals this revision is shown with
    event = {"month": month, "action": MonthAction.CLOSE.value, "revision": revision,
             "reason": reason, "run_id": run_id, "incomplete": detail is not None,
             "detail": detail, "at": now, "actor": actor, "client_reason": client_reason,
             "display_rule": rule, "display_places": places}  # fmt: skip
    event_id = connection.execute(
        insert(table(MonthEvent)).returning(table(MonthEvent).c.id), [event]
    ).scalar_one()
    common = {"month": month, "revision": revision, "currency": run["currency"],
              "run_id": run_id, "event_id": event_id, "rule_ids": run["rule_ids"],
              "reason": reason, "incomplete": detail is not None, "issued_at": now,
              "issued_by": actor, "client_reason": client_reason}  # fmt: skip
    if not rows.empty:
        records = rows.astype(object).where(rows.notna(), None).to_dict("records")
        connection.execute(insert(table(Statement)), [common | r for r in records])
    _forget_next_months_sheets(connection, month)
    return Closed(month, revision, run_id, reused, detail is not None, detail, reason, now,
                  str(run["currency"]), rows, client_reason, moved)  # fmt: skip


def _forget_next_months_sheets(connection: Connection, month: str) -> None:
    """The next month's kept sheets carry its bridge against this month's latest issued
    revision, which this close replaces: drop them and their rendering jobs, in the close's
    transaction, so the background rendering (or the first read) renders them again against
    the new revision (:mod:`tenantcost.store.sheet_cache`)."""
    following = (pd.Period(month, freq="M") + 1).strftime("%Y-%m")
    runs = select(table(Run).c.id).where(table(Run).c.month == following)
    for kept in (SheetRender, SheetRenderJob):
        connection.execute(delete(table(kept)).where(table(kept).c.run_id.in_(runs)))


def _unchanged(
    connection: Connection,
    month: str,
    run: dict[str, Any],
    rows: pd.DataFrame,
    detail: str | None,
) -> bool:
    """Whether revision N+1 from ``run`` would say what revision N says: no client's amount
    differs and no client is new (one gone at 0 was 0 before), the same rule versions, the
    same currency and the same completeness note (an incomplete month made complete, or
    with fewer hours missing, is a change)."""
    issued = latest_issued(connection, month)
    if issued is None:
        return False
    c = table(Statement).c
    currency = connection.execute(
        select(c.currency).where(c.month == month, c.revision == issued.revision).limit(1)
    ).scalar()
    return (
        bool((rows["difference"] == 0).all() and rows["previous_amount"].notna().all())
        and sorted(json.loads(str(run["rule_ids"]))) == sorted(issued.rule_ids)
        and (currency is None or currency == run["currency"])
        and issued.detail == detail
    )


def _statement_rows(current: pd.DataFrame, before: pd.DataFrame) -> pd.DataFrame:
    """``client, amount, previous_amount, difference``: every client of the run and of the
    previous revision (one the run no longer has gets 0), by client."""
    rows = current.merge(before, on="client", how="outer").sort_values("client")
    rows["amount"] = rows["amount"].fillna(0).astype("int64")
    rows["previous_amount"] = rows["previous_amount"].astype("Int64")
    rows["difference"] = (rows["amount"] - rows["previous_amount"].fillna(0)).astype("int64")
    return rows[["client", "amount", "previous_amount", "difference"]].reset_index(drop=True)


def reopen_month(
    engine: Engine,
    month: str,
    *,
    reason: str,
    actor: str,
    wait: float = 0.0,
    client_reason: str | None = None,
) -> Reopened:
    """Unlock a closed month for corrections, recording why; the next close issues the next
    revision with this reason. Refuses an empty reason and a month that is not closed.

    ``reason`` is for finance and admin only; ``client_reason`` is what clients' readers
    (account managers, client sheets) are told, redacted for each; without one they read
    :data:`tenantcost.report.privacy.RESTATED_NOTE`, never ``reason``."""
    Period.month(month)
    reason = " ".join(reason.split())
    if not reason:
        raise InputError("--reason is empty: say why the month is reopened (it goes on the "
                         "next revision's statements)")  # fmt: skip
    told = _client_reason(client_reason)
    with write_transaction(engine, wait) as connection:
        event = latest_event(connection, month)
        if event is None or event["action"] != MonthAction.CLOSE:
            state = (
                "never closed"
                if event is None
                else (f"reopened after revision {event['revision']}, not closed since")
            )
            raise MonthNotClosed(
                f"{month} is not closed ({state}): nothing to reopen; `tenantcost close "
                f"--month {month}` issues its next revision"
            )
        revision, now = int(event["revision"]), utcnow()
        connection.execute(insert(table(MonthEvent)), [{
            "month": month, "action": MonthAction.REOPEN.value, "revision": revision,
            "reason": reason, "run_id": None, "incomplete": False, "detail": None,
            "at": now, "actor": actor, "client_reason": told}])  # fmt: skip
    return Reopened(month, revision, reason, now, actor, told)


def _client_reason(text: str | None) -> str | None:
    """``--client-reason`` on one line (None when empty); a control character is refused,
    as in a client id (no backend stores NUL in text, and no reader should get the rest)."""
    if text is None:
        return None
    told = " ".join(text.split())
    bad = next((c for c in told if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise InputError(f"--client-reason: control character U+{ord(bad):04X}; give plain text")
    return told or None


__all__ = [
    "FOREVER",
    "Closed",
    "ClosedMeanwhile",
    "IncompleteMonth",
    "Issued",
    "MonthAction",
    "MonthClosed",
    "MonthNotClosed",
    "MonthState",
    "NothingChanged",
    "Reopened",
    "UnbilledMonth",
    "close_month",
    "closed_months",
    "connected",
    "incomplete_note",
    "issued_revision",
    "latest_issued",
    "missing_hours",
    "month_state",
    "refuse_if_closed",
    "refuse_rule_version",
    "reopen_month",
    "rules_in_force",
    "statements",
    "stored_cycle_months",
]
