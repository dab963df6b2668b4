"""How far a client's figure can be trusted: three measured figures and a grade.

A per-client figure comes with a confidence level (docs/report.md, "Confidence"). A level
without its figures is an opinion, so each criterion keeps the number it was graded on:

* **key spread**: the client's amount under each alternative key (every usage column, and
  ``even`` when the rule file says so) against its amount under the rule,
  ``(max - min) / amount under the rule``. A figure that moves a lot with the key depends on
  the choice of key more than on the client's usage.
* **usage without client id**: for each service the client used, the part of the service's
  measure (under the rule's key; per key if the key changed in the period) that carried no
  client id; the worst service counts. That cost went to nobody, some of it may be this
  client's.
* **hours without usage data**: for each of those services, the hours with a cost but no
  usage row at all (their cost is unattributed), and, where usage is finer than the costs
  (hourly usage, daily costs), the hours of a cost window that no usage row covers (their
  cost follows the other hours' usage); the worst service counts, as a fraction of the
  period's hours.

Each is graded against the bands of the rule file's ``confidence:`` section; the client's level
is the worst grade. All figures are computed for every client at once (vectorised).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from tenantcost.allocate import NO_CLIENT, AllocationResult
from tenantcost.config.confidence import Band, ConfidenceThresholds
from tenantcost.config.keys import EVEN, WeightsKey, describe_key
from tenantcost.config.rules import RuleSet
from tenantcost.kinds import Cause, LineKind
from tenantcost.report.display import key_label
from tenantcost.split import quote
from tenantcost.usage_source import UsageSource, timestamp_literal
from tenantcost.windows import Period, uncovered_hours

GRADES = ("high", "medium", "low")
RULE = "rule"
"""The column of the amounts under the rule as written (each entry with its own key)."""


@dataclass(frozen=True)
class Criterion:
    """One graded figure: ``value`` is a fraction (``inf`` when it cannot be bounded)."""

    name: str
    value: float
    grade: str
    band: Band


@dataclass(frozen=True)
class ClientConfidence:
    """A client's level, its three criteria and the figures behind them."""

    level: str
    spread: Criterion
    no_client: Criterion
    missing: Criterion
    no_client_by_service: dict[str, float]
    missing_hours_by_service: dict[str, float]
    spread_keys: list[str]

    @property
    def criteria(self) -> list[Criterion]:
        return [self.spread, self.no_client, self.missing]


def grade(value: float, band: Band) -> str:
    """``high`` up to ``band.high``, ``medium`` up to ``band.medium``, else ``low``."""
    if value <= band.high:
        return "high"
    if value <= band.medium:
        return "medium"
    return "low"


def worst(grades: list[str]) -> str:
    return max(grades, key=GRADES.index)


def key_amounts(results: Mapping[str, AllocationResult]) -> pd.DataFrame:
    """One row per client, one column per run (in the mapping's order), int64 micro-units."""
    columns = [
        r.client_totals().set_index("client")["amount"].rename(k) for k, r in results.items()
    ]
    frame = pd.concat(columns, axis=1).fillna(0).astype("int64")
    frame.index = frame.index.astype(str)
    return frame.sort_index()


def key_spread(amounts: pd.DataFrame, keys: list[str]) -> pd.Series:
    """``(max - min) / amount under the rule`` over the rule and ``keys``; inf if undefined."""
    considered = amounts[[RULE, *[k for k in keys if k in amounts]]]
    width = (considered.max(axis=1) - considered.min(axis=1)).astype("float64")
    base = amounts[RULE].abs().astype("float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(width == 0, 0.0, width / base)
    return pd.Series(spread, index=amounts.index, dtype="float64")


@dataclass(frozen=True)
class UsageFigures:
    """What the grades need from the usage, aggregated over the period by DuckDB."""

    no_client: pd.Series
    """The share of each (service, key)'s measure that carried no client id."""
    used: dict[str, list[str]]
    """Each client's services with a positive measure in the period (sorted)."""
    uncovered_hours: pd.Series = field(default_factory=lambda: pd.Series(dtype="float64"))
    """Per shared service, the hours inside cost windows with its usage that no usage row
    covers (hourly usage, daily costs: ``tenantcost.windows.uncovered_hours``)."""

    @classmethod
    def none(cls) -> UsageFigures:
        index = pd.MultiIndex.from_tuples([], names=["service", "key"])
        return cls(pd.Series(dtype="float64", index=index), {})


def _key_table(ruleset: RuleSet) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(version span, service, key label, key kind, metric) of each shared service's key in
    each version (the last entry naming a service wins), and the weights of weights keys."""
    specs: dict[tuple[int, str], tuple[object, object, str, str, str]] = {}
    weights: dict[tuple[int, str], dict[str, float]] = {}
    for v, rule in enumerate(ruleset.rules):  # small: one row per version and service
        until = ruleset.rules[v + 1].effective_from if v + 1 < len(ruleset.rules) else None
        for w in rule.workloads:
            if w.class_ != "shared" or w.key is None or w.service is None:
                continue
            kind = "weights" if isinstance(w.key, WeightsKey) else "even" if w.key == EVEN else ""
            metric = w.key if isinstance(w.key, str) else ""
            specs[(v, w.service)] = (rule.effective_from, until, describe_key(w.key), kind, metric)
            if isinstance(w.key, WeightsKey):
                weights[(v, w.service)] = {c: float(x) for c, x in w.key.weights.items()}
            else:
                weights.pop((v, w.service), None)
    key_rows = [(v, s, *spec) for (v, s), spec in specs.items()]
    keys = pd.DataFrame(
        key_rows, columns=["version", "service", "since", "until", "key", "kind", "metric"]
    ).astype({"version": "int64", "service": str, "key": str, "kind": str, "metric": str})
    for column in ("since", "until"):
        keys[column] = pd.to_datetime(keys[column], utc=True)
    weight_rows = [(v, s, c, x) for (v, s), ws in weights.items() for c, x in ws.items()]
    frame = pd.DataFrame(weight_rows, columns=["version", "service", "client", "weight"])
    return keys, frame.astype(
        {"version": "int64", "service": str, "client": str, "weight": "float64"}
    )


def _measure_sql(relation: str, metrics: list[str], period: Period) -> str:
    """Each usage row of ``period`` with its measure under the key its service has in the
    version in force at its start, and that key's label (``''`` when none): measures under
    different keys are never added up."""
    active = " OR ".join(f"{quote(m)} > 0" for m in metrics) or "true"
    by_metric = "".join(f" WHEN {_text(m)} THEN CAST(u.{quote(m)} AS DOUBLE)" for m in metrics)
    return f"""
        WITH u AS (
            SELECT *, ({active}) AS active FROM ({relation})
            WHERE window_start >= {timestamp_literal(period.start)}
              AND window_end <= {timestamp_literal(period.end)})
        SELECT u.service, u.client, u.active, coalesce(k.key, '') AS key,
               CASE WHEN k.kind IS NULL THEN 0.0
                    WHEN NOT u.active AND k.kind IN ('weights', 'even') THEN 0.0
                    WHEN k.kind = 'weights' THEN coalesce(w.weight, 0.0)
                    WHEN k.kind = 'even' THEN 1.0
                    ELSE CASE k.metric{by_metric} ELSE 0.0 END END AS measure
        FROM u
        LEFT JOIN conf_keys k ON k.service = u.service AND u.window_start >= k.since
             AND (k.until IS NULL OR u.window_start < k.until)
        LEFT JOIN conf_weights w ON w.version = k.version AND w.service = k.service
             AND w.client = u.client"""


def usage_figures(
    source: UsageSource | None,
    con: duckdb.DuckDBPyConnection,
    ruleset: RuleSet,
    period: Period,
    cost_windows: pd.DataFrame | None = None,
) -> UsageFigures:
    """No-client share per (service, key) and each client's services, over the period.

    DuckDB aggregates over the usage source, so a Parquet dataset of a month is never held in
    memory. A service whose key changed within the period gets one share per key, since
    requests and CPU seconds cannot be added up.
    """
    if source is None:
        return UsageFigures.none()
    keys, weights = _key_table(ruleset)
    con.register("conf_keys", keys)
    con.register("conf_weights", weights)
    try:
        measured = _measure_sql(source.relation(con), source.metrics, period)
        sums = con.execute(
            f"SELECT service, key, fsum(CASE WHEN client = {_text(NO_CLIENT)} THEN measure "
            f"ELSE 0.0 END) AS no_client, fsum(measure) AS measure FROM ({measured}) "
            "GROUP BY service, key ORDER BY service, key"
        ).df()
        used = con.execute(
            f"SELECT client, list(DISTINCT service ORDER BY service) AS services "
            f"FROM ({measured}) WHERE active AND client <> {_text(NO_CLIENT)} GROUP BY client"
        ).fetchall()
    finally:
        con.unregister("conf_keys")
        con.unregister("conf_weights")
    if sums.empty:
        return UsageFigures.none()
    index = pd.MultiIndex.from_frame(sums[["service", "key"]].astype(str))
    measure = sums["measure"].where(sums["measure"] > 0)
    share = (sums["no_client"] / measure).fillna(0.0).set_axis(index).astype("float64")
    shared = sorted({s for r in ruleset.rules for s in r.shared_services})
    uncovered = (
        uncovered_hours(con, source.relation(con), cost_windows, period, shared, source.metrics)
        if cost_windows is not None
        else pd.Series(dtype="float64")
    )
    used_by = {str(c): [str(s) for s in services] for c, services in used}
    return UsageFigures(share, used_by, uncovered)


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _no_client_labels(share: pd.Series) -> dict[tuple[str, str], str]:
    """``api``, or ``api (requests)`` when the service had several keys in the period."""
    services = share.index.get_level_values("service")
    counts = pd.Series(services).value_counts()
    return {(s, k): s if counts[s] == 1 else f"{s} ({key_label(k)})" for s, k in share.index}


def missing_hours(result: AllocationResult, ruleset: RuleSet) -> pd.Series:
    """Hours per shared service in which it had a cost but no usage row (index: service)."""
    names = {
        (rule.id, rule.source_name(j)): w.service
        for rule in ruleset.rules
        for j, w in enumerate(rule.workloads)
        if w.class_ == "shared"
    }
    gaps = result.unattributed
    gaps = gaps[(gaps["cause"] == Cause.NO_USAGE) & (gaps["kind"] == LineKind.SHARED)]
    if gaps.empty:
        return pd.Series(dtype="float64")
    service = pd.Series(
        [names.get((r, s), s) for r, s in zip(gaps["rule_id"], gaps["source"], strict=True)],
        index=gaps.index,
    )
    windows = gaps.assign(service=service).drop_duplicates(
        ["service", "window_start", "window_end"]
    )
    hours = (windows["window_end"] - windows["window_start"]) / pd.Timedelta(hours=1)
    return hours.groupby(windows["service"]).sum().astype("float64")


def assess(
    base: AllocationResult,
    amounts: pd.DataFrame,
    figures: UsageFigures,
    ruleset: RuleSet,
    thresholds: ConfidenceThresholds,
) -> dict[str, ClientConfidence]:
    """Grade every client of ``amounts`` (see :func:`key_amounts`; first column the rule)."""
    alternatives = [k for k in amounts.columns if k != RULE]
    keys = [k for k in alternatives if k != EVEN or thresholds.spread_includes_even]
    spread = key_spread(amounts, keys)
    no_client = figures.no_client
    labels = _no_client_labels(no_client)
    gaps = missing_hours(base, ruleset).add(figures.uncovered_hours, fill_value=0.0)
    shared_services = sorted({s for r in ruleset.rules for s in r.shared_services})
    no_usage_known = not figures.used
    out: dict[str, ClientConfidence] = {}
    for client in amounts.index:  # per client: pick its services and grade three numbers
        services = shared_services if no_usage_known else figures.used.get(str(client), [])
        nc = {labels[(s, k)]: float(v) for (s, k), v in no_client.items() if s in set(services)}
        mh = {s: float(gaps.get(s, 0.0)) for s in services}
        nc_value = max(nc.values(), default=0.0)
        mh_value = max(mh.values(), default=0.0) / base.hours if base.hours else 0.0
        sp = float(spread[client])
        criteria = (
            Criterion("key spread", sp, grade(sp, thresholds.key_spread), thresholds.key_spread),
            Criterion(
                "usage without client id",
                nc_value,
                grade(nc_value, thresholds.no_client_share),
                thresholds.no_client_share,
            ),
            Criterion(
                "hours without usage data",
                mh_value,
                grade(mh_value, thresholds.missing_hours),
                thresholds.missing_hours,
            ),
        )
        out[str(client)] = ClientConfidence(
            level=worst([c.grade for c in criteria]),
            spread=criteria[0],
            no_client=criteria[1],
            missing=criteria[2],
            no_client_by_service=nc,
            missing_hours_by_service=mh,
            spread_keys=keys,
        )
    return out
