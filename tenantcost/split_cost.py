"""A cluster's cost table from AWS's split of its instances: ``costs_from: split_cost_allocation``.

With split cost allocation data enabled, AWS CUR 2.0 carries, for every EKS pod and hour, two
rows (one for its vCPU, one for its memory, by ``line_item_usage_type``) that split the
**amortized** cost of the EC2 instance the pod ran on: ``split_line_item_split_cost`` is what
the pod's allocated capacity (max of request and usage) costs, ``split_line_item_unused_cost``
is the instance's unused capacity pro-rated over its pods by their split-usage ratio. For each
instance and hour, Σ split + Σ unused over its pod rows = the instance's amortized cost. Such
a cluster needs no OpenCost: the bill itself says what each pod cost, at billed rates.

**Contract** (what the allocation core gets from the reader's ``split_view``, whose columns
docs/billing-data.md lists under "EKS split cost allocation"):

* :func:`split_cost_costs` returns the canonical cost table of :mod:`tenantcost.tables` for one
  cluster: one row per window (the split rows' charge period), node, namespace, controller and
  pod, the sum of that pod's split cost (its CPU and memory rows together); and one
  ``__idle__`` row per node and window, the sum of the unused cost its pod rows carry, so the
  existing ``match: {name: __idle__}`` entries classify it. Namespace comes from
  ``aws:eks:namespace``, controller and kind from ``aws:eks:workload-name`` and
  ``aws:eks:workload-type`` where AWS sets them (only when exactly one workload manages the
  pod; otherwise ``""``). The exact ``amount`` column is int64 micro-units: the exact decimal
  sum of the group, rounded half to even **once** (a CUR amount has up to 10 places, so a row
  is never rounded on its own); ``total_cost`` is that amount in currency units.
* :func:`unsplit_lines` returns what else the cluster's billed lines hold, per ``ServiceName``,
  ``ResourceType`` and charge period, as exact sums: the lines that are not the parent
  instances of split rows (volumes, the EKS control-plane fee, load balancers), and what the
  parent instances' lines hold beyond AWS's split (data transfer billed on the instance id,
  the rounding of AWS's split figures). The parent instances are thereby never counted
  twice, and Σ EffectiveCost of the cluster's lines = Σ split + Σ unused + Σ of these, exactly.

Both aggregate in DuckDB over the views (never a pandas frame of raw rows) and return small
frames: a pod-hour per row, a service-hour per row.
"""

from __future__ import annotations

from enum import StrEnum

import duckdb
import pandas as pd
import pyarrow as pa

from tenantcost.duck import quote as _q  # view names come from code, never from users
from tenantcost.errors import InputError
from tenantcost.limits import MAX_MICROS_PER_ROW
from tenantcost.readers.canonical import validate_costs
from tenantcost.tables import COST_REQUIRED_COLUMNS

IDLE = "__idle__"
"""The OpenCost name of idle rows: ``match: {name: __idle__}`` entries apply to the unused cost."""

MICRO_SQL = "CAST(round_even({0}, 6) * 1000000 AS HUGEINT)"
"""An exact DECIMAL sum to int micro-units, half to even (DuckDB rounds DECIMAL exactly)."""

CAP = MAX_MICROS_PER_ROW + 1
"""Amounts are fetched as BIGINT (DuckDB hands HUGEINT to pandas as doubles); anything above
the per-row limit is capped one unit beyond it, so ``validate_costs`` still refuses it."""

POD_ARN = "arn:aws:eks:%:pod/%"
"""A split line's resource id: ``arn:aws:eks:REGION:ACCOUNT:pod/CLUSTER/NAMESPACE/POD/UID``."""


class UnsplitPart(StrEnum):
    """Why a residual group of a split cluster's billed lines is not in the split rows."""

    NOT_SPLIT = "not split"
    """Lines that are not parent instances of split rows (volumes, control plane, ...)."""
    PARENT_REMAINDER = "parent remainder"
    """Parent instances' lines beyond Σ split + unused of their pods in that period."""


UNSPLIT_COLUMNS = [
    "ServiceName",
    "ResourceType",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "part",
    "effective_cost",
    "amount",
    "lines",
]


def _cluster_rows(split_view: str) -> str:
    """The cluster's split rows with the cost table's properties, one SQL relation.

    The pod is the pod name of the split line's ARN (its last-but-one part); a resource id in
    another form is kept whole. A row without ``aws:eks:namespace`` takes the ARN's namespace,
    a row without ``aws:eks:node`` the parent instance id as its node. Workload types are
    lower-cased, as OpenCost spells controller kinds (``deployment``), so entries written for
    OpenCost rows keep matching."""
    return f"""
        SELECT ChargePeriodStart AS window_start, ChargePeriodEnd AS window_end,
               COALESCE(NULLIF(Node, ''), ParentResourceId) AS node,
               CASE WHEN COALESCE(Namespace, '') = '' AND Pod LIKE '{POD_ARN}'
                    THEN split_part(Pod, '/', 3) ELSE COALESCE(Namespace, '') END AS namespace,
               lower(COALESCE(WorkloadType, '')) AS controller_kind,
               COALESCE(WorkloadName, '') AS controller,
               CASE WHEN Pod LIKE '{POD_ARN}' THEN split_part(Pod, '/', 4)
                    ELSE COALESCE(Pod, '') END AS pod,
               SplitCost, COALESCE(UnusedCost, 0) AS UnusedCost,
               {{'f': x_file, 'r': x_row}} AS place
        FROM {_q(split_view)} WHERE Cluster = $cluster"""


def split_cost_costs(
    con: duckdb.DuckDBPyConnection,
    split_view: str,
    cluster: str,
    *,
    origin: str,
    eks_cluster: str | None = None,
) -> pd.DataFrame:
    """The canonical cost table of ``cluster`` from the split rows in ``split_view``.

    ``eks_cluster`` is the ``aws:eks:cluster-name`` of the split rows when it differs from
    ``cluster`` (OpenCost's name, the ``cluster`` column of the result). ``origin`` names the
    billing data in messages. Raises :class:`InputError` when the data holds no split row of
    the cluster (split cost allocation not enabled, or another cluster name), or a split row
    with a missing or negative cost (file, row and column named).
    """
    params = {"cluster": eks_cluster if eks_cluster is not None else cluster}
    rows = _cluster_rows(split_view)
    _check_costs(con, rows, params)
    micro_split, micro_unused = (
        MICRO_SQL.format("SUM(SplitCost)"),
        MICRO_SQL.format("SUM(UnusedCost)"),
    )
    frame = con.execute(
        f"""
        WITH r AS ({rows}), g AS (
        SELECT window_start, window_end, namespace || '/' || pod AS name, node, namespace,
               controller_kind, controller, pod, {micro_split} AS amount, min(place) AS place
        FROM r GROUP BY window_start, window_end, node, namespace, controller_kind,
                        controller, pod
        UNION ALL
        SELECT window_start, window_end, '{IDLE}', node, '', '', '', '', {micro_unused},
               min(place)
        FROM r GROUP BY window_start, window_end, node)
        SELECT * EXCLUDE (place, amount), CAST(LEAST(amount, {CAP}) AS BIGINT) AS amount,
               place.f || ':row ' || CAST(place.r AS VARCHAR) AS origin
        FROM g ORDER BY window_start, window_end, name, node, namespace, controller_kind,
                        controller, pod
        """,
        params,
    ).df()
    if frame.empty:
        raise InputError(_no_split_rows(con, split_view, params["cluster"], cluster, origin))
    return _cost_table(frame, cluster)


def _check_costs(con: duckdb.DuckDBPyConnection, rows: str, params: dict[str, str]) -> None:
    """The first split row (by file and row) with a missing or negative cost, as an error.

    A pod's cost is money AWS billed: NULL is a broken export, a negative cost is not a share
    of an instance's amortized cost (the cost table holds costs >= 0)."""
    bad = con.execute(
        f"""
        WITH r AS ({rows})
        SELECT place.f, place.r,
               CASE WHEN SplitCost IS NULL OR SplitCost < 0 THEN 'SplitCost'
                    ELSE 'UnusedCost' END, CAST(SplitCost AS VARCHAR), CAST(UnusedCost AS VARCHAR)
        FROM r WHERE SplitCost IS NULL OR SplitCost < 0 OR UnusedCost < 0
        ORDER BY place LIMIT 1
        """,
        params,
    ).fetchone()
    if bad is not None:
        file, row, column, split, unused = bad
        value = split if column == "SplitCost" else unused
        problem = "is missing" if value is None else f"is negative ({value})"
        raise InputError(
            f"the split cost allocation {column} {problem}: a pod's share of its instance's "
            "amortized cost is a number >= 0",
            file=str(file),
            where=f"row {row}",
            column=column,
        )


def _no_split_rows(
    con: duckdb.DuckDBPyConnection, split_view: str, eks: str, cluster: str, origin: str
) -> str:
    """Why a split-cost cluster has no row: no split data at all, or other cluster names."""
    names = [
        str(n)
        for (n,) in con.execute(
            f"SELECT DISTINCT Cluster FROM {_q(split_view)} ORDER BY 1 LIMIT 6"
        ).fetchall()
    ]
    shown = ", ".join(f"'{n}'" for n in names[:5]) + (", ..." if len(names) > 5 else "")
    found = f"its split rows name the clusters {shown}" if names else "it has no split rows"
    return (
        f"cluster '{cluster}' has costs_from: split_cost_allocation, but {origin} holds no EKS "
        f"split cost allocation row with aws:eks:cluster-name '{eks}' ({found}); enable split "
        "cost allocation data in the CUR 2.0 export, or use costs_from: opencost"
    )


def _cost_table(frame: pd.DataFrame, cluster: str) -> pd.DataFrame:
    """The aggregated rows as the canonical cost table plus the exact ``amount`` column."""
    out = pd.DataFrame(
        {
            "window_start": _utc(frame["window_start"]),
            "window_end": _utc(frame["window_end"]),
            "name": frame["name"].astype("str"),
            "cluster": pd.Series(cluster, index=frame.index, dtype="str"),
            **{
                c: frame[c].astype("str")
                for c in ("node", "namespace", "controller_kind", "controller", "pod")
            },
        }
    )
    out["amount"] = frame["amount"].astype("int64")
    out["total_cost"] = out["amount"] / 1_000_000
    out["origin"] = frame["origin"].astype("str")
    out = out[[*COST_REQUIRED_COLUMNS, "amount"]]
    validate_costs(out)  # the per-row and total limits every cost table meets
    return out.reset_index(drop=True)


def _utc(values: pd.Series) -> pd.Series:
    return pd.to_datetime(values, utc=True).astype("datetime64[ns, UTC]")


def unsplit_lines(
    con: duckdb.DuckDBPyConnection,
    lines: str,
    split_view: str,
    cluster: str,
    *,
    eks_cluster: str | None = None,
) -> pd.DataFrame:
    """What the cluster's billed lines hold besides its split rows, per service, resource type
    and charge period (columns :data:`UNSPLIT_COLUMNS`).

    ``lines`` is a SQL relation (a view name or a parenthesised ``SELECT``) of the billed lines
    the cluster's ``match`` selects, with the canonical billing view's columns. A line is a
    *parent line* when its ``ResourceId`` is the ``ParentResourceId`` of split rows of the
    cluster with the same charge period (AWS gives a split row its parent line's period).
    Returned, ``part`` by ``part`` (:class:`UnsplitPart`):

    * ``not split``: the exact Σ ``EffectiveCost`` of the other lines (EBS volumes, the EKS
      control-plane fee, load balancers, NAT), per ``ServiceName``, ``ResourceType`` and period;
    * ``parent remainder``: per parent instance and period, its lines' Σ ``EffectiveCost``
      minus Σ split + unused cost of its pods (data transfer billed on the instance id; the
      rounding of AWS's split figures), named after its largest line, summed per
      ``ServiceName``, ``ResourceType`` and period; groups of exactly 0 are left out.

    ``effective_cost`` is the exact decimal sum, ``amount`` its half-even micro-units (rounded
    once per group), ``lines`` the number of billed lines. Raises :class:`InputError` when a
    split row's parent instance has no billed line among ``lines`` in its period: the cluster's
    ``match`` misses the instance lines (they carry the node group's tags, not always the split
    rows' ``aws:eks:cluster-name``), so its cost would be counted twice.
    """
    params = {"cluster": eks_cluster if eks_cluster is not None else cluster}
    parents = f"""
        SELECT ParentResourceId AS rid, ChargePeriodStart AS ps, ChargePeriodEnd AS pe,
               SUM(SplitCost) + SUM(COALESCE(UnusedCost, 0)) AS split_total,
               min({{'f': x_file, 'r': x_row}}) AS place
        FROM {_q(split_view)} WHERE Cluster = $cluster GROUP BY ALL"""
    keyed = f"""
        SELECT l.*, p.rid IS NOT NULL AS is_parent
        FROM {lines} AS l LEFT JOIN parents AS p
          ON l.ResourceId = p.rid AND l.ChargePeriodStart = p.ps
         AND l.ChargePeriodEnd = p.pe"""
    _check_parents_billed(con, parents, lines, params, cluster)
    micro = MICRO_SQL.format("SUM(effective_cost)")
    return _unsplit_frame(
        con.sql(
            f"""
            WITH parents AS ({parents}), keyed AS ({keyed}),
            other AS (
              SELECT ServiceName, ResourceType, ChargePeriodStart, ChargePeriodEnd,
                     '{UnsplitPart.NOT_SPLIT}' AS part, EffectiveCost AS effective_cost,
                     1 AS n
              FROM keyed WHERE NOT is_parent),
            parent AS (  -- named after its largest line (ties by name: any row order)
              SELECT ResourceId, ChargePeriodStart, ChargePeriodEnd,
                     max({{'c': EffectiveCost, 's': ServiceName, 't': ResourceType}}) AS top,
                     SUM(EffectiveCost) AS effective_cost, COUNT(*) AS n
              FROM keyed WHERE is_parent GROUP BY ResourceId, ChargePeriodStart, ChargePeriodEnd),
            remainder AS (
              SELECT q.top.s, q.top.t, q.ChargePeriodStart, q.ChargePeriodEnd,
                     '{UnsplitPart.PARENT_REMAINDER}' AS part,
                     q.effective_cost - p.split_total AS effective_cost, q.n
              FROM parent AS q JOIN parents AS p ON q.ResourceId = p.rid
               AND q.ChargePeriodStart = p.ps AND q.ChargePeriodEnd = p.pe)
            SELECT ServiceName, ResourceType, ChargePeriodStart, ChargePeriodEnd, part,
                   SUM(effective_cost) AS effective_cost, {micro} AS amount,
                   CAST(SUM(n) AS BIGINT) AS lines
            FROM (SELECT * FROM other UNION ALL SELECT * FROM remainder)
            GROUP BY ALL
            HAVING part = '{UnsplitPart.NOT_SPLIT}' OR SUM(effective_cost) <> 0
            ORDER BY ChargePeriodStart, ChargePeriodEnd, part, ServiceName, ResourceType
            """,
            params=params,
        ).to_arrow_table()
    )


def _check_parents_billed(
    con: duckdb.DuckDBPyConnection,
    parents: str,
    lines: str,
    params: dict[str, str],
    cluster: str,
) -> None:
    """The first split parent (by file and row) without a billed line of its period, as an
    error: that instance's cost sits in the split rows *and* wherever its line went."""
    missing = con.execute(
        f"""
        WITH parents AS ({parents})
        SELECT p.place.f, p.place.r, p.rid, CAST(p.ps AS VARCHAR), COUNT(*) OVER ()
        FROM parents AS p
        WHERE NOT EXISTS (SELECT 1 FROM {lines} AS l WHERE l.ResourceId = p.rid
                          AND l.ChargePeriodStart = p.ps AND l.ChargePeriodEnd = p.pe)
        ORDER BY p.place LIMIT 1
        """,
        params,
    ).fetchone()
    if missing is not None:
        file, row, rid, start, count = missing
        raise InputError(
            f"split rows of cluster '{cluster}' run on instance '{rid}' ({start}), but the "
            "cluster's match selects no billed line of that instance in that period "
            f"({count} instance-period(s) in all): its cost would be counted twice; match "
            "the instance lines too (their node group's tags, or ResourceId globs)",
            file=str(file),
            where=f"row {row}",
            column="ParentResourceId",
        )


def _unsplit_frame(table: pa.Table) -> pd.DataFrame:
    """The residual groups with exact ``Decimal`` sums (Arrow keeps DECIMAL exact; DuckDB's
    own pandas conversion would go through doubles)."""
    frame = table.to_pandas()
    frame["ChargePeriodStart"] = _utc(frame["ChargePeriodStart"])
    frame["ChargePeriodEnd"] = _utc(frame["ChargePeriodEnd"])
    for column in ("ServiceName", "ResourceType", "part"):
        frame[column] = frame[column].astype("str")
    frame["amount"] = frame["amount"].astype("int64")
    frame["lines"] = frame["lines"].astype("int64")
    return frame[UNSPLIT_COLUMNS].reset_index(drop=True)
