"""A client's trend across months: ``GET /api/v1/clients/{id}/trend`` and the client page's charts.

A product manager or an account manager asks "is this client getting more expensive, and is it
the volume or the price?". The answer is the client's amount per month, split by source, and
its cost per unit of each key metric, read from what the store recorded (never allocated in a
request):

* a month's figure is the one :func:`tenantcost.service.figures.month_source` gives the
  viewer: ``issued`` / ``restated`` (the latest issued revision), or ``draft`` for finance and
  admin on an open month; a month with none of these but a watch of the client (the open month
  an account manager or product sees) is ``projected``: the watch's projection
  (:mod:`tenantcost.service.watch_view`), with ``month_to_date`` and the ``budget`` band. The
  watch records no split by source, so a projected month's ``by_source`` has one entry,
  :data:`ALL_SOURCES`, and no ``unit_costs``;
* ``by_source``: the run's lines of the client summed per source (integers of micro-units;
  they add up exactly to ``amount``, since a run's client total *is* the sum of its lines);
* ``unit_costs``: per key with a unit (:func:`tenantcost.key_units.unit_basis`: per 1,000
  requests, per CPU-hour, per GiB), the client's amount on the lines split by that key over
  its own measure on them (a client's unit cost as ``unit-economics`` defines it,
  docs/economics.md, summed over the sources split by that key), in micro-units per quoted
  unit, rounded half to even;
* months oldest first, the ``months`` calendar months ending at the newest month with a
  figure or a watch of the client; months without one are left out.

One client, at most :data:`MAX_MONTHS` months: two queries for the lines of every month shown
(grouped in SQL), one per month for which figure applies (the month's state and revisions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, func, select

from tenantcost.key_units import unit_basis
from tenantcost.service.figures import client_months, month_source, reader_text
from tenantcost.service.permissions import Principal
from tenantcost.store.models import Run, RunFxLine, RunLine, Statement, table

MAX_MONTHS = 36
DEFAULT_MONTHS = 12
ALL_SOURCES = "(all sources)"
"""The one ``by_source`` key of a projected month (the watch records no split by source)."""
PROJECTED = "projected"


@dataclass(frozen=True)
class TrendMonth:
    """One month of the trend (amounts in micro-units)."""

    month: str
    status: str
    revision: int | None
    amount: int
    by_source: dict[str, int]
    unit_costs: dict[str, tuple[str, int]]
    """key -> (unit label, micro-units per quoted unit)."""
    budget: dict[str, int] | None = None
    month_to_date: int | None = None
    ledger_amount: int | None = None
    """Shown converted: the month's amount in the ledger currency (as issued)."""
    ledger_by_source: dict[str, int] | None = None
    """Shown converted: ``by_source`` in the ledger currency."""
    fx: dict[str, Any] | None = None
    """Shown converted: how (the run's conversion document, its source as the reader may
    see it; a projection's: the budget's rate to date)."""

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "month": self.month,
            "status": self.status,
            "revision": self.revision,
            "amount": self.amount,
            "by_source": dict(self.by_source),
            "unit_costs": {k: {"unit": u, "amount": a} for k, (u, a) in self.unit_costs.items()},
        }
        if self.ledger_amount is not None:
            doc |= {"ledger_amount": self.ledger_amount, "fx": self.fx}
        if self.status == PROJECTED:
            doc |= {"month_to_date": self.month_to_date, "budget": self.budget}
        return doc


@dataclass(frozen=True)
class Trend:
    client: str
    currency: str
    months: list[TrendMonth]
    ledger_currency: str | None = None
    """Shown converted: the ledger currency (``None``: shown in the ledger)."""
    not_converted: list[str] = field(default_factory=list)
    """Shown converted: the months left out, their figure having no conversion into
    ``currency`` (a run before the currency was asked for, or the watch's projection without
    a budget in it)."""

    def document(self) -> dict[str, Any]:
        from tenantcost.money import money_header

        doc = {
            "client": self.client,
            "money": money_header(self.currency),
            "months": [m.document() for m in self.months],
        }
        if self.ledger_currency is not None:
            doc |= {"ledger_currency": self.ledger_currency, "not_converted": self.not_converted}
        return doc

    def unit_cost_document(self) -> dict[str, Any]:
        """The unit costs as rows (``GET /api/v1/clients/{id}/unit-cost-trend``)."""
        from tenantcost.money import money_header

        rows = [
            {
                "month": m.month,
                "status": m.status,
                "revision": m.revision,
                "metric": k,
                "unit": u,
                "amount": a,
            }
            for m in self.months
            for k, (u, a) in m.unit_costs.items()
        ]  # fmt: skip  (at most 36 months x a few keys)
        doc = {"client": self.client, "money": money_header(self.currency), "rows": rows}
        if self.ledger_currency is not None:
            doc |= {"ledger_currency": self.ledger_currency, "not_converted": self.not_converted}
        return doc

    def by_source_frame(self) -> pd.DataFrame:
        """The CSV's rows: one per month and source (``month, status, revision, source,
        amount``; converted, also each row's ledger amount and how it was converted)."""
        rows = [
            (m.month, m.status, m.revision, s, a, (m.ledger_by_source or {}).get(s))
            for m in self.months
            for s, a in m.by_source.items()
        ]  # at most 36 months x a few sources
        columns = ["month", "status", "revision", "source", "amount", "ledger_amount"]
        frame = pd.DataFrame(rows, columns=columns)
        frame = frame.astype({"revision": "Int64", "amount": "Int64", "ledger_amount": "Int64"})
        if self.ledger_currency is None:
            return frame.drop(columns="ledger_amount")
        return self._labelled(frame)

    def _labelled(self, frame: pd.DataFrame) -> pd.DataFrame:
        """A converted trend's CSV says, on each row, its currency, the ledger's, and how the
        month was converted (policy, rates, source), so a reader can redo it; a ledger one is
        as before."""
        if self.ledger_currency is None:
            return frame
        how = {m.month: m.fx or {} for m in self.months}
        return frame.assign(
            currency=self.currency,
            ledger_currency=self.ledger_currency,
            fx_policy=frame["month"].map(lambda m: how[m].get("policy", "")),
            fx_rates=frame["month"].map(lambda m: _rates_text(how[m])),
            fx_source=frame["month"].map(lambda m: how[m].get("source", "")),
        )

    def unit_cost_frame(self) -> pd.DataFrame:
        """One row per month and key: ``month, status, revision, metric, unit, amount``."""
        rows = [
            (m.month, m.status, m.revision, k, u, a)
            for m in self.months
            for k, (u, a) in m.unit_costs.items()
        ]
        frame = pd.DataFrame(
            rows, columns=["month", "status", "revision", "metric", "unit", "amount"]
        )
        return self._labelled(frame.astype({"revision": "Int64", "amount": "Int64"}))


def _rates_text(fx: dict[str, Any]) -> str:
    """The rates a month was converted at, in one phrase (every rate is in its sheet)."""
    from tenantcost.report.exchange_view import rate_span

    if "rates" in fx:
        return rate_span(fx)
    return f"{fx['rate']} to date" if "rate" in fx else ""


def _month_range(last: str, count: int) -> list[str]:
    end = pd.Period(last, freq="M")
    return [(end - i).strftime("%Y-%m") for i in range(count - 1, -1, -1)]


def _ledger_band(budget: dict[str, Any] | None, ledger: str) -> dict[str, int] | None:
    """The band drawn beside the ledger projections: one set in the client's own currency is
    in another unit, so it is left out of the ledger chart (the client page shows it)."""
    if budget is None or budget.get("currency", ledger) != ledger:
        return None
    return {k: int(budget[k]) for k in ("low", "expected", "high")}


def client_trend(
    engine: Engine, principal: Principal, client: str, months: int, currency: str | None = None
) -> Trend | None:
    """The trend of ``client`` as ``principal`` may see it (``None``: no month at all), in
    ``currency`` when given and not the ledger's: each month as its run converted it
    (:func:`_converted`)."""
    from tenantcost.store.watch_snapshots import watched_months

    figured = client_months(engine, principal, client)
    watched = watched_months(engine, client)
    known = sorted(set(figured) | set(watched))
    if not known:
        return None
    window = set(_month_range(known[-1], months))
    shown: dict[str, tuple[str, str, int | None]] = {}  # month -> (run id, status, revision)
    for month in (m for m in figured if m in window):  # at most 36 months
        source = month_source(engine, principal, month)
        if source is not None:
            shown[month] = (source.run_id, str(source.status), source.revision)
    runs = [run for run, _, _ in shown.values()]
    per_run = _per_run(_lines(engine, client, runs))
    ledger = _currency(engine, runs)
    redact = reader_text(engine, principal, client)
    amounts = _issued_amounts(engine, client, shown)
    out: list[TrendMonth] = []
    for month in sorted(window & set(known)):
        if month in shown:
            run_id, status, revision = shown[month]
            own = per_run.get(run_id, [])
            by_source = _by_source(own, redact)
            amount = sum(by_source.values())  # a run's client total is the sum of its lines
            if not by_source:  # a statement of a client without lines (amount 0)
                amount = amounts.get(month, 0)
                by_source = {ALL_SOURCES: amount}
            out.append(TrendMonth(month, status, revision, amount, by_source, _unit_costs(own)))
        else:
            projected = _projected(engine, client, month)
            if projected is not None:
                ledger = ledger or projected[1]
                out.append(projected[0])
    if not out:
        return None
    trend = Trend(client, ledger or "USD", out)
    if currency is None or currency == trend.currency:
        return trend
    from tenantcost.service.permissions import Action, can

    internal = can(principal, Action.VIEW_INTERNAL_SHEET, client).allowed
    return _converted(engine, trend, shown, per_run, redact, currency, internal)


def _projected(
    engine: Engine, client: str, month: str
) -> tuple[TrendMonth, str, dict[str, Any] | None] | None:
    """The watch's projection of ``client`` for ``month`` (the latest watch run), the ledger
    currency and the budget entry; ``None``: no watch of the month has the client."""
    from tenantcost.store.watch_snapshots import client_entry, latest_snapshot

    snapshot = latest_snapshot(engine, month)
    entry = None if snapshot is None else client_entry(engine, snapshot.id, client)
    if snapshot is None or entry is None:
        return None
    projected = int(entry["projected"])
    budget = entry.get("budget")
    found = TrendMonth(
        month, PROJECTED, None, projected, {ALL_SOURCES: projected}, {},
        _ledger_band(budget, snapshot.currency), int(entry["month_to_date"]),
    )  # fmt: skip
    return found, str(snapshot.currency), budget


def _converted(
    engine: Engine,
    trend: Trend,
    shown: dict[str, tuple[str, str, int | None]],
    per_run: dict[str, list[Line]],
    redact: Any,
    currency: str,
    internal: bool,
) -> Trend:
    """``trend`` in ``currency``. A month its run converted into ``currency`` shows the
    run's converted lines (``run_fx_line``, frozen by the close that issued it) summed per
    source, its unit costs over the same measures, and its ledger amount beside. The open
    month's projection converts only where the watch projected it in ``currency``, a
    client's budget set in it (at the month's rates to date). Any other month is left out and
    named in ``not_converted``: a chart never mixes two currencies."""
    runs = sorted({run for run, _, _ in shown.values()})
    converted, documents = _converted_lines(engine, trend.client, runs, currency, internal)
    out: list[TrendMonth] = []
    missing: list[str] = []
    for month in trend.months:  # at most 36
        if month.status == PROJECTED:
            found = _projected_in(engine, trend.client, month, currency)
        elif shown[month.month][0] in converted:
            run_id = shown[month.month][0]
            own = _with_measures(per_run.get(run_id, []), converted[run_id])
            by_source = _by_source(own, redact) or {ALL_SOURCES: 0}
            found = replace(month, amount=sum(by_source.values()), by_source=by_source,
                            unit_costs=_unit_costs(own), ledger_amount=month.amount,
                            ledger_by_source=month.by_source, fx=documents[run_id])  # fmt: skip
        else:
            found = None
        if found is None:
            missing.append(month.month)
        else:
            out.append(found)
    if not out:  # nothing converted: the ledger trend, which names its own currency
        return trend
    return Trend(trend.client, currency, out, trend.currency, missing)


def _projected_in(
    engine: Engine, client: str, month: TrendMonth, currency: str
) -> TrendMonth | None:
    """The open month's projection in ``currency``: the watch's, against a budget set in it."""
    found = _projected(engine, client, month.month)
    budget = found[2] if found is not None else None
    if budget is None or budget.get("currency") != currency or "month_to_date" not in budget:
        return None
    projected = int(budget["projected"])
    band = {k: int(budget[k]) for k in ("low", "expected", "high")}
    return replace(
        month,
        amount=projected,
        by_source={ALL_SOURCES: projected},
        budget=band,
        month_to_date=int(budget["month_to_date"]),
        ledger_amount=month.amount,
        ledger_by_source={ALL_SOURCES: month.amount},
        fx={"policy": "the month's rates to date (the watch's budget)", "rate": budget["rate"]},
    )


def _converted_lines(
    engine: Engine, client: str, runs: list[str], currency: str, internal: bool
) -> tuple[dict[str, dict[tuple[str, str], int]], dict[str, dict[str, Any]]]:
    """The client's lines of ``runs`` in ``currency``, summed per run, source and key: only
    the runs that recorded a conversion into it (a client without lines there has ``{}``);
    and each such run's conversion document, its source as the reader may see it."""
    import json

    from tenantcost.service.currency_view import reader_document
    from tenantcost.store.models import RunFx

    if not runs:
        return {}, {}
    fx, ln = table(RunFx).c, table(RunFxLine).c
    lines = (
        select(ln.run_id, ln.source, ln.key, func.sum(ln.amount))
        .where(ln.run_id.in_(runs), ln.currency == currency, ln.client == client)
        .group_by(ln.run_id, ln.source, ln.key)
    )
    with engine.connect() as conn:
        done = conn.execute(
            select(fx.run_id, fx.document).where(fx.run_id.in_(runs), fx.currency == currency)
        ).all()
        out: dict[str, dict[tuple[str, str], int]] = {str(r): {} for r, _ in done}
        for run_id, source, key, amount in conn.execute(lines).all():  # a few per month
            out[str(run_id)][(str(source), str(key))] = int(amount)
    documents = {str(r): reader_document(json.loads(text), internal) for r, text in done}
    return out, documents


def _with_measures(own: list[Line], converted: dict[tuple[str, str], int]) -> list[Line]:
    """The client's ledger lines of a run with their converted amounts (same measures)."""
    return [(source, key, measure, converted.get((source, key), 0))
            for source, key, measure, _ in own]  # fmt: skip


def _currency(engine: Engine, runs: list[str]) -> str | None:
    if not runs:
        return None
    r = table(Run).c
    with engine.connect() as conn:
        found = conn.execute(select(r.currency).where(r.id.in_(runs)).limit(1)).scalar()
    return None if found is None else str(found)


def _lines(engine: Engine, client: str, runs: list[str]) -> pd.DataFrame:
    """The client's lines of ``runs`` summed per run, source and key (SQL)."""
    columns = ["run_id", "source", "key", "measure", "amount"]
    if not runs:
        return pd.DataFrame(columns=columns)
    ln = table(RunLine).c
    query = (
        select(ln.run_id, ln.source, ln.key, func.sum(ln.measure), func.sum(ln.amount))
        .where(ln.run_id.in_(runs), ln.client == client)
        .group_by(ln.run_id, ln.source, ln.key)
        .order_by(ln.run_id, ln.source, ln.key)
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    frame = pd.DataFrame([tuple(r) for r in rows], columns=columns)
    return frame.astype({"amount": "int64", "measure": "float64"})


def _issued_amounts(
    engine: Engine, client: str, shown: dict[str, tuple[str, str, int | None]]
) -> dict[str, int]:
    """The statements' amounts of the issued months shown (what the pages show)."""
    issued = {m: rev for m, (_, _, rev) in shown.items() if rev is not None}
    if not issued:
        return {}
    s = table(Statement).c
    query = select(s.month, s.revision, s.amount).where(
        s.client == client, s.month.in_(sorted(issued))
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return {str(m): int(a) for m, rev, a in rows if issued.get(str(m)) == rev}


Line = tuple[str, str, float, int]
"""One of a client's summed lines of a run: ``(source, key, measure, amount)``."""


def _per_run(lines: pd.DataFrame) -> dict[str, list[Line]]:
    """The client's summed lines per run, in the query's order (source, key). A client has a
    few lines per run, so plain tuples: a pandas group per month took 20 ms a trend."""
    out: dict[str, list[Line]] = {}
    for run_id, source, key, measure, amount in lines.itertuples(index=False, name=None):
        out.setdefault(str(run_id), []).append((str(source), str(key), float(measure),
                                                int(amount)))  # fmt: skip
    return out


def _by_source(own: list[Line], redact: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for source in sorted({line[0] for line in own}):  # one client's sources: a handful
        name = redact(source)
        out[name] = out.get(name, 0) + sum(line[3] for line in own if line[0] == source)
    return out


def _unit_costs(own: list[Line]) -> dict[str, tuple[str, int]]:
    """Per key with a unit: amount x per / measure, micro-units per quoted unit."""
    out: dict[str, tuple[str, int]] = {}
    for key in sorted({line[1] for line in own}):  # a client's keys: two or three
        basis = unit_basis(key)
        measure = math.fsum(line[2] for line in own if line[1] == key)
        amount = sum(line[3] for line in own if line[1] == key)
        if basis is None or not measure > 0:
            continue
        label, per = basis
        out[key] = (label, int(np.rint(float(amount) * per / measure)))
    return out


__all__ = ["ALL_SOURCES", "DEFAULT_MONTHS", "MAX_MONTHS", "Trend", "TrendMonth", "client_trend"]
