"""``tenantcost watch`` on the store: the month-to-date answer in docs/watch.md's JSON contract.

The watch is what an account manager sees of an open month, so it must come from the same
figures ``run`` would give, never a second formula: it allocates the store's costs and usage
of the hours covered so far **through the one core** (:func:`tenantcost.allocate.allocate_stream`,
the rules in force, stored billing data as ``run --allow-unbilled`` uses it), plus the
trailing ``window_days`` complete days before the month (the baseline of its first days may
reach into the previous month). The window-level lines never reach pandas: a lines sink
(:class:`DailySink`) sums each chunk's lines per UTC day, rule version, client and source
in DuckDB, where the split ran, and notes which clients had usage rows for which services
on which day. So memory is bounded by the days x clients x sources, not by the windows.

From those sums:

* ``month_to_date``: the client's allocation of the month's hours covered so far (the
  current partial day included); ``projected``: the run rate of ``unit-economics --as-of``
  (:func:`tenantcost.economics.run_rate`: amount x month seconds / seconds covered by cost
  data, half to even), or ``month_to_date`` once ``as_of`` is at or past the month's end;
  ``status``: ``projected`` against the budget band (:func:`tenantcost.watch.band_status`);
* ``anomalies`` and ``no_usage`` warnings: :func:`tenantcost.watch.score_days` on the daily
  figures of the complete days before ``as_of``. A day's ``split`` is the signature (class,
  key, services) of the source under the rule version(s) whose lines it has: a new version
  that leaves a source's split alone leaves its baseline alone;
* ``rule_changes``: each rule version in force from inside the watched part of the month
  that changes some source's split, with its effect on each client: the client's amount
  over the hours since the change under the new version minus the same hours restated under
  the previous one, through the same core (bounded: the hours since the change, once);
* month-level warnings: ``no_costs`` (a complete day of the month without cost data: it is
  not scored, so it can never look like a drop), ``unbilled`` (stored billing data lags: the
  day's money of that cluster is OpenCost's estimate), ``no_data`` (no cost data in the month
  yet: the answer is empty and the command still exits 0, for a CronJob on the 1st).

Every run records its answer (:func:`tenantcost.store.watch_snapshots.record_watch`) for the
service, which never computes a watch in a request.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import pandas as pd
from sqlalchemy import Connection, Engine

from tenantcost.allocate import allocate_stream
from tenantcost.bridge import only_version
from tenantcost.config.rules import RuleSet
from tenantcost.config.watch import WatchSettings
from tenantcost.economics import div_half_even, run_rate
from tenantcost.engine.chunks import LinePartWriter
from tenantcost.errors import InputError
from tenantcost.fx import fraction_text
from tenantcost.kinds import Detail
from tenantcost.money import MINOR_UNIT_EXPONENT
from tenantcost.plan import spec_tables
from tenantcost.result import AllocationResult
from tenantcost.split import connect
from tenantcost.store.batches import name_batches
from tenantcost.store.billing import stored_billing_run
from tenantcost.store.data import Store
from tenantcost.store.month_inputs import stored_rules
from tenantcost.store.month_state import MonthState, month_state
from tenantcost.store.stored import stored_costs, stored_usage
from tenantcost.store.watch_snapshots import record_watch
from tenantcost.timefmt import iso_z_seconds, utc
from tenantcost.watch import WarningKind, WatchParams, band_status, score_days
from tenantcost.windows import Period

DAY = pd.Timedelta(days=1)
DAY_SECONDS = 86_400
BUDGET_COLUMNS = ["client", "low", "expected", "high", "version"]

_names = itertools.count(1)


# --------------------------------------------------------------------------- the lines sink


AMOUNTS_SQL = """
    INSERT INTO {amounts}
    SELECT CAST(floor(epoch(window_start) / 86400) AS BIGINT) AS d, CAST(rule_id AS VARCHAR),
           CAST(client AS VARCHAR), CAST(source AS VARCHAR), CAST(kind AS VARCHAR),
           coalesce(CAST(key AS VARCHAR), ''), CAST(sum(amount) AS BIGINT)
    FROM (SELECT window_start, rule_id, client, source, kind, key, amount FROM lines
          UNION ALL
          SELECT window_start, rule_id, client, source, kind, key, amount FROM {direct})
    GROUP BY ALL
"""
"""One chunk's client lines summed per UTC day (of the window's start), rule version,
client and source (epoch arithmetic: a UTC day is a whole multiple of 86,400 s)."""

USED_SQL = """
    INSERT INTO {used}
    SELECT DISTINCT CAST(floor(epoch(window_start) / 86400) AS BIGINT) AS d,
           CAST(client AS VARCHAR), CAST(service AS VARCHAR)
    FROM chunk_usage WHERE client IS NOT NULL AND CAST(client AS VARCHAR) <> ''
"""
"""Which clients had usage rows for which services on which day (the chunk's usage as the
split read it)."""

DAILY_SQL = """
    WITH a AS (
        SELECT d, client, source, any_value(kind) AS kind, CAST(sum(amount) AS BIGINT) AS amount
        FROM {amounts} GROUP BY d, client, source
    ), day_rules AS (SELECT DISTINCT d, rule_id FROM {amounts}),
    splits AS (
        SELECT x.d, x.source,
               string_agg(DISTINCT coalesce(s.split, x.kind || ' ' || x.key), ' + '
                          ORDER BY coalesce(s.split, x.kind || ' ' || x.key)) AS split
        FROM (SELECT DISTINCT d, rule_id, source, kind, key FROM {amounts}) x
        LEFT JOIN {splits} s ON s.rule_id = x.rule_id AND s.source = x.source
        GROUP BY x.d, x.source
    ), used_sources AS (
        SELECT DISTINCT u.d, u.client, v.source FROM {used} u
        JOIN day_rules r ON r.d = u.d
        JOIN {services} v ON v.rule_id = r.rule_id AND v.service = u.service
    ), any_use AS (SELECT DISTINCT d, client FROM {used}),
    both_sides AS (
        SELECT coalesce(a.d, us.d) AS d, coalesce(a.client, us.client) AS client,
               coalesce(a.source, us.source) AS source, a.kind, coalesce(a.amount, 0) AS amount,
               us.client IS NOT NULL AS used
        FROM a FULL OUTER JOIN used_sources us
            ON a.d = us.d AND a.client = us.client AND a.source = us.source
    )
    SELECT b.d, b.client, b.source, b.amount, sp.split,
           CASE WHEN b.kind = 'direct' THEN true
                WHEN b.kind = 'idle' THEN au.client IS NOT NULL
                ELSE b.used END AS has_usage
    FROM both_sides b
    JOIN splits sp ON sp.d = b.d AND sp.source = b.source
    LEFT JOIN any_use au ON au.d = b.d AND au.client = b.client
"""
"""The daily figures (:mod:`tenantcost.watch`'s table). A client with usage rows for a
source's services and no line that day gets amount 0 (a possible drop), but only on a day
the source has lines at all: a day without costs is a ``no_costs`` warning, never a drop."""


@dataclass(frozen=True)
class DailyPart:
    """Sums one chunk's lines where it runs (this process: the watch uses the local engine,
    whose chunks share the DuckDB connection that holds the sink's tables)."""

    amounts: str
    used: str

    def __call__(self, con: duckdb.DuckDBPyConnection, direct_lines: pd.DataFrame) -> None:
        direct = f"{self.amounts}_direct"
        con.register(direct, direct_lines)
        try:
            con.execute(AMOUNTS_SQL.format(amounts=self.amounts, direct=direct))
        finally:
            con.unregister(direct)
        con.execute(USED_SQL.format(used=self.used))


class DailySink:
    """A lines sink (``tenantcost.engine.LinesSink``) keeping, in DuckDB tables of ``con``,
    the client lines per day, rule version and source, and the usage presence per day."""

    def __init__(self, con: duckdb.DuckDBPyConnection, ruleset: RuleSet) -> None:
        self.con = con
        n = next(_names)
        self.amounts, self.used = f"tc_watch_amounts_{n}", f"tc_watch_used_{n}"
        self.splits, self.services = f"tc_watch_splits_{n}", f"tc_watch_services_{n}"
        con.execute(
            f"CREATE TEMP TABLE {self.amounts} (d BIGINT, rule_id VARCHAR, "
            "client VARCHAR, source VARCHAR, kind VARCHAR, key VARCHAR, amount BIGINT)"
        )
        con.execute(f"CREATE TEMP TABLE {self.used} (d BIGINT, client VARCHAR, service VARCHAR)")
        splits, services = source_splits(ruleset)
        con.register(self.splits, splits)
        con.register(self.services, services)

    def part(self, index: int) -> LinePartWriter:
        return DailyPart(self.amounts, self.used)

    def chunk_done(self, index: int) -> None:
        """Nothing to assemble: each part inserted its sums already."""

    def daily(self) -> pd.DataFrame:
        """The daily figures of every day the allocation covered."""
        sql = DAILY_SQL.format(amounts=self.amounts, used=self.used, splits=self.splits,
                               services=self.services)  # fmt: skip
        frame = self.con.execute(sql).df()
        day = pd.to_datetime(frame["d"].to_numpy(dtype="int64") * DAY_SECONDS, unit="s", utc=True)
        return pd.DataFrame({
            "client": frame["client"].astype("str"), "source": frame["source"].astype("str"),
            "day": day.astype("datetime64[ns, UTC]"),
            "amount": frame["amount"].to_numpy(dtype="int64"),
            "split": frame["split"].astype("str"), "has_usage": frame["has_usage"].astype(bool),
        })  # fmt: skip

    def totals(self, start: pd.Timestamp, rule_id: str | None = None) -> pd.DataFrame:
        """``client, amount`` summed over the days from ``start`` (only ``rule_id``'s lines)."""
        first = int(start.timestamp()) // DAY_SECONDS
        where = f"d >= {first}" + (" AND rule_id = ?" if rule_id is not None else "")
        sql = f"SELECT client, CAST(sum(amount) AS BIGINT) AS amount FROM {self.amounts} " \
              f"WHERE {where} GROUP BY client"  # fmt: skip
        frame = self.con.execute(sql, [rule_id] if rule_id is not None else []).df()
        return frame.astype({"client": "str", "amount": "int64"})


def source_splits(ruleset: RuleSet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per rule version and keyed source: its split signature (``kind key over services``)
    and its services. Direct and idle lines are signed by their kind and key alone."""
    specs = spec_tables(ruleset)
    labels = pd.concat([specs.shared, specs.external, specs.billed], ignore_index=True)
    services = labels[["spec", "rule_id", "source"]].merge(specs.services, on="spec")
    over = services.groupby("spec")["service"].agg(lambda s: ",".join(sorted(set(s))))
    split = labels["kind"] + " " + labels["key"] + " over " + labels["spec"].map(over).fillna("")
    splits = pd.DataFrame(
        {"rule_id": labels["rule_id"], "source": labels["source"], "split": split.astype("str")}
    ).drop_duplicates(["rule_id", "source"])
    services = services[["rule_id", "source", "service"]].astype("str")  # typed when empty
    return splits.reset_index(drop=True).astype("str"), services


# --------------------------------------------------------------------------- the watch


@dataclass(frozen=True)
class Watched:
    """One watch run: the contract's document, whether the month was closed, its snapshot."""

    document: dict[str, Any]
    month_closed: bool
    snapshot_id: int


@dataclass(frozen=True)
class Span:
    """The times of one watch: the month, ``as_of``, where covered hours stop (``cutoff``),
    the complete days of the month before ``as_of`` and the baseline's first day."""

    month: Period
    as_of: pd.Timestamp
    cutoff: pd.Timestamp
    days: list[pd.Timestamp]
    first: pd.Timestamp

    @classmethod
    def of(cls, month: str, as_of: pd.Timestamp, window_days: int) -> Span:
        period = Period.month(month)
        if as_of < period.start:
            raise InputError(f"--as-of {iso_z_seconds(as_of)} is before {month} starts: "
                             "there is nothing to watch yet")  # fmt: skip
        cutoff = min(as_of, period.end)
        ends = pd.date_range(period.start + DAY, period.end, freq="D")
        days = [end - DAY for end in ends if end <= cutoff]
        return cls(period, as_of, cutoff, days, period.start - window_days * DAY)


def watch_month(
    store: Store, month: str, as_of: pd.Timestamp, settings: WatchSettings, actor: str
) -> Watched:
    """Compute ``month``'s watch at ``as_of`` from the store and record it."""
    span = Span.of(month, as_of, settings.window_days)
    closed = month_state(store.engine, month) == MonthState.CLOSED
    rules = stored_rules(store.engine)
    document, daily = _answer(store, span, rules.ruleset, WatchParams.from_settings(settings))
    snapshot = record_watch(store.engine, document, actor, closed, daily)
    return Watched(document, closed, snapshot)


def _answer(
    store: Store, span: Span, ruleset: RuleSet, params: WatchParams
) -> tuple[dict[str, Any], pd.DataFrame | None]:
    """The contract's document (empty, with a ``no_data`` warning, before any cost data) and
    the daily figures it was scored on (None before any cost data), which the run keeps for
    the pages' daily chart (:mod:`tenantcost.store.watch_daily`)."""
    head = _head(span, ruleset.currency)
    costs = stored_costs(store, Period(span.first, span.cutoff), tag_batches=True)
    in_month = costs[costs["window_start"] >= span.month.start]
    if in_month.empty:
        detail = f"no cost data stored for {span.month.start:%Y-%m} before {head['as_of']}"
        return {
            **head,
            "clients": [],
            "anomalies": [],
            "rule_changes": [],
            "warnings": [_warning(None, span.month.start, WarningKind.NO_DATA, detail)],
        }, None
    period = Period(costs["window_start"].min(), costs["window_end"].max())
    con = connect()
    sink = DailySink(con, ruleset)
    try:
        allocation = _allocate(store, period, ruleset, costs, con, sink)
        changes = _rule_changes(store, span, ruleset, costs, sink)
    except InputError as exc:  # a stored record refused: name its batch and the repair
        raise name_batches(store.engine, exc) from None
    daily = sink.daily()
    cost_days = _cost_days(in_month)
    scored = score_days(daily, [d for d in span.days if d in cost_days], params)
    gaps = scored.gaps[pd.to_datetime(scored.gaps["day"], utc=True).isin(cost_days)]
    budgets = _budgets(store.engine, head["month"])
    rates = _budget_rates(store, span, ruleset, budgets)
    clients = _clients(span, sink, budgets, in_month, rates, ruleset.currency)
    month_level = _month_warnings(span, in_month, cost_days, allocation.unbilled)
    warnings = [*month_level, *_gap_warnings(gaps)]
    document = {**head, "clients": clients, "anomalies": scored.anomaly_records(),
                "rule_changes": changes, "warnings": warnings}  # fmt: skip
    return document, daily


def _head(span: Span, currency: str) -> dict[str, Any]:
    return {
        "month": f"{span.month.start:%Y-%m}",
        "as_of": iso_z_seconds(span.as_of),
        "money": {"currency": currency, "minor_unit_exponent": MINOR_UNIT_EXPONENT},
    }


@dataclass(frozen=True)
class Allocated:
    """An allocation of the watch and the cluster periods its money is estimated for."""

    result: AllocationResult
    unbilled: pd.DataFrame
    """``cluster, period_start, period_end``: no billed line yet, OpenCost's estimate kept."""


def _allocate(
    store: Store,
    period: Period,
    ruleset: RuleSet,
    costs: pd.DataFrame,
    con: duckdb.DuckDBPyConnection,
    sink: DailySink | None = None,
) -> Allocated:
    """``period`` through the one core, as ``run --allow-unbilled`` allocates it: lagging
    billing data keeps OpenCost's estimate for the hours it does not reach yet."""
    usage = stored_usage(store, period, con)
    billed = stored_billing_run(store, period, con, ruleset, costs, allow_unbilled=True)
    result = allocate_stream(
        billed.costs if billed is not None else costs, usage, ruleset, period=period,
        detail=Detail.PERIOD, rules_origin="stored rules", con=con, lines_sink=sink,
        billed=billed,
    )  # fmt: skip
    unbilled = pd.DataFrame(columns=["cluster", "period_start", "period_end"])
    if billed is not None:
        estimates = billed.repricing[billed.repricing["estimate"].astype(bool)]
        unbilled = estimates[["cluster", "period_start", "period_end"]]
    return Allocated(result, unbilled)


def _day_coverage(costs: pd.DataFrame) -> pd.Series:
    """Seconds covered by cost windows per UTC day (of the window's start)."""
    windows = costs[["window_start", "window_end"]].drop_duplicates()
    seconds = (windows["window_end"] - windows["window_start"]).dt.total_seconds()
    return seconds.groupby(pd.to_datetime(windows["window_start"], utc=True).dt.floor("D")).sum()


def _cost_days(costs: pd.DataFrame) -> set[pd.Timestamp]:
    """The UTC days wholly covered by cost data: only those are scored (a day the costs
    reach only in part would look like a drop of every client)."""
    coverage = _day_coverage(costs)
    return set(coverage.index[coverage >= DAY_SECONDS])


def _covered_seconds(costs: pd.DataFrame) -> int:
    """Seconds of the month covered by cost data, as the allocation counts its hours (the
    distinct cost windows' lengths)."""
    windows = costs[["window_start", "window_end"]].drop_duplicates()
    return round((windows["window_end"] - windows["window_start"]).sum().total_seconds())


def _budgets(bind: Engine | Connection, month: str) -> pd.DataFrame:
    """The month's budget band per client (``tenantcost.store.budgets``); empty, with the
    documented columns, where that module is not there."""
    try:
        from tenantcost.store.budgets import month_budgets
    except ImportError:  # the budgets part is not in this build yet
        return pd.DataFrame({c: pd.Series(dtype="str" if c == "client" else "int64")
                             for c in BUDGET_COLUMNS})  # fmt: skip
    return pd.DataFrame(month_budgets(bind, month))


def _budget_rates(
    store: Store, span: Span, ruleset: RuleSet, budgets: pd.DataFrame
) -> dict[str, tuple[Fraction, bool]]:
    """One ledger unit in each budget currency other than the ledger's, at the month's rates
    to date (:func:`tenantcost.presentation.rate_to_date`, the store's rates), and whether
    that rate is provisional."""
    from tenantcost.presentation import rate_to_date
    from tenantcost.store.run_fx import store_rates

    codes = sorted(set(budgets.get("currency", pd.Series(dtype="str"))) - {ruleset.currency, ""})
    if not codes:
        return {}
    with store.engine.connect() as connection:
        rates = store_rates(connection, ruleset)
    month = f"{span.month.start:%Y-%m}"
    return {c: rate_to_date(ruleset, c, month, span.as_of, (rates.table, rates.source))
            for c in codes}  # fmt: skip


def _clients(
    span: Span,
    sink: DailySink,
    budgets: pd.DataFrame,
    in_month: pd.DataFrame,
    rates: dict[str, tuple[Fraction, bool]] | None = None,
    ledger: str = "",
) -> list[dict[str, Any]]:
    """Each client with a line in the month or a budget for it, by client id. A band in a
    client's own currency is compared with the projection converted into it at the month's
    rates to date (``rates``), rounded once, half to even: scored in the ledger, shown in the
    budget's currency."""
    totals = sink.totals(span.month.start).rename(columns={"amount": "month_to_date"})
    if "currency" not in budgets:
        budgets = budgets.assign(currency="")
    band = budgets[["client", "low", "expected", "high", "currency"]].astype(
        {"client": "str", "low": "Int64", "expected": "Int64", "high": "Int64"}
    )  # nullable integers: a client without a budget never turns money into floats
    frame = totals.merge(band, on="client", how="outer").sort_values("client", kind="stable")
    frame["month_to_date"] = frame["month_to_date"].fillna(0).astype("int64")
    if span.as_of >= span.month.end:
        frame["projected"] = frame["month_to_date"]
    else:
        month_seconds = int((span.month.end - span.month.start).total_seconds())
        covered = _covered_seconds(in_month)
        frame["projected"] = run_rate(frame["month_to_date"].to_numpy(), month_seconds, covered)
    frame["currency"] = frame["currency"].fillna("").astype("str")
    frame["band_projected"] = frame["projected"].astype(object)
    frame["band_to_date"] = frame["month_to_date"].astype(object)
    frame["rate"] = None
    for code, (rate, provisional) in (rates or {}).items():  # one pass per currency: few
        mine = (frame["currency"] == code).to_numpy()
        exact = frame.loc[mine, "projected"].astype(object) * rate.numerator
        frame.loc[mine, "band_projected"] = div_half_even(exact, rate.denominator)
        to_date = frame.loc[mine, "month_to_date"].astype(object) * rate.numerator
        frame.loc[mine, "band_to_date"] = div_half_even(to_date, rate.denominator)
        frame.loc[mine, "rate"] = f"{fraction_text(rate)}{' (provisional)' if provisional else ''}"
    scored = frame.assign(projected=frame["band_projected"].astype("int64"))
    frame["status"] = np.asarray(band_status(scored), dtype=object)
    return [_client_record(row, ledger) for row in frame.to_dict("records")]


def _client_record(row: dict[str, Any], ledger: str) -> dict[str, Any]:
    budget: dict[str, Any] | None = None
    if not pd.isna(row["expected"]):
        budget = {name: int(row[name]) for name in ("low", "expected", "high")}
        budget["currency"] = row["currency"] or ledger
        budget["projected"] = int(row["band_projected"])
        if row["rate"] is not None:
            budget["rate"] = str(row["rate"])
            budget["month_to_date"] = int(row["band_to_date"])
    return {
        "client": str(row["client"]),
        "month_to_date": int(row["month_to_date"]),
        "projected": int(row["projected"]),
        "budget": budget,
        "status": str(row["status"]),
    }


def _rule_changes(
    store: Store, span: Span, ruleset: RuleSet, costs: pd.DataFrame, sink: DailySink
) -> list[dict[str, Any]]:
    """Each version in force from inside the watched part of the month that changes some
    source's split, with its effect per client (non-zero effects only)."""
    splits, _ = source_splits(ruleset)
    versions = sorted(ruleset.rules, key=lambda v: v.effective_from)
    out: list[dict[str, Any]] = []
    for i in range(1, len(versions)):  # one pass per rule version: few
        start = utc(versions[i].effective_from)
        if not span.month.start <= start < span.cutoff:
            continue
        previous, version = versions[i - 1], versions[i]
        if not _changes_split(splits, previous.id, version.id):
            continue
        end = span.cutoff
        if i + 1 < len(versions):
            end = min(end, utc(versions[i + 1].effective_from))
        out += _effects(store, ruleset, costs, sink, (previous.id, version.id), (start, end))
    return out


def _changes_split(splits: pd.DataFrame, previous: str, version: str) -> bool:
    """Whether some keyed source is split otherwise (or only exists) under ``version``."""

    def signed(rule_id: str) -> set[tuple[str, str]]:
        chosen = splits[splits["rule_id"] == rule_id]
        return set(zip(chosen["source"], chosen["split"], strict=True))

    return signed(previous) != signed(version)


def _effects(
    store: Store,
    ruleset: RuleSet,
    costs: pd.DataFrame,
    sink: DailySink,
    ids: tuple[str, str],
    hours: tuple[pd.Timestamp, pd.Timestamp],
) -> list[dict[str, Any]]:
    """Per client: its amount over ``hours`` under the new version (as allocated) minus the
    same hours restated wholly under the previous one, through the same core."""
    previous, version = (next(v for v in ruleset.rules if v.id == i) for i in ids)
    start, end = hours
    window = costs[(costs["window_start"] >= start) & (costs["window_start"] < end)]
    if window.empty:
        return []
    period = Period(window["window_start"].min(), window["window_end"].max())
    restated = _allocate(store, period, only_version(ruleset, previous, start), window,
                         connect()).result.client_totals()  # fmt: skip
    before = restated.astype({"client": "str"}).rename(columns={"amount": "before"})
    after = sink.totals(start, version.id).rename(columns={"amount": "after"})
    both = after.merge(before[["client", "before"]], on="client", how="outer").fillna(0)
    both["effect"] = both["after"].astype("int64") - both["before"].astype("int64")
    both = both[both["effect"] != 0].sort_values("client", kind="stable")
    day = f"{start:%Y-%m-%d}"
    return [{"day": day, "rule_id": version.id, "client": str(c), "effect": int(e)}
            for c, e in zip(both["client"], both["effect"], strict=True)]  # fmt: skip


def _month_warnings(
    span: Span, in_month: pd.DataFrame, cost_days: set[pd.Timestamp], unbilled: pd.DataFrame
) -> list[dict[str, Any]]:
    """``no_costs`` for each complete day of the month without cost data for all its hours;
    ``unbilled`` for each day of the month some cluster's money is OpenCost's estimate on
    (lagging billing data). Month level: they name no client."""
    coverage = _day_coverage(in_month)
    out = [_warning(None, day, WarningKind.NO_COSTS, _no_costs_detail(coverage.get(day, 0)))
           for day in span.days if day not in cost_days]  # fmt: skip
    for cluster, first, last in unbilled.itertuples(index=False):  # per unbilled period: few
        start = max(pd.Timestamp(first).tz_convert("UTC").floor("D"), span.month.start)
        stop = min(pd.Timestamp(last).tz_convert("UTC"), span.cutoff)
        for day in pd.date_range(start, stop - pd.Timedelta(microseconds=1), freq="D"):
            detail = (f"cluster {cluster}: no billed line yet, the day's money is OpenCost's "
                      "estimate (unbilled)")  # fmt: skip
            out.append(_warning(None, day, WarningKind.UNBILLED, detail))
    return out


def _no_costs_detail(seconds: float) -> str:
    if seconds <= 0:
        return "no cost data for this day: it is not scored"
    return (f"cost data covers {seconds / 3600:g} of 24 h of this day (lagging costs): it is "
            "not scored; month_to_date has the hours covered")  # fmt: skip


def _gap_warnings(gaps: pd.DataFrame) -> list[dict[str, Any]]:
    """A client-source day without usage rows: a gap in its data, never a drop."""
    days = pd.to_datetime(gaps["day"], utc=True).dt.strftime("%Y-%m-%d")
    return [{"client": str(c), "day": d, "kind": str(WarningKind.NO_USAGE),
             "detail": f"no usage rows for source {s}: a gap in the data, not scored"}
            for c, s, d in zip(gaps["client"], gaps["source"], days, strict=True)]  # fmt: skip


def _warning(client: str | None, day: pd.Timestamp, kind: WarningKind, detail: str
             ) -> dict[str, Any]:  # fmt: skip
    return {"client": client, "day": f"{day:%Y-%m-%d}", "kind": str(kind), "detail": detail}


__all__ = ["DailySink", "Span", "Watched", "source_splits", "watch_month"]
