"""Live sources into the store: usage from Prometheus, costs from the OpenCost API, and the
hourly job that ingests every complete hour since the last ingested one.

The sources are read by the same readers as ``allocate`` (:func:`tenantcost.inputs.
prometheus_usage`, :func:`tenantcost.collect.opencost_source` and
:func:`tenantcost.readers.opencost_api.collect_allocations`), so a query, a retry or an error
behaves here as it does there; the result is stored by :mod:`tenantcost.store.ingest` as one
batch, like a file.

**Which settings.** ``sources.prometheus`` (and ``sources.opencost`` for its step, auth and
aggregation) come from ``--config RULES`` when given, else from the latest rule file stored
in the store (the one ``run`` takes its settings from).

**Since last** (:func:`since_last`). Per kind (costs, usage) and per source (each OpenCost
URL; the Prometheus), the last ingested hour is the end of the latest window of that
source's committed batches' cells: one cluster's pull, a file, the meter or OTLP never
moves another source past hours it has not delivered (one cluster's outage never skips
another's hours).
The job asks its source for ``[that end, now floored to the hour)`` and stores the answer as
one ``replace`` batch of that period. An hour the source had nothing for is asked again next
time, until a later hour arrives. A store with nothing ingested of a kind has no "last":
the first ingest names its period (``--from/--to`` or ``--month``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pandas as pd
from sqlalchemy import Engine, func, select

from tenantcost.config.metrics import Metric
from tenantcost.config.rules import RuleSet, load_rules
from tenantcost.config.sources import OpenCostSource
from tenantcost.errors import InputError
from tenantcost.store.data import Store
from tenantcost.store.ingest import Ingested, ingest_cost_table, ingest_usage_source
from tenantcost.store.models import Batch, BatchCell, RuleFile, table
from tenantcost.store.samples import store_samples
from tenantcost.store.usage_metrics import stored_gauges
from tenantcost.timefmt import iso_z_seconds
from tenantcost.usage_source import FrameUsage
from tenantcost.windows import Period


class Kind(StrEnum):
    """What a batch holds (``batch.kind``)."""

    COSTS = "costs"
    USAGE = "usage"


@dataclass(frozen=True)
class Skipped:
    """A source the hourly job asked nothing of, or that had nothing: why, in one line."""

    kind: Kind
    reason: str


def ruleset_for_sources(engine: Engine, config: Path | None) -> RuleSet | None:
    """The rule file whose ``sources:`` apply: ``--config`` when given, else the latest stored
    rule file (with every stored rule version), else ``None`` (the store holds no rules)."""
    if config is not None:
        return load_rules(config)
    from tenantcost.store.month_inputs import stored_rules

    with engine.connect() as connection:
        held = connection.execute(select(func.count()).select_from(table(RuleFile))).scalar()
    return stored_rules(engine).ruleset if held else None


def require_prometheus(ruleset: RuleSet | None, config: Path | None) -> RuleSet:
    """The rule set, which must configure ``sources.prometheus``."""
    where = str(config) if config is not None else "the latest stored rule file"
    if ruleset is None:
        raise InputError(
            "--prometheus reads sources.prometheus of the rule file: the store holds no rules; "
            "run `tenantcost rules load RULES.yaml` first or give --config RULES"
        )
    if ruleset.sources.prometheus is None:
        raise InputError(f"--prometheus: sources.prometheus is not set in {where}")
    return ruleset


def opencost(ruleset: RuleSet | None, url: str | None) -> OpenCostSource | None:
    """``sources.opencost`` with ``--opencost-url`` over it (``None``: no URL anywhere)."""
    from tenantcost.collect import opencost_source

    return opencost_source(ruleset, url)


@dataclass(frozen=True)
class Options:
    """How a live source's rows are stored (as ``ingest usage|costs`` takes them)."""

    mode: str
    actor: str
    dry_run: bool = False
    wait: float = 0.0


def prometheus_rows(ruleset: RuleSet, period: Period, gauges: Sequence[str] = ()) -> FrameUsage:
    """``sources.prometheus``'s counters of ``period`` (the reader ``allocate`` uses; the
    ``gauges`` are sampled apart, :func:`prometheus_samples`)."""
    from tenantcost.readers.prometheus import read_prometheus_usage

    prometheus = ruleset.sources.prometheus
    assert prometheus is not None
    frame = read_prometheus_usage(prometheus, period.start, period.end, gauges)
    return FrameUsage(frame, origin=usage_origin(ruleset))


def prometheus_gauges(store: Store, ruleset: RuleSet) -> dict[str, Metric]:
    """The store's declared gauges that ``sources.prometheus`` has a query for."""
    prometheus = ruleset.sources.prometheus
    assert prometheus is not None
    with store.engine.connect() as conn:
        return {g: m for g, m in stored_gauges(conn).items() if g in prometheus.queries}


def _store_prometheus_samples(
    store: Store, ruleset: RuleSet, gauges: dict[str, Metric], period: Period, options: Options
) -> Ingested | Skipped:
    """The gauges' samples of ``period`` (one per series and step) as one sample batch."""
    from tenantcost.readers.prometheus import read_prometheus_samples

    prometheus = ruleset.sources.prometheus
    assert prometheus is not None
    samples = read_prometheus_samples(prometheus, list(gauges), period.start, period.end)
    if samples.empty:
        return _nothing_new(Kind.USAGE, period)
    return store_samples(store, samples, gauges, origin=usage_origin(ruleset),
                         actor=options.actor, dry_run=options.dry_run,
                         wait=options.wait)  # fmt: skip


def opencost_rows(source: OpenCostSource, period: Period) -> pd.DataFrame:
    """The OpenCost API's canonical cost table of ``period`` (the reader ``allocate`` uses)."""
    from tenantcost.readers.opencost_api import collect_allocations

    return collect_allocations(source, period.start, period.end).costs


def ingest_prometheus(
    store: Store, ruleset: RuleSet, period: Period, options: Options
) -> list[Ingested | Skipped]:
    """Ingest ``sources.prometheus``'s usage of ``period``: its counters as one batch, and
    the store's gauges it has a query for as one batch of samples."""
    prometheus = ruleset.sources.prometheus
    assert prometheus is not None
    gauges = prometheus_gauges(store, ruleset)
    done: list[Ingested | Skipped] = []
    if any(c not in gauges for c in prometheus.queries):
        done.append(_store_usage(store, prometheus_rows(ruleset, period, list(gauges)), period,
                                 options))  # fmt: skip
    if gauges:
        done.append(_store_prometheus_samples(store, ruleset, gauges, period, options))
    return done


def ingest_opencost(
    store: Store, source: OpenCostSource, period: Period, options: Options
) -> Ingested:
    """Ingest the OpenCost API's costs of ``period`` as one batch."""
    return _store_costs(store, source, opencost_rows(source, period), period, options)


def _store_usage(store: Store, rows: FrameUsage, period: Period, options: Options) -> Ingested:
    from tenantcost.store.ingest import _connect

    return ingest_usage_source(store, rows, _connect(), period=period, mode=options.mode,
                               actor=options.actor, dry_run=options.dry_run,
                               wait=options.wait)  # fmt: skip


def _store_costs(
    store: Store, source: OpenCostSource, costs: pd.DataFrame, period: Period, options: Options
) -> Ingested:
    return ingest_cost_table(store, costs, cost_origin(source), period=period,
                             mode=options.mode, actor=options.actor, dry_run=options.dry_run,
                             wait=options.wait)  # fmt: skip


def cost_origin(source: OpenCostSource) -> str:
    """The ``batch.source`` of costs pulled from ``source``'s OpenCost API."""
    return f"OpenCost API {source.url}"


def usage_origin(ruleset: RuleSet) -> str:
    """The ``batch.source`` of usage pulled from ``ruleset``'s Prometheus."""
    prometheus = ruleset.sources.prometheus if ruleset.sources is not None else None
    return f"prometheus {prometheus.url}" if prometheus is not None else "prometheus"


def last_ingested(engine: Engine, kind: Kind, source: str | None = None) -> pd.Timestamp | None:
    """The end of the latest window held by a committed batch of ``kind`` (``None``: none);
    of ``source``'s batches only when given (``batch.source``: one OpenCost or Prometheus URL),
    so that another cluster's pull, a file, the meter or OTLP never moves this source's last
    hour past hours it has not delivered."""
    b, c = table(Batch).c, table(BatchCell).c
    query = (
        select(func.max(c.window_end))
        .join_from(table(BatchCell), table(Batch), b.id == c.batch_id)
        .where(b.kind == kind.value, b.status == "committed")
    )
    if source is not None:
        query = query.where(b.source == source)
    with engine.connect() as connection:
        value = connection.execute(query).scalar()
    return None if value is None else pd.Timestamp(value).tz_convert("UTC")


def pending_period(
    engine: Engine, kind: Kind, now: pd.Timestamp, source: str | None = None, lookback: int = 0
) -> Period | Skipped:
    """The complete hours since ``source``'s last ingested one, up to ``now`` floored to the
    hour; with ``lookback``, at least the last ``lookback`` complete hours too (asked again: a
    source that revises its recent hours, such as OpenCost while Prometheus catches up, is
    re-read, and the ``replace`` batch makes that idempotent), and a source never ingested
    starts ``lookback`` hours back instead of needing a first period by hand."""
    last = last_ingested(engine, kind, source)
    end = now.tz_convert("UTC").floor("h")
    if lookback > 0:
        start = end - pd.Timedelta(hours=lookback)
        return Period(start if last is None else min(last, start), end)
    if last is None:
        option = "--prometheus" if kind is Kind.USAGE else "--opencost-url URL"
        what = f" from {source}" if source else ""
        raise InputError(
            f"--since-last: no {kind.value} ingested{what} yet, so there is no last hour; "
            f"ingest the first period with `tenantcost ingest {kind.value} {option} --from T "
            "--to T` (or --month M), or give --lookback HOURS"
        )
    if last >= end:
        return Skipped(kind, f"{kind.value}: up to date (last window ends "
                             f"{iso_z_seconds(last)}, last complete hour ends "
                             f"{iso_z_seconds(end)}); nothing to do")  # fmt: skip
    return Period(last, end)


def since_last(
    store: Store,
    *,
    ruleset: RuleSet | None,
    usage: bool,
    costs: OpenCostSource | None,
    now: pd.Timestamp,
    options: Options,
    lookback: int = 0,
) -> list[Ingested | Skipped]:
    """The hourly job: costs (when ``costs``), then usage (when ``usage``, from
    ``ruleset``'s Prometheus), each for its complete hours since the last ingested one. A
    source with no rows for them is not an error: the hours are asked again next time."""
    done: list[Ingested | Skipped] = []
    if costs is not None:
        period = pending_period(store.engine, Kind.COSTS, now, cost_origin(costs), lookback)
        if isinstance(period, Skipped):
            done.append(period)
        else:
            table_ = opencost_rows(costs, period)
            done.append(_nothing_new(Kind.COSTS, period) if table_.empty else
                        _store_costs(store, costs, table_, period, options))  # fmt: skip
    if usage:
        assert ruleset is not None
        period = pending_period(store.engine, Kind.USAGE, now, usage_origin(ruleset), lookback)
        if isinstance(period, Skipped):
            done.append(period)
        else:
            gauges = prometheus_gauges(store, ruleset)
            rows = prometheus_rows(ruleset, period, list(gauges))
            if rows.metrics:
                done.append(_nothing_new(Kind.USAGE, period) if rows.frame.empty else
                            _store_usage(store, rows, period, options))  # fmt: skip
            if gauges:
                done.append(_store_prometheus_samples(store, ruleset, gauges, period, options))
    return done


def _nothing_new(kind: Kind, period: Period) -> Skipped:
    return Skipped(kind, f"{kind.value}: the source has no rows for "
                         f"{iso_z_seconds(period.start)} to {iso_z_seconds(period.end)}; "
                         "nothing ingested (asked again next time)")  # fmt: skip
