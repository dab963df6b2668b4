"""How far a client's figure can be trusted: three measured figures and a grade.

DOMAIN.md asks that a per-client figure come with a confidence level. A level without its
figures is an opinion, so each criterion keeps the number it was graded on:

* **key spread**: the client's amount under each alternative key (every usage column, and
  ``even`` when the rule file says so) against its amount under the rule,
  ``(max - min) / amount under the rule``. A figure that moves a lot with the key depends on
  the choice of key more than on the client's usage.
* **usage without client id**: for each service the client used, the part of the service's
  measure (under the rule's key; per key if the key changed in the period) that carried no
  client id; the worst service counts. That cost went to nobody, some of it may be this
  client's.
* **hours without usage data**: for each of those services, the hours with a cost but no
  usage row at all (their cost is unattributed); the worst service counts, as a fraction of
  the period's hours.

Each is graded against the bands of the rule file's ``confidence:`` section; the client's level
is the worst grade. All figures are computed for every client at once (vectorised).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tenantcost.allocate import CAUSE_NO_USAGE, NO_CLIENT, AllocationResult
from tenantcost.config.confidence import Band, ConfidenceThresholds
from tenantcost.config.rules import EVEN, RuleSet, WeightsKey, describe_key
from tenantcost.report.display import key_label
from tenantcost.tables import metric_columns
from tenantcost.windows import select_period

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


def _rule_measure(usage: pd.DataFrame, ruleset: RuleSet) -> tuple[pd.Series, pd.Series]:
    """Each usage row's measure under the key its service has in the version in force, and
    that key's label (measures under different keys are never added up)."""
    metrics = metric_columns(usage)
    version = ruleset.version_index(usage["window_start"])
    active = usage[metrics].gt(0).any(axis=1) if metrics else pd.Series(False, index=usage.index)
    measure = pd.Series(0.0, index=usage.index)
    key = pd.Series("", index=usage.index, dtype="str")
    for v, rule in enumerate(ruleset.rules):  # one pass per rule entry, vectorised over rows
        for w in rule.workloads:
            if w.class_ != "shared" or w.key is None:
                continue
            rows = (version == v) & (usage["service"] == w.service)
            key[rows] = describe_key(w.key)
            if isinstance(w.key, WeightsKey):
                weights = usage.loc[rows, "client"].map(w.key.weights).fillna(0.0)
                measure[rows] = weights.where(active[rows], 0.0)
            elif w.key == EVEN:
                measure[rows] = active[rows].astype("float64")
            elif w.key in usage:
                measure[rows] = usage.loc[rows, w.key].astype("float64")
    return measure, key


def service_figures(
    usage: pd.DataFrame | None, ruleset: RuleSet, result: AllocationResult
) -> tuple[pd.Series, pd.DataFrame]:
    """(no-client share per service and key, client x service usage flags) in the period.

    The share's index is (service, key): a service whose key changed within the period gets
    one share per key, since requests and CPU seconds cannot be added up.
    """
    empty = pd.Series(
        dtype="float64", index=pd.MultiIndex.from_tuples([], names=["service", "key"])
    )
    if usage is None or usage.empty:
        return empty, pd.DataFrame(dtype=bool)
    used = select_period(usage, result.period, "usage")
    if used.empty:
        return empty, pd.DataFrame(dtype=bool)
    measure, key = _rule_measure(used, ruleset)
    frame = pd.DataFrame(
        {
            "service": used["service"],
            "key": key,
            "no_client": measure.where(used["client"] == NO_CLIENT, 0.0),
            "measure": measure,
        }
    )
    sums = frame.groupby(["service", "key"], sort=True)[["no_client", "measure"]].sum()
    share = (sums["no_client"] / sums["measure"].where(sums["measure"] > 0)).fillna(0.0)
    metrics = metric_columns(used)
    active = used[metrics].gt(0).any(axis=1) if metrics else pd.Series(True, index=used.index)
    flags = (
        used[active & (used["client"] != NO_CLIENT)]
        .assign(flag=True)
        .pivot_table(index="client", columns="service", values="flag", aggfunc="any")
        .fillna(False)
        .astype(bool)
    )
    return share, flags


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
    gaps = gaps[(gaps["cause"] == CAUSE_NO_USAGE) & (gaps["kind"] == "shared")]
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
    usage: pd.DataFrame | None,
    ruleset: RuleSet,
    thresholds: ConfidenceThresholds,
) -> dict[str, ClientConfidence]:
    """Grade every client of ``amounts`` (see :func:`key_amounts`; first column the rule)."""
    alternatives = [k for k in amounts.columns if k != RULE]
    keys = [k for k in alternatives if k != EVEN or thresholds.spread_includes_even]
    spread = key_spread(amounts, keys)
    no_client, flags = service_figures(usage, ruleset, base)
    labels = _no_client_labels(no_client)
    gaps = missing_hours(base, ruleset)
    shared_services = sorted({s for r in ruleset.rules for s in r.shared_services})
    no_usage_known = flags.empty
    out: dict[str, ClientConfidence] = {}
    for client in amounts.index:  # per client: pick its services and grade three numbers
        if no_usage_known:
            services = shared_services
        elif client in flags.index:
            services = [str(s) for s in flags.columns[flags.loc[client].to_numpy()]]
        else:
            services = []
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
