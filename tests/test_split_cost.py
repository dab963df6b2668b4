"""``costs_from: split_cost_allocation``: a cluster's cost table from CUR 2.0's EKS split rows.

The data is one hour of a CUR 2.0 export (Parquet, CUR 2.0 column names and types: costs are
doubles, tags a ``map<string, string>`` with CUR's ``aws_eks_*`` / ``user_*`` keys) of a
two-node cluster: per pod two split rows, its vCPU (``EKS-EC2-vCPU-Hours``) and its memory
(``EKS-EC2-GB-Hours``), as AWS writes them; the split costs follow AWS's published method
(9:1 CPU:memory unit weights on the instance's amortized cost, unused capacity pro-rated over
the pods by their split-usage ratio), rounded to 10 places as CUR's figures are. The test
builds the ``split_view`` (columns: docs/billing-data.md, "EKS split cost allocation") and the
cluster's billed lines (FOCUS names) itself, straight from the Parquet file, so it does not
depend on the billing reader. Expected amounts are computed here with Python's ``Decimal``
from the figures written to the file.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenantcost.errors import InputError
from tenantcost.split_cost import IDLE, UnsplitPart, split_cost_costs, unsplit_lines
from tenantcost.tables import COST_REQUIRED_COLUMNS

START = pd.Timestamp("2026-11-01T10:00:00Z")
END = START + pd.Timedelta(hours=1)
CLUSTER = "prod-paris"
ACCOUNT = "111122223333"
NODE_A, NODE_B = (
    "ip-10-0-1-10.eu-west-3.compute.internal",
    "ip-10-0-2-20.eu-west-3.compute.internal",
)
COST_A = Decimal("0.1568")  # m5.xlarge under a Savings Plan: amortized (effective) cost
COST_B = Decimal("0.224")  # m5.xlarge on demand
PLACES = Decimal("1e-10")
MICRO = Decimal("1e-6")


def _pod_arn(namespace: str, pod: str) -> str:
    return f"arn:aws:eks:eu-west-3:{ACCOUNT}:pod/{CLUSTER}/{namespace}/{pod}/0a1b2c3d-uid"


def _d(value: Fraction) -> Decimal:
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(PLACES)


def _node_a_rows() -> list[dict[str, Any]]:
    """AWS's method on instance A (4 vCPU, 16 GB, COST_A/h): api-1 holds 1.5 vCPU and 5 GB,
    worker-1 1 vCPU and 6 GB. Unit cost C/(9*4 + 1*16); unused vCPU/GB pro-rated by each
    pod's share of the allocated resource. The last row takes what 10-place rounding left."""
    cost = Fraction(str(COST_A))
    cpu_rate, gb_rate = 9 * cost / 52, cost / 52
    unused_cpu, unused_gb = (4 - Fraction(5, 2)) * cpu_rate, (16 - 11) * gb_rate
    pods: list[tuple[str, str, str, Fraction, Fraction]] = [
        ("api-1", "api", "Deployment", Fraction(3, 2), Fraction(5)),
        ("worker-1", "worker", "StatefulSet", Fraction(1), Fraction(6)),
    ]
    rows: list[dict[str, Any]] = []
    for pod, workload, kind, cpu, gb in pods:
        for usage, alloc, rate, unused, total in (
            ("vCPU", cpu, cpu_rate, unused_cpu, Fraction(5, 2)),
            ("GB", gb, gb_rate, unused_gb, Fraction(11)),
        ):
            rows.append(
                {
                    "node": NODE_A,
                    "parent": "i-0aaa",
                    "ns": "saas",
                    "pod": pod,
                    "workload": workload,
                    "kind": kind,
                    "usage": usage,
                    "split": _d(alloc * rate),
                    "unused": _d(unused * alloc / total),
                    "ratio": float(alloc / (4 if usage == "vCPU" else 16)),
                }
            )
    rows[-1]["unused"] += COST_A - sum(r["split"] + r["unused"] for r in rows)
    return rows


def _node_b_rows() -> list[dict[str, Any]]:
    """Instance B, figures chosen for the rounding rule: edge-proxy's two rows add up to
    0.0198165 exactly (a tie: half to even gives 0.019816, half up would give 0.019817);
    debug-shell (no workload tags: a bare pod) has 0.0000004 + 0.0000004, one micro-unit
    together though each row alone rounds to 0."""
    base: dict[str, Any] = {"node": NODE_B, "parent": "i-0bbb"}
    rows: list[dict[str, Any]] = [
        {
            **base,
            "ns": "ingress",
            "pod": "edge-proxy-x7k2p",
            "workload": "edge-proxy",
            "kind": "DaemonSet",
            "usage": "vCPU",
            "split": Decimal("0.0193857300"),
            "unused": Decimal("0.1500000000"),
            "ratio": 0.125,
        },
        {
            **base,
            "ns": "ingress",
            "pod": "edge-proxy-x7k2p",
            "workload": "edge-proxy",
            "kind": "DaemonSet",
            "usage": "GB",
            "split": Decimal("0.0004307700"),
            "unused": Decimal("0.0300000000"),
            "ratio": 0.0625,
        },
        {
            **base,
            "ns": "default",
            "pod": "debug-shell",
            "workload": None,
            "kind": None,
            "usage": "vCPU",
            "split": Decimal("0.0000004000"),
            "unused": Decimal("0.0100000000"),
            "ratio": 0.0001,
        },
        {
            **base,
            "ns": "default",
            "pod": "debug-shell",
            "workload": None,
            "kind": None,
            "usage": "GB",
            "split": Decimal("0.0000004000"),
            "unused": Decimal("0"),
            "ratio": 0.0001,
        },
    ]
    rows[-1]["unused"] = COST_B - sum(r["split"] + r["unused"] for r in rows)
    return rows


SPLIT_ROWS = [*_node_a_rows(), *_node_b_rows()]
DATA_TRANSFER = Decimal("0.0012345678")
VOLUME = Decimal("0.0109589041")
BILLED: list[dict[str, Any]] = [
    # resource id, product code, product name, family, line item type, unblended, effective
    {
        "rid": "i-0aaa",
        "code": "AmazonEC2",
        "name": "Amazon Elastic Compute Cloud",
        "family": "Compute Instance",
        "type": "SavingsPlanCoveredUsage",
        "usage": "EUW3-BoxUsage:m5.xlarge",
        "unblended": Decimal("0.224"),
        "effective": COST_A,
        "cluster_tag": True,
    },
    {
        "rid": "i-0aaa",
        "code": "AmazonEC2",
        "name": "Amazon Elastic Compute Cloud",
        "family": "Compute Instance",
        "type": "SavingsPlanNegation",
        "usage": "EUW3-BoxUsage:m5.xlarge",
        "unblended": Decimal("-0.224"),
        "effective": Decimal(0),
        "cluster_tag": True,
    },
    {
        "rid": "i-0aaa",
        "code": "AmazonEC2",
        "name": "Amazon Elastic Compute Cloud",
        "family": "Data Transfer",
        "type": "Usage",
        "usage": "EUW3-DataTransfer-Regional-Bytes",
        "unblended": DATA_TRANSFER,
        "effective": DATA_TRANSFER,
        "cluster_tag": True,
    },
    {
        "rid": "i-0bbb",
        "code": "AmazonEC2",
        "name": "Amazon Elastic Compute Cloud",
        "family": "Compute Instance",
        "type": "Usage",
        "usage": "EUW3-BoxUsage:m5.xlarge",
        "unblended": COST_B,
        "effective": COST_B,
        "cluster_tag": True,
    },
    *[
        {
            "rid": vol,
            "code": "AmazonEC2",
            "name": "Amazon Elastic Compute Cloud",
            "family": "Storage",
            "type": "Usage",
            "usage": "EUW3-EBS:VolumeUsage.gp3",
            "unblended": VOLUME,
            "effective": VOLUME,
            "cluster_tag": True,
        }
        for vol in ("vol-0aaa", "vol-0bbb")
    ],
    {
        "rid": f"arn:aws:eks:eu-west-3:{ACCOUNT}:cluster/{CLUSTER}",
        "code": "AmazonEKS",
        "name": "Amazon Elastic Kubernetes Service",
        "family": "Compute",
        "type": "Usage",
        "usage": "EUW3-AmazonEKS-Hours:perCluster",
        "unblended": Decimal("0.10"),
        "effective": Decimal("0.10"),
        "cluster_tag": False,
    },
    {
        "rid": f"arn:aws:elasticloadbalancing:eu-west-3:{ACCOUNT}:loadbalancer/app/k8s/1a2b",
        "code": "AWSELB",
        "name": "Elastic Load Balancing",
        "family": "Load Balancer-Application",
        "type": "Usage",
        "usage": "EUW3-LoadBalancerUsage",
        "unblended": Decimal("0.0252"),
        "effective": Decimal("0.0252"),
        "cluster_tag": True,
    },
    {
        "rid": f"arn:aws:rds:eu-west-3:{ACCOUNT}:db:orders",
        "code": "AmazonRDS",
        "name": "Amazon Relational Database Service",
        "family": "Database Instance",
        "type": "Usage",
        "usage": "EUW3-InstanceUsage:db.r6g.large",
        "unblended": Decimal("0.2740000000"),
        "effective": Decimal("0.2740000000"),
        "cluster_tag": False,
    },
]


def _record(**values: Any) -> dict[str, Any]:
    empty: dict[str, Any] = {
        "line_item_usage_start_date": START.to_pydatetime(),
        "line_item_usage_end_date": END.to_pydatetime(),
        "line_item_usage_account_id": ACCOUNT,
        "bill_billing_currency": "USD",
        "split_line_item_parent_resource_id": None,
        "split_line_item_split_cost": None,
        "split_line_item_unused_cost": None,
        "split_line_item_split_usage_ratio": None,
        "savings_plan_savings_plan_effective_cost": None,
    }
    return {**empty, **values}


def _split_record(row: dict[str, Any]) -> dict[str, Any]:
    tags = {
        "aws_eks_cluster_name": CLUSTER,
        "aws_eks_namespace": row["ns"],
        "aws_eks_node": row["node"],
        **({"aws_eks_workload_name": row["workload"]} if row["workload"] else {}),
        **({"aws_eks_workload_type": row["kind"]} if row["kind"] else {}),
    }
    return _record(
        line_item_line_item_type="Usage",
        line_item_product_code="AmazonEKS",
        line_item_usage_type=f"EUW3-EKS-EC2-{row['usage']}-Hours",
        line_item_resource_id=_pod_arn(row["ns"], row["pod"]),
        line_item_unblended_cost=0.0,
        product={"product_name": "Amazon Elastic Kubernetes Service", "product_family": "Compute"},
        resource_tags=list(tags.items()),
        split_line_item_parent_resource_id=row["parent"],
        split_line_item_split_cost=float(row["split"]),
        split_line_item_unused_cost=float(row["unused"]),
        split_line_item_split_usage_ratio=row["ratio"],
    )


def _billed_record(line: dict[str, Any]) -> dict[str, Any]:
    covered = line["type"] == "SavingsPlanCoveredUsage"
    tags = {"user_eks_cluster_name": CLUSTER} if line["cluster_tag"] else {}
    return _record(
        line_item_line_item_type=line["type"],
        line_item_product_code=line["code"],
        line_item_usage_type=line["usage"],
        line_item_resource_id=line["rid"],
        line_item_unblended_cost=float(line["unblended"]),
        product={"product_name": line["name"], "product_family": line["family"]},
        resource_tags=list(tags.items()),
        savings_plan_savings_plan_effective_cost=float(line["effective"]) if covered else None,
    )


CUR_SCHEMA = pa.schema(
    [
        ("line_item_usage_start_date", pa.timestamp("ms", tz="UTC")),
        ("line_item_usage_end_date", pa.timestamp("ms", tz="UTC")),
        ("line_item_usage_account_id", pa.string()),
        ("bill_billing_currency", pa.string()),
        ("line_item_line_item_type", pa.string()),
        ("line_item_product_code", pa.string()),
        ("line_item_usage_type", pa.string()),
        ("line_item_resource_id", pa.string()),
        ("line_item_unblended_cost", pa.float64()),
        ("savings_plan_savings_plan_effective_cost", pa.float64()),
        ("product", pa.map_(pa.string(), pa.string())),
        ("resource_tags", pa.map_(pa.string(), pa.string())),
        ("split_line_item_parent_resource_id", pa.string()),
        ("split_line_item_split_cost", pa.float64()),
        ("split_line_item_unused_cost", pa.float64()),
        ("split_line_item_split_usage_ratio", pa.float64()),
    ]
)


def write_cur(
    path: Path, split_rows: list[dict[str, Any]] = SPLIT_ROWS, billed: list[dict[str, Any]] = BILLED
) -> Path:
    records = [*(_billed_record(b) for b in billed), *(_split_record(r) for r in split_rows)]
    for rec in records:
        rec["product"] = list(rec["product"].items())
    pq.write_table(pa.Table.from_pylist(records, schema=CUR_SCHEMA), path)
    return path


def _exact(column: str) -> str:
    """A CUR double as the exact decimal it prints as (what CUR's figure says)."""
    return f"CAST(CAST({column} AS VARCHAR) AS DECIMAL(38, 18))"


def open_views(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """``split`` (the reader's split_view columns) and ``lines`` (the cluster's billed lines,
    FOCUS names: tagged with the node group's tag, or the cluster's own ARN)."""
    source = f"read_parquet('{path}', filename = true, file_row_number = true)"
    con.execute(
        f"""CREATE TEMP VIEW split AS SELECT filename AS x_file,
               CAST(file_row_number + 1 AS BIGINT) AS x_row,
               line_item_usage_start_date AS ChargePeriodStart,
               line_item_usage_end_date AS ChargePeriodEnd,
               split_line_item_parent_resource_id AS ParentResourceId,
               COALESCE(resource_tags['aws_eks_cluster_name'], '') AS Cluster,
               COALESCE(resource_tags['aws_eks_namespace'], '') AS Namespace,
               COALESCE(resource_tags['aws_eks_workload_name'], '') AS WorkloadName,
               COALESCE(resource_tags['aws_eks_workload_type'], '') AS WorkloadType,
               COALESCE(resource_tags['aws_eks_node'], '') AS Node,
               line_item_resource_id AS Pod,
               {_exact("split_line_item_split_cost")} AS SplitCost,
               {_exact("split_line_item_unused_cost")} AS UnusedCost,
               CAST(to_json(resource_tags) AS VARCHAR) AS Tags
           FROM {source} WHERE split_line_item_parent_resource_id IS NOT NULL"""
    )
    con.execute(
        f"""CREATE TEMP VIEW lines AS SELECT filename AS x_file,
               CAST(file_row_number + 1 AS BIGINT) AS x_row,
               line_item_usage_start_date AS ChargePeriodStart,
               line_item_usage_end_date AS ChargePeriodEnd,
               line_item_resource_id AS ResourceId, product['product_name'] AS ServiceName,
               product['product_family'] AS ResourceType,
               {_exact("line_item_unblended_cost")} AS BilledCost,
               CASE line_item_line_item_type
                 WHEN 'SavingsPlanCoveredUsage'
                   THEN {_exact("savings_plan_savings_plan_effective_cost")}
                 WHEN 'SavingsPlanNegation' THEN CAST(0 AS DECIMAL(38, 18))
                 ELSE {_exact("line_item_unblended_cost")} END AS EffectiveCost
           FROM {source}
           WHERE split_line_item_parent_resource_id IS NULL
             AND (resource_tags['user_eks_cluster_name'] = '{CLUSTER}'
                  OR line_item_resource_id LIKE '%:cluster/{CLUSTER}')"""
    )


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    open_views(connection, write_cur(tmp_path / "cur.parquet"))
    return connection


def _micros(value: Decimal) -> int:
    return int((value.quantize(MICRO, rounding=ROUND_HALF_EVEN) / MICRO).to_integral_value())


def test_cur_figures_follow_aws_two_rows_per_pod_and_add_up_to_each_instance() -> None:
    """The fixture itself: two rows per pod (vCPU and GB), and per instance Σ split + unused =
    its amortized cost exactly, as AWS splits it."""
    per_pod: dict[str, list[str]] = {}
    for row in SPLIT_ROWS:
        per_pod.setdefault(row["pod"], []).append(row["usage"])
    assert all(sorted(u) == ["GB", "vCPU"] for u in per_pod.values()) and len(per_pod) == 4
    for parent, cost in (("i-0aaa", COST_A), ("i-0bbb", COST_B)):
        rows = [r for r in SPLIT_ROWS if r["parent"] == parent]
        assert sum(r["split"] + r["unused"] for r in rows) == cost
        assert all(r["split"] == r["split"].quantize(PLACES) for r in rows)


def test_pods_and_idle_rows_with_exact_amounts(con: duckdb.DuckDBPyConnection) -> None:
    costs = split_cost_costs(con, "split", CLUSTER, origin="cur.parquet")
    assert list(costs.columns) == [*COST_REQUIRED_COLUMNS, "amount"]
    assert str(costs["window_start"].dtype) == "datetime64[ns, UTC]"
    assert str(costs["amount"].dtype) == "int64"
    assert (costs["window_start"] == START).all() and (costs["window_end"] == END).all()
    assert (costs["cluster"] == CLUSTER).all()

    expected: dict[tuple[str, str, str, str, str], Decimal] = {}
    for r in SPLIT_ROWS:
        pod_key = (
            f"{r['ns']}/{r['pod']}",
            r["node"],
            r["ns"],
            (r["kind"] or "").lower(),
            r["workload"] or "",
        )
        idle_key = (IDLE, r["node"], "", "", "")
        expected[pod_key] = expected.get(pod_key, Decimal(0)) + r["split"]
        expected[idle_key] = expected.get(idle_key, Decimal(0)) + r["unused"]
    got = {
        (row.name, row.node, row.namespace, row.controller_kind, row.controller): row.amount
        for row in costs.itertuples()
    }
    assert got == {key: _micros(value) for key, value in expected.items()}
    assert len(costs) == 6  # four pods (two rows each, summed) and one idle row per node

    by_name = costs.set_index("name")
    assert by_name.loc["ingress/edge-proxy-x7k2p", "amount"] == 19816  # the tie, to even
    assert by_name.loc["default/debug-shell", "amount"] == 1  # rounded once, not per row
    assert by_name.loc["default/debug-shell", "controller"] == ""  # no workload tags
    assert by_name.loc["saas/api-1", "controller_kind"] == "deployment"
    assert by_name.loc["saas/api-1", "pod"] == "api-1"
    assert (costs["total_cost"] * 1_000_000).round().astype("int64").equals(costs["amount"])
    assert costs["origin"].str.match(r".*cur\.parquet:row \d+$").all()


def test_split_plus_unused_is_the_instance_amortized_cost(con: duckdb.DuckDBPyConnection) -> None:
    """Per instance: Σ split + unused (exact) = Σ EffectiveCost of its instance-hour lines
    (Savings Plan covered usage and its negation), and the micro amounts of its pods and
    idle row are each that exact figure's rounding."""
    exact = dict(
        con.execute(
            "SELECT ParentResourceId, SUM(SplitCost) + SUM(UnusedCost) FROM split GROUP BY 1"
        ).fetchall()
    )
    amortized = dict(
        con.execute(
            "SELECT ResourceId, SUM(EffectiveCost) FROM lines WHERE ResourceType = "
            "'Compute Instance' GROUP BY 1"
        ).fetchall()
    )
    assert exact == amortized == {"i-0aaa": COST_A, "i-0bbb": COST_B}
    costs = split_cost_costs(con, "split", CLUSTER, origin="cur.parquet")
    for node, cost in ((NODE_A, COST_A), (NODE_B, COST_B)):
        total = int(costs.loc[costs["node"] == node, "amount"].sum())
        assert abs(total - _micros(cost)) <= len(costs[costs["node"] == node]) // 2 + 1


def test_unsplit_lines_hold_the_rest_and_nothing_twice(con: duckdb.DuckDBPyConnection) -> None:
    rest = unsplit_lines(con, "lines", "split", CLUSTER)
    got = {
        (r.part, r.ServiceName, r.ResourceType): (r.effective_cost, r.amount, r.lines)
        for r in rest.itertuples()
    }
    ec2, eks, elb = (
        "Amazon Elastic Compute Cloud",
        "Amazon Elastic Kubernetes Service",
        "Elastic Load Balancing",
    )
    assert got == {
        (UnsplitPart.NOT_SPLIT, ec2, "Storage"): (2 * VOLUME, _micros(2 * VOLUME), 2),
        (UnsplitPart.NOT_SPLIT, eks, "Compute"): (Decimal("0.10"), 100_000, 1),
        (UnsplitPart.NOT_SPLIT, elb, "Load Balancer-Application"): (Decimal("0.0252"), 25_200, 1),
        # instance A's data transfer line carries its id: beyond AWS's split, named after
        # the instance's largest line; instance B's line is its split exactly (adds 0); the
        # group counts the 4 parent lines (A's covered usage, negation, transfer; B's usage)
        (UnsplitPart.PARENT_REMAINDER, ec2, "Compute Instance"): (DATA_TRANSFER, 1235, 4),
    }
    assert all(isinstance(v, Decimal) for v in rest["effective_cost"])
    # conservation: the cluster's billed lines = split + unused + the rest, exactly
    billed = con.execute("SELECT SUM(EffectiveCost) FROM lines").fetchall()[0][0]
    split = con.execute(
        "SELECT SUM(SplitCost) + SUM(UnusedCost) FROM split WHERE Cluster = ?", [CLUSTER]
    ).fetchall()[0][0]
    assert billed == split + sum(rest["effective_cost"], Decimal(0))


def test_instance_line_missing_from_the_cluster_match_is_an_error(tmp_path: Path) -> None:
    billed = [b for b in BILLED if b["rid"] != "i-0bbb"]  # B's line lacks the cluster tag
    connection = duckdb.connect()
    open_views(connection, write_cur(tmp_path / "cur.parquet", billed=billed))
    with pytest.raises(InputError) as err:
        unsplit_lines(connection, "lines", "split", CLUSTER)
    message = str(err.value)
    assert "cur.parquet, row " in message and "column 'ParentResourceId'" in message
    assert "'i-0bbb'" in message and "counted twice" in message


def test_no_split_rows_of_the_cluster_is_an_error(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError) as err:
        split_cost_costs(con, "split", "prod-lyon", origin="billing/2026-11/")
    message = str(err.value)
    assert "cluster 'prod-lyon'" in message and "billing/2026-11/" in message
    assert f"'{CLUSTER}'" in message  # the clusters the split rows do name


def test_split_cluster_named_otherwise_than_opencost(con: duckdb.DuckDBPyConnection) -> None:
    costs = split_cost_costs(con, "split", "paris", origin="cur", eks_cluster=CLUSTER)
    assert (costs["cluster"] == "paris").all() and len(costs) == 6


def test_negative_split_cost_names_file_row_and_column(tmp_path: Path) -> None:
    rows = [dict(r) for r in SPLIT_ROWS]
    rows[5]["split"] = Decimal("-0.01")
    connection = duckdb.connect()
    open_views(connection, write_cur(tmp_path / "cur.parquet", split_rows=rows))
    with pytest.raises(InputError) as err:
        split_cost_costs(connection, "split", CLUSTER, origin="cur.parquet")
    row_number = len(BILLED) + 6  # billed lines first, then the split rows (1-based)
    assert f"cur.parquet, row {row_number}, column 'SplitCost'" in str(err.value)
    assert "negative (-0.01" in str(err.value)


TEN_PLACES = st.integers(min_value=0, max_value=5 * 10**9).map(lambda n: Decimal(n) / 10**10)
SPLIT_ROW = st.tuples(
    st.integers(0, 2),  # hour
    st.sampled_from(["i-01", "i-02", "i-03"]),  # parent instance (its node)
    st.sampled_from(["saas", "ingress"]),
    st.sampled_from(["api-1", "api-2", "worker-1"]),
    TEN_PLACES,  # split cost
    TEN_PLACES,  # unused cost
)


def _split_table(rows: list[tuple[int, str, str, str, Decimal, Decimal]]) -> pa.Table:
    money = pa.decimal128(38, 18)
    starts = [START + pd.Timedelta(hours=h) for h, *_ in rows]
    return pa.table(
        {
            "x_file": ["cur.parquet"] * len(rows),
            "x_row": pa.array(range(2, len(rows) + 2), pa.int64()),
            "ChargePeriodStart": pa.array(starts, pa.timestamp("us", tz="UTC")),
            "ChargePeriodEnd": pa.array(
                [s + pd.Timedelta(hours=1) for s in starts], pa.timestamp("us", tz="UTC")
            ),
            "ParentResourceId": [r[1] for r in rows],
            "Cluster": [CLUSTER] * len(rows),
            "Namespace": [r[2] for r in rows],
            "WorkloadName": [r[3].split("-")[0] for r in rows],
            "WorkloadType": ["Deployment"] * len(rows),
            "Node": [f"node-{r[1]}" for r in rows],
            "Pod": [_pod_arn(r[2], r[3]) for r in rows],
            "SplitCost": pa.array([r[4] for r in rows], money),
            "UnusedCost": pa.array([r[5] for r in rows], money),
            "Tags": ["{}"] * len(rows),
        }
    )


@settings(max_examples=25, deadline=None)
@given(rows=st.lists(SPLIT_ROW, min_size=1, max_size=30), seed=st.randoms())
def test_amounts_are_exact_sums_rounded_once_in_any_row_order(
    rows: list[tuple[int, str, str, str, Decimal, Decimal]], seed: Any
) -> None:
    """Every pod and idle amount is the half-even rounding of its rows' exact sum; the
    cluster's lines = split + unused + the rest, exactly; row order changes nothing."""
    table = _split_table(rows)
    shuffled = table.take(pa.array(seed.sample(range(len(rows)), len(rows))))
    frames = []
    for split in (table, shuffled):
        connection = duckdb.connect()
        connection.execute("SET TimeZone = 'UTC'")
        connection.register("split", split)
        frames.append(split_cost_costs(connection, "split", CLUSTER, origin="cur"))
    pd.testing.assert_frame_equal(frames[0], frames[1])

    expected: dict[tuple[pd.Timestamp, str, str], Decimal] = {}
    for h, parent, ns, pod, split_cost, unused in rows:
        when = START + pd.Timedelta(hours=h)
        for key, value in (((when, f"node-{parent}", f"{ns}/{pod}"), split_cost),
                           ((when, f"node-{parent}", IDLE), unused)):  # fmt: skip
            expected[key] = expected.get(key, Decimal(0)) + value
    got = {(r.window_start, r.node, r.name): r.amount for r in frames[0].itertuples()}
    assert got == {key: _micros(value) for key, value in expected.items()}

    # each parent instance billed per hour at a figure of its own, plus a volume per hour
    connection.execute(
        """CREATE TEMP VIEW lines AS
           SELECT ParentResourceId AS ResourceId, ChargePeriodStart, ChargePeriodEnd,
                  'Amazon Elastic Compute Cloud' AS ServiceName, 'Instance' AS ResourceType,
                  SUM(SplitCost) + SUM(UnusedCost) + 0.0000001 * COUNT(*) AS EffectiveCost
           FROM split GROUP BY ALL
           UNION ALL
           SELECT DISTINCT 'vol-1', ChargePeriodStart, ChargePeriodEnd,
                  'Amazon Elastic Block Store', 'Volume', CAST(0.0109589041 AS DECIMAL(38, 18))
           FROM split"""
    )
    rest = unsplit_lines(connection, "lines", "split", CLUSTER)
    billed = connection.execute("SELECT SUM(EffectiveCost) FROM lines").fetchall()[0][0]
    split_sum = sum((r[4] + r[5] for r in rows), Decimal(0))
    assert billed == split_sum + sum(rest["effective_cost"], Decimal(0))
    assert set(rest["part"]) == {UnsplitPart.NOT_SPLIT, UnsplitPart.PARENT_REMAINDER}


def test_pod_cost_beyond_the_row_limit_is_an_error(tmp_path: Path) -> None:
    rows = [dict(r) for r in SPLIT_ROWS]
    rows[0]["split"] = Decimal("2000000000")  # 2e9 a pod-hour: beyond what a row may hold
    connection = duckdb.connect()
    open_views(connection, write_cur(tmp_path / "cur.parquet", split_rows=rows))
    with pytest.raises(InputError) as err:
        split_cost_costs(connection, "split", CLUSTER, origin="cur.parquet")
    assert f"cur.parquet, row {len(BILLED) + 1}" in str(err.value)
