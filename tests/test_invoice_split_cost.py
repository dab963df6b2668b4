"""``costs_from: split_cost_allocation`` end to end: a CUR 2.0 hour with EKS split rows, read by
the reader, priced by AWS's split instead of OpenCost, closed on the invoice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenantcost.allocate import allocate
from tenantcost.billing import prepare_billing
from tenantcost.errors import InputError
from tenantcost.invoice import invoice_cascade
from tenantcost.readers.billing import open_billing
from tenantcost.split import connect
from tenantcost.tables import empty_costs
from tests.billing_files import cur2_rows, write_cur2
from tests.factories import costs, rules, usage

RULES = """
currency: USD
billing:
  clusters:
    - {name: prod-paris, match: {tags: {"eks:cluster-name": prod-paris}},
       costs_from: split_cost_allocation}
rules:
  - id: v1
    effective_from: "2026-11-01"
    workloads:
      - {match: {namespace: api}, class: shared, service: api, key: requests}
      - {match: {namespace: batch}, class: overhead}
      - {match: {name: __idle__}, class: idle}
    billed:
      - {match: {ServiceName: Amazon Relational Database Service}, class: shared,
         key: requests, services: [api]}
      - {match: {ChargeCategory: Tax}, class: overhead}
"""
HOUR = {"line_item_usage_start_date": "2026-11-03T00:00:00Z",
        "line_item_usage_end_date": "2026-11-03T01:00:00Z"}  # fmt: skip


def pod(name: str, namespace: str, split_cost: str, unused: str) -> dict[str, Any]:
    return {
        "line_item_unblended_cost": "0", "line_item_resource_id": f"arn:pod/{name}",
        "split_line_item_parent_resource_id": "i-node", "split_line_item_split_cost": split_cost,
        "split_line_item_unused_cost": unused,
        "resource_tags": {"aws:eks:cluster-name": "prod-paris", "aws:eks:namespace": namespace,
                          "aws:eks:workload-name": name, "aws:eks:workload-type": "Deployment",
                          "aws:eks:node": "ip-10-0-0-1"},
    }  # fmt: skip


def bill(tmp_path: Path) -> Path:
    cluster = {"eks:cluster-name": "prod-paris"}
    return write_cur2(tmp_path / "cur.parquet", cur2_rows(
        {"line_item_resource_id": "i-node", "line_item_unblended_cost": "0.096",
         "resource_tags": cluster},
        {"line_item_resource_id": "vol-1", "line_item_unblended_cost": "0.0137",
         "product_product_family": "Storage", "resource_tags": cluster},
        {"line_item_resource_id": "db-1", "line_item_unblended_cost": "0.05",
         "product": {"product_name": "Amazon Relational Database Service"}, "resource_tags": {}},
        {"line_item_line_item_type": "Tax", "line_item_unblended_cost": "0.01",
         "resource_tags": {}},
        pod("api-1", "api", "0.03", "0.0100000001"),
        pod("batch-1", "batch", "0.04", "0.0159999999"),
    ))  # fmt: skip


def run(path: Path, cost: Any = None) -> tuple[Any, Any, Any]:
    con = connect()
    ruleset = rules(RULES)
    data = open_billing([path], con, currency="USD")
    cost = empty_costs() if cost is None else cost
    billing = prepare_billing(cost, con, data.view, ruleset, period=None,
                              split_view=data.split_view)  # fmt: skip
    use = usage([{"h": 48, "service": "api", "client": "a", "requests": 3.0},
                 {"h": 48, "service": "api", "client": "b", "requests": 1.0}])  # fmt: skip
    result = allocate(billing.costs, use, ruleset, billed=billing)
    return result, billing, invoice_cascade(result, billing)


def test_split_rows_price_the_cluster_and_the_invoice_closes(tmp_path: Path) -> None:
    result, billing, invoice = run(bill(tmp_path))
    assert invoice.gap == 0
    assert invoice.billed_total == 96_000 + 13_700 + 50_000 + 10_000
    assert billing.repricing.empty  # nothing of OpenCost to reprice
    # api pod 0.03 + RDS 0.05, split 3:1 by requests; idle = the node's unused cost
    totals = dict(zip(result.client_totals()["client"], result.client_totals()["amount"],
                      strict=True))  # fmt: skip
    assert totals == {"a": 22_500 + 37_500, "b": 7_500 + 12_500}
    residual = result.residual.groupby("name")["amount"].sum().to_dict()
    assert residual["__idle__"] == 26_000
    assert residual["batch/batch-1"] == 40_000
    assert residual["Amazon Elastic Compute Cloud Storage"] == 13_700  # the volume, by service
    assert residual["billed: Tax"] == 10_000
    assert result.reference_total == invoice.effective_in_scope


def test_opencost_rows_of_a_split_cluster_would_count_it_twice(tmp_path: Path) -> None:
    opencost = costs([{"h": 48, "cluster": "prod-paris", "namespace": "api", "total_cost": 0.1}])
    with pytest.raises(InputError, match="would count the cluster twice"):
        run(bill(tmp_path), opencost)
