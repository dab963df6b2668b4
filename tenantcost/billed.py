"""Billed lines: classified and summed in DuckDB, then turned into pools and cost rows.

Billing data is large (10 M lines a month is common) and exact (decimals with up to 10 places,
more than the currency's minor unit). So the lines are read once, in DuckDB, and summed into a
small grouped table (:func:`group_billing`): per charge period, invoice, charge category and
commitment type, the cluster a line belongs to (``billing.clusters``, first match) or the
rule version and ``billed:`` entry that classify it. Everything after works on that table:

* a line is classified by the rule version in force when its charge period starts (a monthly
  line is one line: it is not reclassified mid-month), first matching entry wins;
* each (version, entry, client, charge period) group is **rounded once**, half-even to the
  micro-unit, from its exact decimal sum, and then spread over the hours of its charge period
  by largest remainder (equal weights, sign kept, leftover units to the earliest hours), so a
  daily line becomes 24 hourly amounts and a whole billing period adds up to the line;
* an hour's amount joins the OpenCost window that contains it (an hour with none is its own
  one-hour window, for the billed amounts only: the rule file's external costs follow the
  cost data, ``tenantcost.plan``), inside the allocation period; hours outside it are
  reported on the invoice as ``outside the period``;
* ``shared`` entries become keyed pools (kind ``billed``), split by their key over the usage
  of their ``services`` as external costs are; ``direct`` entries become the client's own
  lines; residual, excluded and unclassified entries become items; ``outside`` lines stand in
  the invoice cascade only, at their billed cost.

Totals for the invoice (``billed_total``, each invoice, the billed-minus-effective bridge) are
rounded once each from the same exact sums (:func:`billing_totals`).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd

from tenantcost.billing_match import (
    TAG_VALUES,
    first_match_sql,
    literal,
    match_tags,
    tag_expression,
    tag_values,
)
from tenantcost.client_id import client_id_problem
from tenantcost.config.rules import RuleSet
from tenantcost.errors import InputError
from tenantcost.kinds import CostClass

GROUPS = "billing_groups"
"""The grouped billing table left on the connection by :func:`group_billing`."""
NO_CLUSTER = -1
HOUR = pd.Timedelta(hours=1)


def micros_sql(expression: str) -> str:
    """An exact decimal rounded half-even to micro-units, as a BIGINT."""
    return f"(round_even({expression}, 6) * 1000000)::BIGINT"


def _version_sql(ruleset: RuleSet) -> str:
    """The index of the rule version in force at each line's ChargePeriodStart (-1 before)."""
    whens = " ".join(
        f"WHEN ChargePeriodStart >= {literal(r.effective_from.isoformat())}::TIMESTAMPTZ THEN {v}"
        for v, r in reversed(list(enumerate(ruleset.rules)))
    )
    return f"(CASE {whens} ELSE -1 END)::INTEGER"


def _entry_sql(ruleset: RuleSet, tags: list[str]) -> str:
    """The index of the first ``billed:`` entry of the line's version that matches it."""
    whens = " ".join(
        f"WHEN version = {v} THEN {first_match_sql([b.match for b in r.billed], tags)}"
        for v, r in enumerate(ruleset.rules)
    )
    return f"(CASE {whens} ELSE NULL END)::INTEGER"


def _client_sql(ruleset: RuleSet, tags: list[str]) -> str:
    """The client of a direct line: its entry's ``client:``, or the value of the tag its
    ``client_from:`` names (``''`` when the tag is absent or empty); ``''`` otherwise."""
    whens: list[str] = []
    for v, r in enumerate(ruleset.rules):
        for j, b in enumerate(r.billed):
            if b.class_ != CostClass.DIRECT:
                continue
            value = (
                literal(b.client)
                if b.client is not None
                else f"coalesce({tag_expression(b.client_from.tag, tags)}, '')"  # type: ignore[union-attr]
            )
            whens.append(f"WHEN version = {v} AND entry = {j} THEN {value}")
    return f"(CASE {' '.join(whens)} ELSE '' END)" if whens else "''"


def _unclassified_names(ruleset: RuleSet) -> bool:
    return any(r.unmatched_billed == "unclassified" for r in ruleset.rules)


def classified_sql(view: str, ruleset: RuleSet) -> str:
    """Every line of ``view`` with its ``cluster`` (index in ``billing.clusters``, -1 for
    none), ``version`` (-1 before the first), ``entry`` (NULL: a cluster line, or no entry
    matched) and ``client`` (of direct entries, else ``''``)."""
    clusters = ruleset.billing.clusters if ruleset.billing is not None else []
    tags = _read_tags(ruleset)
    cluster = first_match_sql([c.match for c in clusters], tags)
    return f"""(
        WITH tagged AS (
            SELECT *, {tag_values(tags)} AS {TAG_VALUES} FROM {view}
        ), located AS (
            SELECT *, coalesce({cluster}, {NO_CLUSTER}) AS cluster,
                   {_version_sql(ruleset)} AS version
            FROM tagged
        ), classified AS (
            SELECT *, CASE WHEN cluster = {NO_CLUSTER} THEN {_entry_sql(ruleset, tags)} END
                AS entry
            FROM located
        )
        SELECT * EXCLUDE ({TAG_VALUES}), {_client_sql(ruleset, tags)} AS client FROM classified
    )"""


def _read_tags(ruleset: RuleSet) -> list[str]:
    """Every tag the classification reads: the clusters' and entries' matches, the direct
    entries' ``client_from`` tags."""
    clusters = ruleset.billing.clusters if ruleset.billing is not None else []
    matches = [c.match for c in clusters] + [b.match for r in ruleset.rules for b in r.billed]
    tags = match_tags(matches)
    for r in ruleset.rules:
        for b in r.billed:
            if b.client_from is not None and b.client_from.tag not in tags:
                tags.append(b.client_from.tag)
    return tags


def group_billing(
    con: duckdb.DuckDBPyConnection, view: str, ruleset: RuleSet, *, checked: bool = False
) -> None:
    """One scan of the billing view into the small table :data:`GROUPS`.

    Columns: ``s, e`` (charge period), ``invoice``, ``category``, ``commitment``,
    ``cluster``, ``version``, ``entry``, ``client`` (as :func:`classified_sql`), ``service``
    (ServiceName, kept only when a version names unmatched lines by it), ``billed``,
    ``effective`` (exact sums) and ``n``.
    """
    service = "ServiceName" if _unclassified_names(ruleset) else "''"
    # with ``checked``, ``view`` carries the reader's ``x_problem``: counted in this one scan
    problems = "count(*) FILTER (WHERE x_problem IS NOT NULL)" if checked else "0"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {GROUPS} AS
        SELECT ChargePeriodStart AS s, ChargePeriodEnd AS e, InvoiceId AS invoice,
               ChargeCategory AS category, CommitmentDiscountType AS commitment, cluster,
               version, entry, client, {service} AS service,
               sum(BilledCost) AS billed, sum(EffectiveCost) AS effective, count(*) AS n,
               {problems} AS problems,
               min(BillingCurrency) AS currency_low, max(BillingCurrency) AS currency_high
        FROM {classified_sql(view, ruleset)}
        GROUP BY ALL
        """
    )


def needs_check(con: duckdb.DuckDBPyConnection, currency: str) -> bool:
    """Whether the grouped lines hold a problem the reader would refuse (a bad cell, a
    period out of order, another currency): then the reader's own check names it."""
    found = con.execute(
        f"SELECT coalesce(sum(problems), 0), min(currency_low), max(currency_high) FROM {GROUPS}"
    ).fetchall()[0]
    problems, low, high = found
    return bool(problems) or (low is not None and not (low == high == currency))


@dataclass(frozen=True)
class BilledTotals:
    """What the invoice cascade needs straight from the billing rows, each rounded once."""

    rounded_groups: int
    """How many groups were rounded on their own (a bound on the ``rounding`` line)."""
    billed_total: int
    invoices: list[tuple[str, int]]
    bridge: list[tuple[str, int]]
    outside: list[tuple[str, int]]


def billing_totals(con: duckdb.DuckDBPyConnection, ruleset: RuleSet) -> BilledTotals:
    """``billed_total``, each invoice's total, the billed-minus-effective bridge per charge
    category (and commitment type, for usage) over lines not ``outside``, and each outside
    entry at its billed cost."""
    found = con.execute(f"SELECT {micros_sql('coalesce(sum(billed), 0)')} FROM {GROUPS}")
    total = found.fetchall()
    invoices = con.execute(
        f"SELECT invoice, {micros_sql('sum(billed)')} FROM {GROUPS} GROUP BY invoice "
        "ORDER BY invoice"
    ).fetchall()
    outside = _outside_sql(ruleset)
    bridge = con.execute(
        f"""
        SELECT CASE WHEN category = 'Usage' AND commitment <> ''
                    THEN category || ' / ' || commitment ELSE category END AS name,
               {micros_sql("sum(billed - effective)")} AS amount
        FROM {GROUPS} WHERE NOT ({outside}) GROUP BY name HAVING amount <> 0 ORDER BY name
        """
    ).fetchall()
    labels = _entry_labels(ruleset)
    by_entry = con.execute(
        f"SELECT version, entry, {micros_sql('sum(billed)')} FROM {GROUPS} WHERE {outside} "
        "GROUP BY version, entry"
    ).fetchall()
    summed: dict[str, int] = {}
    for v, j, amount in by_entry:
        summed[labels[(int(v), int(j))]] = summed.get(labels[(int(v), int(j))], 0) + int(amount)
    groups = con.execute(
        f"SELECT count(*) FROM (SELECT DISTINCT s, e, version, entry, client, service "
        f"FROM {GROUPS})"
    ).fetchall()
    return BilledTotals(
        rounded_groups=int(groups[0][0]) if groups else 0,
        billed_total=int(total[0][0]) if total else 0,
        invoices=[(str(i), int(a)) for i, a in invoices],
        bridge=[(str(n), int(a)) for n, a in bridge],
        outside=sorted(summed.items()),
    )


def _entry_labels(ruleset: RuleSet) -> dict[tuple[int, int], str]:
    return {(v, j): b.label for v, r in enumerate(ruleset.rules) for j, b in enumerate(r.billed)}


def _outside_sql(ruleset: RuleSet) -> str:
    pairs = [
        f"(version = {v} AND entry = {j})"
        for v, r in enumerate(ruleset.rules)
        for j, b in enumerate(r.billed)
        if b.class_ == "outside"
    ]
    # entry is NULL on cluster lines: coalesce, or NOT (...) would drop them from the bridge
    return "coalesce(" + " OR ".join(pairs) + ", FALSE)" if pairs else "FALSE"


def check_classified(
    con: duckdb.DuckDBPyConnection, view: str, ruleset: RuleSet, origin: str
) -> None:
    """Refuse charge periods off whole hours, lines before the first rule version, lines no
    entry matches where the version says ``unmatched_billed: error``, and direct clients the
    store would refuse; each error names the first such line's file and row."""
    lines = classified_sql(view, ruleset)
    checks: list[tuple[str, str, str]] = [
        (
            "epoch(s) % 3600 <> 0 OR epoch(e) % 3600 <> 0 OR e <= s",
            "epoch(ChargePeriodStart) % 3600 <> 0 OR epoch(ChargePeriodEnd) % 3600 <> 0 "
            "OR ChargePeriodEnd <= ChargePeriodStart",
            "the charge period must start and end on whole UTC hours, and end after it starts",
        ),
        (
            "version < 0",
            "version < 0",
            f"the charge period starts before the first rule version '{ruleset.rules[0].id}' "
            f"(effective_from {ruleset.rules[0].effective_from.date()})",
        ),
    ]
    for v, r in enumerate(ruleset.rules):
        if r.unmatched_billed == "error":
            checks.append(
                (
                    f"cluster = {NO_CLUSTER} AND version = {v} AND entry IS NULL",
                    f"cluster = {NO_CLUSTER} AND version = {v} AND entry IS NULL",
                    "the billed line matches no billing.clusters entry and no billed: entry of "
                    f"rule '{r.id}' (add one, or set unmatched_billed: unclassified)",
                )
            )
    for on_groups, on_lines, message in checks:
        hit = con.execute(f"SELECT count(*) FROM {GROUPS} WHERE {on_groups}").fetchall()
        if hit and hit[0][0]:
            column = (
                "ChargePeriodStart"
                if "version < 0" in on_groups or "epoch" in on_groups
                else "ServiceName"
            )
            _raise_first(con, lines, on_lines, message, column, origin)
    clients = [str(c) for (c,) in con.execute(f"SELECT DISTINCT client FROM {GROUPS}").fetchall()]
    for client in sorted(clients):  # the distinct direct clients: few
        problem = client_id_problem(client)
        if problem:
            _raise_first(
                con,
                lines,
                f"client = {literal(client)}",
                f"the client named by the tag is refused: {problem}",
                "Tags",
                origin,
            )


def _raise_first(
    con: duckdb.DuckDBPyConnection,
    view: str,
    predicate: str,
    message: str,
    column: str,
    origin: str,
) -> None:
    row = con.execute(
        f"SELECT x_file, x_row FROM {view} WHERE {predicate} ORDER BY x_file, x_row LIMIT 1"
    ).fetchall()
    if not row:
        raise InputError(message, file=origin, column=column)
    raise InputError(message, file=str(row[0][0]), where=f"row {int(row[0][1])}", column=column)


@dataclass(frozen=True)
class BilledHours:
    """The rounded, hour-spread amounts of every billed entry group outside the clusters.

    ``hours``: ``hour, version, entry, client, service, amount`` (int64 micro-units), every
    hour of every group's charge period; ``rounded``: the sum of the groups' rounded amounts
    (equal to ``hours.amount.sum()``, kept for the invoice's rounding line).
    """

    hours: pd.DataFrame
    rounded: int


def billed_hours(con: duckdb.DuckDBPyConnection, ruleset: RuleSet) -> BilledHours:
    """Round each (version, entry, client, charge period) group once and spread it over
    the hours of its charge period (largest remainder: leftover units to the earliest)."""
    outside = _outside_sql(ruleset)
    frame = con.execute(
        f"""
        WITH g AS (
            SELECT s, e, version, entry, client, service, {micros_sql("sum(effective)")} AS a,
                   ((epoch(e) - epoch(s)) // 3600)::BIGINT AS n
            FROM {GROUPS}
            WHERE cluster = {NO_CLUSTER} AND version >= 0 AND NOT ({outside})
            GROUP BY s, e, version, entry, client, service
        ), spread AS (
            SELECT s, version, entry, client, service, a, n, unnest(range(n)) AS i FROM g
            WHERE n > 0
        )
        SELECT s + to_hours(i) AS hour, version, coalesce(entry, -1) AS entry, client, service,
               (sign(a) * (abs(a) // n + CASE WHEN i < abs(a) % n THEN 1 ELSE 0 END))::BIGINT
                   AS amount
        FROM spread
        """
    ).df()
    rounded = con.execute(
        f"""SELECT coalesce(sum(a), 0)::BIGINT FROM (
            SELECT {micros_sql("sum(effective)")} AS a FROM {GROUPS}
            WHERE cluster = {NO_CLUSTER} AND version >= 0 AND NOT ({outside})
            GROUP BY s, e, version, entry, client, service)"""
    ).fetchall()
    frame["hour"] = pd.to_datetime(frame["hour"], utc=True).dt.as_unit("ns")
    return BilledHours(frame, int(rounded[0][0]) if rounded else 0)


def hours_to_windows(hours: pd.Series, cost_windows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each hour's window: the cost window containing it, else the hour itself (a binary
    search over the sorted, non-overlapping windows, on int64 nanoseconds)."""
    h = pd.DatetimeIndex(hours).as_unit("ns").asi8
    starts, ends, inside = _containing(h, cost_windows)
    start = np.where(inside, starts, h)
    end = np.where(inside, ends, h + HOUR.value)
    return (
        pd.Series(pd.to_datetime(start, utc=True), index=hours.index),
        pd.Series(pd.to_datetime(end, utc=True), index=hours.index),
    )


def without_cost_window(hours: pd.Series, cost_windows: pd.DataFrame) -> np.ndarray:
    """Whether each hour lies in no cost window: an hour billed without cost data, whose
    one-hour window carries the billed amounts only (no external cost)."""
    _, _, inside = _containing(pd.DatetimeIndex(hours).as_unit("ns").asi8, cost_windows)
    return ~inside


def _containing(h: np.ndarray, cost_windows: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """For int64 hour starts ``h``: the start and end of the cost window containing each
    (meaningful where ``inside``), and ``inside``."""
    starts = pd.DatetimeIndex(cost_windows["window_start"]).as_unit("ns").asi8
    ends = pd.DatetimeIndex(cost_windows["window_end"]).as_unit("ns").asi8
    if not len(starts):
        return h, h, np.zeros(len(h), dtype=bool)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    safe = np.clip(np.searchsorted(starts, h, side="right") - 1, 0, None)
    inside = (h >= starts[safe]) & (h < ends[safe])
    return starts[safe], ends[safe], inside
