"""``tenantcost explain``: a client's month-over-month bridge (``tenantcost.bridge``).

Both months are allocated through the one run sequence (:func:`tenantcost.cli.run.opened`,
the inputs loaded once for the span of the two months, each month allocated like
``allocate --month``); a rule change between them is restated through the same core
(:func:`tenantcost.report.changes.quiet_allocate`). With ``--from-db`` each month is its
latest run recorded in the store (``tenantcost run``), read back as recorded, and a rule
change is restated from the store's inputs. The bridge itself is :mod:`tenantcost.bridge`,
pure. Heavy modules load inside the command.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tenantcost.cli.shell import CurrencyOpt, RunOptions, command, run_options
from tenantcost.cli.store import DataOpt, DbOpt, SettingsOpt
from tenantcost.errors import InputError

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from tenantcost.bridge import ClientBridge, Comparison
    from tenantcost.config.rules import RuleSet
    from tenantcost.result import AllocationResult
    from tenantcost.windows import Period


@command("explain")
@run_options(config_required=False)
def explain_command(
    options: RunOptions,
    client: Annotated[str, typer.Option("--client", help="The client whose change to explain.")],
    vs: Annotated[
        str | None,
        typer.Option(
            "--vs", help="The month to compare with, YYYY-MM (default: the month before)."
        ),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="The time a month in progress is judged at (ISO 8601, default now): such a "
            "month is projected to its end at the run rate of the hours covered.",
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table (default) or json.")] = "table",
    from_db: Annotated[
        bool,
        typer.Option(
            "--from-db",
            help="Each month's latest run recorded in the store (`tenantcost run`); a rule "
            "change is restated from the store's inputs. Not with --config or other inputs.",
        ),
    ] = False,
    db: DbOpt = None,
    data: DataOpt = None,
    settings: SettingsOpt = None,
    currency: CurrencyOpt = None,
) -> None:
    """Explain a client's change from one month (--vs) to another (--month), part by part.

    The parts (volume, rate, rule, residual, direct, new_source, ended_source, and fx in
    another currency than the ledger's) add up exactly to the change. --month is the month
    explained (--from and --to do not apply).
    """
    explain(options, client, vs, as_of, fmt, (db, data, settings) if from_db else None)


def _months(options: RunOptions, vs: str | None) -> tuple[Period, Period, str]:
    """(month, vs month, the option naming the vs month in errors)."""
    from tenantcost.report.changes import previous_period
    from tenantcost.windows import Period

    if options.start or options.end:
        raise InputError(
            "explain compares calendar months: give --month M and --vs M2, not --from/--to"
        )
    if not options.month:
        raise InputError("explain needs --month M, the month to explain (YYYY-MM)")
    month = Period.month(options.month)
    if vs is None:
        return month, previous_period(month), "--vs (default: the month before --month)"
    return month, Period.month(vs, "--vs"), "--vs"


def _as_of(text: str | None) -> datetime:
    from datetime import UTC

    import pandas as pd

    from tenantcost.windows import parse_utc

    if text is None:
        return datetime.now(UTC)
    at = parse_utc(text, "--as-of")
    if pd.isna(at):
        raise InputError(f"--as-of: not an ISO 8601 time: '{text}'")
    return at.to_pydatetime()


def _unknown_client(client: str, results: list[AllocationResult], labels: list[str]) -> None:
    from tenantcost.suggest import did_you_mean

    known = sorted({str(c) for r in results for c in r.lines["client"].unique()})
    if client in known:
        return
    shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
    raise InputError(
        f"--client: no client '{client}' in {' or '.join(dict.fromkeys(labels))}"
        f"{did_you_mean(client, known)}; clients are {shown or '(none)'}"
    )


Where = tuple[str | None, str | None, Path | None]
"""``--db``, ``--data``, ``--settings``."""

Shown = tuple[int, dict[str, Any]]
"""A month's converted amount of the client and the conversion's ``fx`` document."""


def explain(
    options: RunOptions,
    client: str,
    vs: str | None,
    as_of: str | None,
    fmt: str,
    store: Where | None = None,
) -> None:
    """Bridge the two months (from files, or from the store's runs) and print the client's."""
    import json

    from tenantcost.bridge import bridges, client_bridge
    from tenantcost.cli.run import check_format
    from tenantcost.report.display import period_label

    check_format(fmt, ("table", "json"))
    month, other, vs_option = _months(options, vs)
    at = _as_of(as_of)
    early, late = sorted([month, other], key=lambda p: p.start)
    converted: dict[str, Shown] = {}
    if store is not None:
        comparison, currency, converted = _from_store(options, client, (early, late), store)
    else:
        comparison, currency, results = _from_files(
            options, client, (early, late), (month, other, vs_option)
        )
        converted = {label: _shown(r, client) for label, r in results.items()}
    result = client_bridge(
        bridges(comparison, [client]),
        client,
        period_label(month.start, month.end),
        currency,
        as_of=at,
    )
    if converted:
        result = _converted(result, client, converted)
    if fmt == "json":
        typer.echo(json.dumps(result.document(), indent=2))
    else:
        typer.echo(bridge_text(result))


def _shown(result: AllocationResult, client: str) -> Shown:
    lines = result.lines
    return int(lines.loc[lines["client"] == client, "amount"].sum()), result.fx or {}


def _converted(ledger: ClientBridge, client: str, shown: dict[str, Shown]) -> ClientBridge:
    """The ledger bridge shown in the months' currency, with its ``fx`` part."""
    from tenantcost.bridge import converted_bridge

    docs = [shown[ledger.vs][1], shown[ledger.month][1]]
    fx = {
        **{k: docs[1][k] for k in ("ledger_currency", "currency", "policy", "source")},
        "provisional": any(d.get("provisional", False) for d in docs),
        "rates": {ledger.vs: docs[0].get("rates", []), ledger.month: docs[1].get("rates", [])},
    }
    amounts = (shown[ledger.vs][0], shown[ledger.month][0])
    return converted_bridge(ledger, amounts, str(docs[1]["currency"]), fx)


def _labels(early: Period, late: Period) -> tuple[str, str]:
    from tenantcost.report.display import period_label

    return period_label(early.start, early.end), period_label(late.start, late.end)


def _from_files(
    options: RunOptions,
    client: str,
    months: tuple[Period, Period],
    named: tuple[Period, Period, str],
) -> tuple[Comparison, str, dict[str, AllocationResult]]:
    """Both months through the one run sequence; restatements through the same core. In
    another currency (``--currency``, ``presentation:``), the bridge is the ledger's and the
    months' converted results come back by label (else an empty dict)."""
    from tenantcost.bridge import compare_months
    from tenantcost.cli.run import opened, require_cost_data
    from tenantcost.report.changes import quiet_allocate
    from tenantcost.timefmt import iso_z

    if options.config is None:
        raise InputError("give --config RULES (or --from-db to read the store's runs)")
    early, late = months
    labels = _labels(early, late)
    span = replace(options, month=None, start=iso_z(early.start), end=iso_z(late.end))
    with opened(span, check_period=False, presents=True) as run:
        require_cost_data(run.inputs.costs, named[0], "--month")
        require_cost_data(run.inputs.costs, named[1], named[2])
        first = replace(run, period=early).allocate().result
        second = first if early == late else replace(run, period=late).allocate().result
        shown = {labels[0]: first, labels[1]: second} if first.ledger is not None else {}
        first, second = first.ledger or first, second.ledger or second
        _unknown_client(client, [first, second], list(labels))
        ruleset = run.inputs.ruleset
        comparison = compare_months(
            first, second, labels, ruleset, lambda rules, p: quiet_allocate(run.inputs, rules, p)
        )
    return comparison, ruleset.currency, shown


def _from_store(
    options: RunOptions, client: str, months: tuple[Period, Period], where: Where
) -> tuple[Comparison, str, dict[str, Shown]]:
    """Each month's latest recorded run, as recorded; a rule change restated from the
    store's inputs of each month (as ``report``'s pack figures are). In another currency
    (``--currency``, the stored ``presentation:``), each month's conversion as its run
    recorded it (:mod:`tenantcost.store.run_fx`)."""
    from tenantcost.bridge import compare_months
    from tenantcost.collect import CostInput
    from tenantcost.inputs import Inputs
    from tenantcost.presentation import presentation_currency
    from tenantcost.report.changes import quiet_allocate
    from tenantcost.split import connect
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.report_figures import load_run
    from tenantcost.store.schema import current_store
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.stored import stored_costs, stored_usage

    given = {"--config": options.config, "--costs": options.costs, "--usage": options.usage,
             "--opencost-url": options.opencost_url}  # fmt: skip
    if any(given.values()):
        named = ", ".join(k for k, v in given.items() if v)
        raise InputError(f"--from-db reads the store's runs: leave out {named}")
    labels = _labels(*months)
    resolved = resolve_settings(*where)
    with current_store(resolved) as engine:
        with engine.connect() as connection:
            ids = [_latest_run(connection, m) for m in labels]
            first, second = (load_run(connection, i) for i in ids)
        _unknown_client(client, [first.result, second.result], list(labels))
        currency = presentation_currency(second.ruleset, options.currency)
        shown = (
            _stored_shown(engine, dict(zip(labels, ids, strict=True)), client, currency)
            if currency != second.result.currency
            else {}
        )

        def restate(rules: RuleSet, period: Period) -> AllocationResult:
            store = Store(engine, DataDir(resolved.require_data()))
            con = connect()
            costs, usage = stored_costs(store, period), stored_usage(store, period, con)
            origin = Path(second.rules_origin)
            inputs = Inputs(origin, second.ruleset, CostInput(costs, []), usage, [], con)
            return quiet_allocate(inputs, rules, period)

        comparison = compare_months(first.result, second.result, labels, second.ruleset, restate)
    return comparison, second.result.currency, shown


def _stored_shown(
    engine: Engine, runs: dict[str, str], client: str, currency: str
) -> dict[str, Shown]:
    """The client's converted amount and the ``fx`` document each month's run recorded; a
    run without a conversion into ``currency`` is one ``error:`` line."""
    from tenantcost.store.run_fx import client_conversions, run_conversions

    shown: dict[str, Shown] = {}
    for label, run_id in runs.items():
        recorded = run_conversions(engine, run_id)
        if currency not in recorded:
            held = ", ".join(sorted(recorded)) or "none"
            raise InputError(
                f"--from-db: the run of {label} was not converted into {currency} (its "
                f"conversions: {held}); a run converts into the rule file's presentation: "
                "currency, so set it and `tenantcost run` the month again"
            )
        amounts = client_conversions(engine, [run_id], currency)
        mine = amounts.loc[amounts["client"] == client, "amount"]
        shown[label] = (int(mine.sum()), recorded[currency].document)
    return shown


def _latest_run(connection: Connection, month: str) -> str:
    """The id of ``month``'s latest recorded run, or one ``error:`` line."""
    from sqlalchemy import select

    from tenantcost.store.models import Run, table

    r = table(Run).c
    run_id = connection.execute(
        select(r.id).where(r.month == month).order_by(r.started_at.desc()).limit(1)
    ).scalar()
    if run_id is None:
        raise InputError(
            f"--from-db: {month} has no run in the store: `tenantcost run --month {month}` first"
        )
    return str(run_id)


def bridge_text(b: ClientBridge) -> str:
    """The table form: from amount, each part with its reason, to amount and change."""
    from tenantcost.money import MINOR_UNIT_EXPONENT
    from tenantcost.writers.text import money, render_table

    def signed(micros: int) -> str:
        return ("+" if micros > 0 else "") + money(micros)

    rows = [[f"from {b.vs}", "", money(b.from_amount), ""]]
    for effect, source, amount, reason in zip(
        b.parts["effect"], b.parts["source"], b.parts["amount"], b.parts["reason"], strict=True
    ):
        rows.append([str(effect), str(source), signed(int(amount)), str(reason)])
    rows.append([f"to {b.month}", "", money(b.to_amount), ""])
    rows.append(["change", "", signed(b.change), "the parts add up to it exactly"])
    lines = [
        f"Bridge for {b.client} from {b.vs} to {b.month}; amounts in {b.currency}, exact to "
        f"10^-{MINOR_UNIT_EXPONENT}.",
        f"Rules: {b.vs}: {', '.join(b.rules[0]) or 'none'}; {b.month}: "
        f"{', '.join(b.rules[1]) or 'none'}.",
        "",
        render_table(["effect", "source", f"amount {b.currency}", "why"], rows, {2}),
    ]
    for p in b.projections:
        lines += [
            "",
            f"{p.month} is in progress at {p.as_of.isoformat()}: {p.hours_covered:g} of "
            f"{p.hours_in_month:g} hours covered; projection to the month's end: "
            f"{money(p.projected_amount)} {b.currency} ({p.method}). The bridge compares "
            "the amounts to date.",
        ]
    return "\n".join(lines)
