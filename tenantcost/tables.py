"""The canonical tables every reader produces and the allocation core consumes.

Keeping one shape per concept lets every source (an OpenCost JSON response, its CSV export, a
canonical CSV/Parquet, the OpenCost API, Prometheus, tenantcost's own node-price model) feed
the same core, and lets tests build inputs directly.

**Cost table** (one row per cost item and window; finer rows such as pods are allowed):

=================  ===========================  ==============================================
column             dtype                        meaning
=================  ===========================  ==============================================
window_start       datetime64[ns, UTC]          window start, inclusive
window_end         datetime64[ns, UTC]          window end, exclusive
name               string                       OpenCost allocation name (``__idle__``, ...)
cluster            string                       ``""`` when unknown
node               string                       ``""`` when unknown
namespace          string                       ``""`` when unknown
controller_kind    string                       ``""`` when unknown
controller         string                       ``""`` when unknown
pod                string                       ``""`` when unknown
total_cost         float64                      currency units, >= 0, finite
origin             string                       file and row / JSON path, for error messages
label:<k>          str (optional, any count)    Kubernetes label ``k`` of the row
<x>_cost           float64 (optional)           component costs (cpu_cost, ram_cost, ...)
=================  ===========================  ==============================================

**Usage table** (one row per window, service and client):

window_start, window_end (as above), ``service`` (string), ``client`` (string, ``""`` when
the usage had no client id) and any number of float64 metric columns (``requests``,
``cpu_seconds``, ...), each finite and >= 0, plus ``origin``.

The **result tables** an allocation produces (``tenantcost.result.AllocationResult``) are
described here too, so every table shape of the project is in one module:

* **lines** (``LINE_COLUMNS``, ``LINE_DTYPES``): one row per client, source and window (or,
  at period detail, per client and source with an int64 ``windows`` count); ``kind`` is a
  ``tenantcost.kinds.LineKind``; ``measure``/``total_measure``/``share`` are NaN for direct
  lines (no key); ``amount`` is int64 micro-units;
* **unattributed** (``UNATTRIBUTED_COLUMNS``, ``UNATTRIBUTED_DTYPES``): cost no client
  carries, per window, source and ``cause`` (a ``tenantcost.kinds.Cause``);
* **items** (``ITEM_COLUMNS``): residual, exclusions and unclassified cost
  per window, rule, ``class`` (a ``tenantcost.kinds.CostClass``), name and reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where used: the rule models start without it
    import pandas as pd

WINDOW_COLUMNS = ["window_start", "window_end"]
COST_PROPERTY_COLUMNS = [
    "name",
    "cluster",
    "node",
    "namespace",
    "controller_kind",
    "controller",
    "pod",
]
COST_REQUIRED_COLUMNS = [*WINDOW_COLUMNS, *COST_PROPERTY_COLUMNS, "total_cost", "origin"]
COST_COMPONENT_COLUMNS = [
    "cpu_cost",
    "gpu_cost",
    "ram_cost",
    "pv_cost",
    "network_cost",
    "load_balancer_cost",
    "shared_cost",
    "external_cost",
]
LABEL_PREFIX = "label:"

USAGE_KEY_COLUMNS = [*WINDOW_COLUMNS, "service", "client"]
USAGE_RESERVED_COLUMNS = [*USAGE_KEY_COLUMNS, "origin"]


def metric_columns(usage: pd.DataFrame) -> list[str]:
    """The numeric metric columns of a usage table (everything but keys and origin)."""
    return [c for c in usage.columns if c not in USAGE_RESERVED_COLUMNS]


def empty_costs() -> pd.DataFrame:
    """An empty cost table with the canonical columns and dtypes."""
    import pandas as pd

    frame = pd.DataFrame(
        {
            "window_start": pd.Series([], dtype="datetime64[ns, UTC]"),
            "window_end": pd.Series([], dtype="datetime64[ns, UTC]"),
            **{c: pd.Series([], dtype="str") for c in COST_PROPERTY_COLUMNS},
            "total_cost": pd.Series([], dtype="float64"),
            "origin": pd.Series([], dtype="str"),
        }
    )
    return frame


def empty_usage(metrics: list[str] | None = None) -> pd.DataFrame:
    """An empty usage table with the canonical key columns and the given metrics."""
    import pandas as pd

    return pd.DataFrame(
        {
            "window_start": pd.Series([], dtype="datetime64[ns, UTC]"),
            "window_end": pd.Series([], dtype="datetime64[ns, UTC]"),
            "service": pd.Series([], dtype="str"),
            "client": pd.Series([], dtype="str"),
            **{m: pd.Series([], dtype="float64") for m in (metrics or [])},
            "origin": pd.Series([], dtype="str"),
        }
    )


LINE_COLUMNS = [
    "window_start",
    "window_end",
    "rule_id",
    "client",
    "source",
    "kind",
    "key",
    "measure",
    "total_measure",
    "share",
    "amount",
]
LINE_DTYPES = {
    "window_start": "datetime64[ns, UTC]",
    "window_end": "datetime64[ns, UTC]",
    "rule_id": "str",
    "client": "str",
    "source": "str",
    "kind": "str",
    "key": "str",
    "measure": "float64",
    "total_measure": "float64",
    "share": "float64",
    "amount": "int64",
}
PERIOD_LINE_COLUMNS = [*LINE_COLUMNS, "windows"]
PERIOD_LINE_DTYPES = {**LINE_DTYPES, "windows": "int64"}

UNATTRIBUTED_COLUMNS = [
    "window_start",
    "window_end",
    "rule_id",
    "source",
    "kind",
    "cause",
    "amount",
]
UNATTRIBUTED_DTYPES = {
    "window_start": "datetime64[ns, UTC]",
    "window_end": "datetime64[ns, UTC]",
    "rule_id": "str",
    "source": "str",
    "kind": "str",
    "cause": "str",
    "amount": "int64",
}

ITEM_COLUMNS = ["window_start", "window_end", "rule_id", "class", "name", "reason", "amount"]


def empty_table(columns: list[str], dtypes: dict[str, str]) -> pd.DataFrame:
    """An empty result table with the given columns and dtypes (concat and dtype checks keep
    working on runs that produced no row of that table)."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series([], dtype=dtypes[c]) for c in columns})
