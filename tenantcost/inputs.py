"""The one input path: command options + the rule file's ``sources:`` -> costs and usage.

Every command that allocates (``allocate``, ``compare``, ``reconcile``, ``report``, and the
store and service to come) loads its inputs through :func:`load_inputs`, so a usage file, a
folder, a Parquet dataset, a URL, Prometheus or the OpenCost API is read the same way
whatever the command. The I/O happens in this plain function, never in a constructor: the
:class:`Inputs` it returns is only the loaded data and where it came from.

Precedence for costs is that of :func:`tenantcost.collect.load_costs`; for usage: the
``--usage`` options, else ``sources.usage`` of the rule file, else ``sources.prometheus``
(queried for the period, or the span of the cost data), else no usage (the shared cost is then
unattributed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from tenantcost.billing import BillingRun, prepare_billing
from tenantcost.collect import RESPONSES_FOLDER, CostInput, load_costs
from tenantcost.config.rules import RuleSet, load_rules
from tenantcost.config.sources import PrometheusSource
from tenantcost.duck import connect
from tenantcost.errors import InputError
from tenantcost.gauge_usage import GaugedUsage, open_gauged
from tenantcost.usage_source import FrameUsage, UsageSource, is_url
from tenantcost.windows import Period, data_period


@dataclass(frozen=True)
class Inputs:
    """The loaded inputs of one run and where they came from (for provenance and errors)."""

    config: Path
    ruleset: RuleSet
    cost_input: CostInput
    usage: UsageSource | None
    """Read chunk by chunk by the allocation; ``None`` when no usage is configured."""
    usage_paths: list[Path | str]
    """The usage files, folders and URLs read (empty for Prometheus or no usage)."""
    con: duckdb.DuckDBPyConnection
    """The run's DuckDB connection: Parquet usage is scanned through it, chunk by chunk."""
    billing: BillingRun | None = None
    """The billing side (``tenantcost.billing``) when billing data is given: the allocation
    then runs on :attr:`allocation_costs`, repriced to the billed effective cost."""

    @property
    def allocation_costs(self) -> pd.DataFrame:
        """The cost rows the allocation runs on: repriced with billing data, else as read."""
        return self.billing.costs if self.billing is not None else self.cost_input.costs

    @property
    def costs(self) -> pd.DataFrame:
        return self.cost_input.costs

    @property
    def cost_paths(self) -> list[Path]:
        return self.cost_input.paths

    @property
    def usage_origin(self) -> str:
        return self.usage.origin if self.usage is not None else "usage"


def load_inputs(
    config: Path,
    costs: list[Path] | None = None,
    usage: list[str] | None = None,
    *,
    opencost_url: str | None = None,
    step: str | None = None,
    period: Period | None = None,
    out: Path | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    billing: list[str] | None = None,
    allow_unbilled: bool = False,
) -> Inputs:
    """Load the rule file, the cost table and open the usage source of one run.

    ``out`` is where raw OpenCost API responses are saved (its ``responses/`` folder), when
    the costs come from the API.
    """
    ruleset = load_rules(config)
    cost_input = load_costs(
        ruleset,
        config,
        costs,
        opencost_url=opencost_url,
        step=step,
        period=period,
        responses_dir=out / RESPONSES_FOLDER if out is not None else None,
    )
    con = con or connect()
    usage_paths: list[Path | str] = [
        p if is_url(p) else Path(p) for p in (usage or ruleset.sources.usage)
    ]
    source = open_gauged(usage_paths, con, ruleset.gauges) if usage_paths else None
    if source is None and ruleset.sources.prometheus is not None:
        source = prometheus_usage(ruleset, period or data_period(cost_input.costs))
    billing_run = open_billing_run(
        ruleset, cost_input.costs, con, billing, period=period, allow_unbilled=allow_unbilled
    )
    return Inputs(config, ruleset, cost_input, source, usage_paths, con, billing_run)


def open_billing_run(
    ruleset: RuleSet,
    costs: pd.DataFrame,
    con: duckdb.DuckDBPyConnection,
    paths: list[str] | None,
    *,
    period: Period | None,
    allow_unbilled: bool,
) -> BillingRun | None:
    """The billing side of a run: ``--billing`` paths, else ``billing.sources``; ``None``
    when neither is given. Billing data without a ``billing:`` section is an error (no
    cluster would be repriced, so OpenCost's nodes and the bill's would both count)."""
    chosen = list(paths or (ruleset.billing.sources if ruleset.billing is not None else []))
    if not chosen:
        return None
    if ruleset.billing is None:
        raise InputError(
            "--billing: the rule file has no billing: section; list the clusters whose "
            "billed lines OpenCost prices (billing.clusters), or the node cost would be "
            "counted twice"
        )
    from tenantcost.readers.billing import check_billing, check_split_rows, open_billing

    data = open_billing(
        chosen,
        con,
        currency=ruleset.currency,
        focus_allocations=ruleset.billing.focus_allocations,
        check=False,  # the grouping's own scan counts the problems (prepare_billing)
    )
    check_split_rows(con, data, ruleset.currency)
    return prepare_billing(
        costs,
        con,
        data.checked_view,
        ruleset,
        period=period,
        allow_unbilled=allow_unbilled,
        origin=data.origin,
        split_view=data.split_view,
        check=lambda: check_billing(con, data, ruleset.currency),
    )


def prometheus_usage(ruleset: RuleSet, span: Period) -> UsageSource:
    """Usage straight from ``sources.prometheus`` for ``span`` (held in memory)."""
    from tenantcost.readers.prometheus import read_prometheus_samples, read_prometheus_usage

    prometheus = ruleset.sources.prometheus
    assert prometheus is not None
    origin = f"prometheus {prometheus.url}"
    gauges = [g for g in ruleset.gauges if g in prometheus.queries]
    frame = read_prometheus_usage(prometheus, span.start, span.end, gauges)
    if not ruleset.gauges:
        return FrameUsage(frame, origin=origin)
    samples = read_prometheus_samples(prometheus, gauges, *_reach(ruleset, prometheus, span))
    return GaugedUsage(FrameUsage(frame, origin=origin), samples.assign(rank=1),
                       ruleset.gauges, origin)  # fmt: skip


def _reach(
    ruleset: RuleSet, prometheus: PrometheusSource, span: Period
) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The instants a gauge is sampled at: from the longest ``stale_after`` before ``span``
    (a level sampled then still holds in it), on the query's step."""
    step = prometheus.step_timedelta
    reach = pd.Timedelta(seconds=max(m.stale_seconds for m in ruleset.gauges.values()))
    return span.start - (reach // step) * step, span.end
