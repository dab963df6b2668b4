"""The bundled example inputs match the figures their READMEs give, and the golden files are
up to date.

These tests do not exercise tenantcost; they guard the inputs and the independent golden figures
that the engine tests compare against (tests/golden/compute_goldens.py).
"""

from __future__ import annotations

import csv
import importlib.util
import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).resolve().parent

COST_FIELDS = (
    "cpuCost",
    "cpuCostAdjustment",
    "gpuCost",
    "gpuCostAdjustment",
    "ramCost",
    "ramCostAdjustment",
    "pvCost",
    "pvCostAdjustment",
    "networkCost",
    "networkCostAdjustment",
    "loadBalancerCost",
    "loadBalancerCostAdjustment",
    "sharedCost",
    "externalCost",
)


def _load_goldens_module():
    spec = importlib.util.spec_from_file_location("compute_goldens", GOLDEN / "compute_goldens.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> dict[str, dict]:
    doc = json.loads(path.read_text(), parse_float=Decimal)
    assert doc["code"] == 200 and doc["status"] == "success"
    assert len(doc["data"]) == 1
    return doc["data"][0]


@pytest.mark.parametrize("example", ["saas-three-clients", "idle-three-teams"])
def test_opencost_rows_add_up_at_five_decimals(example: str) -> None:
    for name, row in _rows(EXAMPLES / example / "costs.json").items():
        assert row["name"] == name
        parts = sum((Decimal(str(row[f])) for f in COST_FIELDS), Decimal(0))
        assert parts == row["totalCost"], name
        assert row["cpuCost"] + row["ramCost"] == row["totalCost"], name
        assert row["totalCost"] == row["totalCost"].quantize(Decimal("0.00001")), name


def test_saas_costs_match_domain() -> None:
    rows = _rows(EXAMPLES / "saas-three-clients" / "costs.json")
    total = {name: row["totalCost"] for name, row in rows.items()}
    assert sum(total.values()) == Decimal("0.57844")
    assert total["cluster-one/saas/deployment:api"] == Decimal("0.0588")
    assert total["cluster-one/saas/deployment:import-worker"] == Decimal("0.0784")
    assert total["cluster-one/saas/deployment:capacity-reserve"] == Decimal("0.0672")
    assert total["cluster-one/ingress/daemonset:edge-proxy"] == Decimal("0.0091")
    assert (
        total["cluster-one/monitoring/statefulset:prometheus"]
        + total["cluster-one/opencost/deployment:opencost"]
    ) == Decimal("0.03792")
    assert total["cluster-one/loadtest/job:k6"] == Decimal("0.00511")
    assert total["__idle__"] == Decimal("0.32191")
    assert rows["__idle__"]["properties"] == {"cluster": "cluster-one"}


def test_saas_usage_shares_match_domain() -> None:
    with (EXAMPLES / "saas-three-clients" / "usage.csv").open(newline="") as fh:
        usage = list(csv.DictReader(fh))
    expected = {  # examples/saas-three-clients/README.md, percent, clients a / b / c
        ("api", "requests"): ("97.0", "2.5", "0.5"),
        ("api", "cpu_seconds"): ("88.4", "11.1", "0.5"),
        ("import-worker", "requests"): ("40.1", "55.7", "4.2"),
        ("import-worker", "cpu_seconds"): ("4.5", "94.3", "1.2"),
    }
    for (service, key), shares in expected.items():
        values = {r["client"]: Decimal(r[key]) for r in usage if r["service"] == service}
        total = sum(values.values())
        got = tuple(
            str((values[c] / total * 100).quantize(Decimal("0.1")))
            for c in ("client-a", "client-b", "client-c")
        )
        assert got == shares, (service, key)


def test_idle_rule_files_differ_only_in_idle_method() -> None:
    folder = EXAMPLES / "idle-three-teams"
    loaded = {
        m: yaml.safe_load((folder / f"rules-{m}.yaml").read_text())
        for m in ("keep", "even", "proportional")
    }
    for method, doc in loaded.items():
        assert doc["rules"][0]["idle"] == method
        doc["rules"][0]["idle"] = None
    assert loaded["keep"] == loaded["even"] == loaded["proportional"]


def test_golden_files_are_current() -> None:
    module = _load_goldens_module()
    for name, compute in (
        ("saas-three-clients", module.saas_three_clients),
        ("idle-three-teams", module.idle_three_teams),
    ):
        fresh = json.loads(json.dumps(compute()))
        stored = json.loads((GOLDEN / f"{name}.json").read_text())
        assert fresh == stored, f"run python tests/golden/compute_goldens.py ({name})"


def test_saas_cascade_closes_for_every_key() -> None:
    golden = json.loads((GOLDEN / "saas-three-clients.json").read_text())
    assert golden["reference_total"] == 643440
    for variant in ("default", "requests", "cpu_seconds", "even"):
        block = golden["keys"][variant]
        clients = sum(c["amount"] for c in block["clients"].values())
        rest = block["unattributed"] + sum(block["residual"].values()) + block["exclusions_total"]
        assert clients + rest == golden["reference_total"], variant
