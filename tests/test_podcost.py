"""Node-price cost model (``tenantcost podcost``): the worked examples of
examples/node-price-model/README.md, edge cases, errors.

Tolerances, and why:

* The published worked examples give hourly figures to 4 decimals and some of them are
  truncated rather than rounded (team B's 0.02875 USD/h is published as 0.0287), so hourly
  figures are checked within 0.0001 USD/h (one unit of the last published digit).
* Monthly figures are published to the cent and, for the examples checked here, are the exact
  figures rounded once, so they are checked within 0.005 USD (half a cent).
* Exact formulas (unit prices, scaled or raised amounts) are checked within 2 micro-units
  (``TOL``): every output amount is a whole number of micro-units (10^-6 USD, as everywhere in
  tenantcost), each component is less than one micro-unit from its exact value, and a total adds
  at most two components per resource. Published unit prices (0.0398 / 0.00442) are checked
  within half a unit of their last digit.
* Conservation (pods + idle + system = node price × hours) is checked *exactly* in micro-units:
  the rows of one node and window are rounded together with the largest-remainder method, so
  the allocation core's reference total equals the node bill to the micro-unit.
* The CSV round trip is exact: floats are written with Python's shortest round-trip repr.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tenantcost.allocate import allocate
from tenantcost.config.cost_model import CostModel
from tenantcost.config.rules import load_rules, parse_rules
from tenantcost.errors import InputError, InputWarning
from tenantcost.money import to_micros
from tenantcost.podcost import (
    IDLE,
    SYSTEM,
    podcost,
    podcost_from_files,
    read_nodes,
    read_pods,
    write_podcost,
)
from tenantcost.readers.costs import read_costs
from tenantcost.tables import COST_REQUIRED_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "node-price-model"

NODE_HEADER = "node,pool,vcpu,memory_gib,allocatable_vcpu,allocatable_memory_gib,hourly_price\n"
POD_HEADER = (
    "window_start,window_end,node,namespace,controller_kind,controller,pod,"
    "cpu_request,cpu_usage,memory_request_gib,memory_usage_gib\n"
)
H0 = "2026-01-01T00:00:00Z,2026-01-01T01:00:00Z"
H1 = "2026-01-01T01:00:00Z,2026-01-01T02:00:00Z"
MONTH = "2026-01-01T00:00:00Z,2026-01-31T10:00:00Z"  # 730 hours

M6I_LARGE = "node-a,general,2,8,2,8,0.115\n"
M6I_XLARGE = "node-b,general,4,16,4,16,0.23\n"
MIB_600 = 600 / 1024

TOL = 2e-6
"""Two micro-units: see the module docstring."""

WEIGHTS = CostModel.model_validate({"weights": {"cpu": 9, "memory": 1}})
AUTOPILOT = {"unit_prices": {"cpu": 0.0573, "memory": 0.0063421}, "billing": "requests"}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def pod(
    ns: str,
    name: str,
    node: str,
    cpu_req: object,
    cpu_use: object,
    mem_req: object,
    mem_use: object,
    window: str = H0,
    kind: str = "deployment",
    controller: str = "app",
) -> str:
    cells = [cpu_req, cpu_use, mem_req, mem_use]
    numbers = ",".join("" if c is None else str(c) for c in cells)
    return f"{window},{node},{ns},{kind},{controller},{name},{numbers}\n"


def run(
    tmp_path: Path, nodes: str | None, pods: str, model: CostModel | dict = WEIGHTS
) -> pd.DataFrame:
    """podcost on CSV text, through the real readers; fails on any unexpected warning."""
    model = model if isinstance(model, CostModel) else CostModel.model_validate(model)
    node_frame = None
    if nodes is not None:
        node_frame = read_nodes(write(tmp_path / "nodes.csv", NODE_HEADER + nodes))
    pod_frame = read_pods(write(tmp_path / "pods.csv", POD_HEADER + pods))
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        return podcost(node_frame, pod_frame, model)


def run_warned(
    tmp_path: Path, nodes: str | None, pods: str, model: CostModel | dict = WEIGHTS
) -> tuple[pd.DataFrame, list[str]]:
    model = model if isinstance(model, CostModel) else CostModel.model_validate(model)
    node_frame = None
    if nodes is not None:
        node_frame = read_nodes(write(tmp_path / "nodes.csv", NODE_HEADER + nodes))
    pod_frame = read_pods(write(tmp_path / "pods.csv", POD_HEADER + pods))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = podcost(node_frame, pod_frame, model)
    return frame, [str(w.message) for w in caught if issubclass(w.category, InputWarning)]


def cost(frame: pd.DataFrame, name: str, column: str = "total_cost") -> float:
    rows = frame[frame["name"] == name]
    assert len(rows) >= 1, f"no row {name!r}"
    return float(rows[column].sum())


def node_total(frame: pd.DataFrame, node: str) -> float:
    return float(frame.loc[frame["node"] == node, "total_cost"].sum())


def node_micros(frame: pd.DataFrame, node: str) -> int:
    """A node's rows in micro-units, as the allocation core converts them."""
    return int(to_micros(frame.loc[frame["node"] == node, "total_cost"]).sum())


def micros(amount: float) -> int:
    return round(amount * 1_000_000)


def section2_pods(window: str = H0) -> str:
    # Pod 1: requests 500m / 1 GiB, uses 200m / 600 MiB. Pod 2: 250m / 512 MiB, uses 800m.
    return pod("shop", "pod-1", "node-a", 0.5, 0.2, 1, MIB_600, window) + pod(
        "shop", "pod-2", "node-a", 0.25, 0.8, 0.5, 0.4, window
    )


def section3_pods(window: str = H0) -> str:
    return (
        pod("team-a", "a-0", "node-b", 1.5, 0.9, 4, 2.8, window)
        + pod("team-b", "b-0", "node-b", 0.5, 0.3, 2, 1.2, window)
        + pod("team-c", "c-0", "node-b", 0.5, 0.2, 2, 1.1, window)
    )


# ------------------------------------------------------------ one m6i.large, two pods; Autopilot


def test_weights_unit_prices_match_domain(tmp_path):
    # One pod of exactly 1 vCPU and one of exactly 1 GiB reveal the unit prices.
    frame = run(
        tmp_path,
        M6I_LARGE,
        pod("x", "cpu", "node-a", 1, 0, 0, 0) + pod("x", "mem", "node-a", 0, 0, 1, 0),
    )
    per_vcpu = cost(frame, "x/cpu")
    per_gib = cost(frame, "x/mem")
    assert per_vcpu == pytest.approx(0.115 * 18 / 26 / 2, abs=TOL)  # 0.039808
    assert per_gib == pytest.approx(0.115 * 8 / 26 / 8, abs=TOL)  # 0.0044231
    assert abs(per_vcpu - 0.0398) <= 0.00005
    assert abs(per_gib - 0.00442) <= 0.000005


def test_section2_pods_and_idle_per_hour(tmp_path):
    frame = run(tmp_path, M6I_LARGE, section2_pods())
    pod1, pod2 = cost(frame, "shop/pod-1"), cost(frame, "shop/pod-2")
    assert abs(pod1 - 0.0243) <= 0.0001  # charged 0.5 vCPU (request) and 1 GiB (request)
    assert abs(pod2 - 0.0341) <= 0.0001  # charged 0.8 vCPU (usage) and 0.5 GiB (request)
    assert abs(pod1 + pod2 - 0.0584) <= 0.0001
    assert abs(cost(frame, IDLE) - 0.0566) <= 0.0001
    assert cost(frame, SYSTEM) == 0.0  # allocatable = capacity in the worked example
    assert node_micros(frame, "node-a") == micros(0.115)


def test_section2_per_730_hour_month(tmp_path):
    frame = run(tmp_path, M6I_LARGE, section2_pods(MONTH))
    assert abs(cost(frame, "shop/pod-1") - 17.76) <= 0.005
    assert abs(cost(frame, "shop/pod-2") - 24.86) <= 0.005
    assert node_micros(frame, "node-a") == micros(0.115 * 730)


def test_section2_autopilot_unit_prices_bill_requests_without_node_or_idle(tmp_path):
    hourly = run(tmp_path, None, section2_pods(), AUTOPILOT)
    assert abs(cost(hourly, "shop/pod-1") - 0.0350) <= 0.0001
    assert set(hourly["name"]) == {"shop/pod-1", "shop/pod-2"}  # no idle, no system
    monthly = run(tmp_path, None, section2_pods(MONTH), AUTOPILOT)
    assert abs(cost(monthly, "shop/pod-1") - 25.54) <= 0.005
    # Requests only: pod 2's 800m of usage is not billed, its 250m request is.
    assert cost(hourly, "shop/pod-2") == pytest.approx(0.25 * 0.0573 + 0.5 * 0.0063421, abs=TOL)


# -------------------------------------------------------------- one m6i.xlarge, three teams, idle


def test_section3_three_teams_and_idle(tmp_path):
    frame = run(tmp_path, M6I_XLARGE, section3_pods())
    a, b, c = (cost(frame, f"team-{t}/{t}-0") for t in "abc")
    assert abs(a - 0.0774) <= 0.0001
    assert abs(b - 0.0287) <= 0.0001 and b == c
    assert abs(a + b + c - 0.1349) <= 0.0001
    idle = cost(frame, IDLE)
    assert abs(idle - 0.0951) <= 0.0001
    assert round(idle / 0.23, 2) == 0.41
    monthly = run(tmp_path, M6I_XLARGE, section3_pods(MONTH))
    assert abs(cost(monthly, "team-a/a-0") - 56.50) <= 0.005
    assert abs(cost(monthly, IDLE) - 69.42) <= 0.005


def test_idle_is_one_row_per_resource_and_node(tmp_path):
    frame = run(tmp_path, M6I_XLARGE, section3_pods())
    idle = frame[frame["name"] == IDLE].reset_index(drop=True)
    assert len(idle) == 2
    unit_cpu, unit_mem = 0.23 * 36 / 52 / 4, 0.23 * 16 / 52 / 16
    # CPU row: 4 - 2.5 vCPU unrequested; memory row: 16 - 8 GiB.
    assert idle.loc[0, "cpu_cost"] == pytest.approx(1.5 * unit_cpu, abs=TOL)
    assert idle.loc[0, "memory_cost"] == 0.0
    assert idle.loc[1, "cpu_cost"] == 0.0
    assert idle.loc[1, "memory_cost"] == pytest.approx(8 * unit_mem, abs=TOL)
    assert (idle[["namespace", "controller_kind", "controller", "pod"]] == "").all().all()
    assert (idle["node"] == "node-b").all()
    assert (idle["origin"].str.endswith("nodes.csv:row 2")).all()


# --------------------------------------------------------------------------- models and billing


def test_fractions_model_matches_domain_section4_unit_prices(tmp_path):
    model = {"fractions": {"cpu": 0.6, "memory": 0.4}}
    frame = run(
        tmp_path,
        "n,general,2,8,2,8,0.112\n",
        pod("x", "cpu", "n", 1, 0, 0, 0) + pod("x", "mem", "n", 0, 0, 1, 0),
        model,
    )
    assert cost(frame, "x/cpu") == pytest.approx(0.0336, abs=TOL)
    assert cost(frame, "x/mem") == pytest.approx(0.0056, abs=TOL)
    assert node_micros(frame, "n") == micros(0.112)


def test_best_effort_pod_pays_its_usage(tmp_path):
    frame = run(tmp_path, M6I_LARGE, pod("t", "debug", "node-a", None, 0.1, None, 0.25))
    unit_cpu, unit_mem = 0.115 * 18 / 26 / 2, 0.115 * 8 / 26 / 8
    assert cost(frame, "t/debug", "cpu_cost") == pytest.approx(0.1 * unit_cpu, abs=TOL)
    assert cost(frame, "t/debug", "memory_cost") == pytest.approx(0.25 * unit_mem, abs=TOL)


def test_missing_usage_metric_charges_the_request_with_a_warning(tmp_path):
    frame, warned = run_warned(tmp_path, M6I_LARGE, pod("s", "p", "node-a", 0.5, None, 1, None))
    unit_cpu, unit_mem = 0.115 * 18 / 26 / 2, 0.115 * 8 / 26 / 8
    assert cost(frame, "s/p") == pytest.approx(0.5 * unit_cpu + 1 * unit_mem, abs=TOL)
    assert len(warned) == 1 and "no usage" in warned[0] and "pods.csv:row 2" in warned[0]


def test_requests_billing_ignores_usage_and_leaves_it_in_idle(tmp_path):
    pods = pod("s", "burst", "node-a", 0.25, 1.5, 0.5, 3)
    usage = run(tmp_path, M6I_LARGE, pods)
    requests = run(
        tmp_path, M6I_LARGE, pods, {"weights": {"cpu": 9, "memory": 1}, "billing": "requests"}
    )
    unit_cpu, unit_mem = 0.115 * 18 / 26 / 2, 0.115 * 8 / 26 / 8
    assert cost(usage, "s/burst") == pytest.approx(1.5 * unit_cpu + 3 * unit_mem, abs=TOL)
    assert cost(requests, "s/burst") == pytest.approx(0.25 * unit_cpu + 0.5 * unit_mem, abs=TOL)
    assert "raise_cost" not in requests.columns  # no minimums or ratio configured
    for frame in (usage, requests):
        assert node_micros(frame, "node-a") == micros(0.115)


def test_requests_billing_best_effort_pays_nothing_and_is_warned(tmp_path):
    frame, warned = run_warned(
        tmp_path, None, pod("t", "debug", "n", None, 0.1, None, 0.25), AUTOPILOT
    )
    assert cost(frame, "t/debug") == 0.0
    assert len(warned) == 2  # one for CPU, one for memory
    assert all("no" in w and "request" in w and "charged nothing" in w for w in warned)


def test_minimums_and_ratio_raise_are_their_own_amount(tmp_path):
    model = {
        **AUTOPILOT,
        "min_cpu": 0.25,
        "min_memory_gib": 0.5,
        "memory_per_cpu": {"min": 1, "max": 6.5},
    }
    pods = (
        pod("s", "fits", "n", 0.5, 0, 1, 0)  # nothing raised
        + pod("t", "none", "n", None, 0.3, None, 0.2)  # BestEffort: raised to the minimums
        + pod("b", "mem-heavy", "n", 0.25, 0, 4, 0)  # 16 GiB/vCPU: CPU raised to 4/6.5
        + pod("b", "cpu-heavy", "n", 2, 0, 0.5, 0)  # 0.25 GiB/vCPU: memory raised to 2 GiB
    )
    frame = run(tmp_path, None, pods, model)
    cpu, mem = 0.0573, 0.0063421
    assert list(frame.columns)[-3:] == ["cpu_cost", "memory_cost", "raise_cost"]
    rows = frame.set_index("name")
    assert rows.loc["s/fits", "raise_cost"] == 0.0
    assert rows.loc["t/none", "cpu_cost"] == 0.0 and rows.loc["t/none", "memory_cost"] == 0.0
    assert rows.loc["t/none", "raise_cost"] == pytest.approx(0.25 * cpu + 0.5 * mem, abs=TOL)
    assert rows.loc["b/mem-heavy", "cpu_cost"] == pytest.approx(0.25 * cpu, abs=TOL)
    assert rows.loc["b/mem-heavy", "raise_cost"] == pytest.approx((4 / 6.5 - 0.25) * cpu, abs=TOL)
    assert rows.loc["b/cpu-heavy", "raise_cost"] == pytest.approx((2 - 0.5) * mem, abs=TOL)
    components = rows["cpu_cost"] + rows["memory_cost"] + rows["raise_cost"]
    assert np.allclose(rows["total_cost"], components, rtol=0, atol=1e-12)


def test_raise_on_a_node_price_model_is_charged_to_the_node(tmp_path):
    model = {"weights": {"cpu": 9, "memory": 1}, "billing": "requests", "min_cpu": 0.5}
    frame = run(tmp_path, M6I_LARGE, pod("s", "small", "node-a", 0.1, 0, 1, 0), model)
    unit_cpu = 0.115 * 18 / 26 / 2
    assert cost(frame, "s/small", "raise_cost") == pytest.approx(0.4 * unit_cpu, abs=TOL)
    idle_cpu = frame[(frame["name"] == IDLE) & (frame["cpu_cost"] > 0)]["cpu_cost"].sum()
    assert idle_cpu == pytest.approx(1.5 * unit_cpu, abs=TOL)  # 2 - 0.5 billed vCPU
    assert node_micros(frame, "node-a") == micros(0.115)


def test_system_row_is_capacity_minus_allocatable_and_idle_uses_allocatable(tmp_path):
    frame = run(tmp_path, "node-a,general,2,8,1.93,7.25,0.115\n", section2_pods())
    unit_cpu, unit_mem = 0.115 * 18 / 26 / 2, 0.115 * 8 / 26 / 8
    system = frame[frame["name"] == SYSTEM]
    assert len(system) == 1
    assert float(system["cpu_cost"].iloc[0]) == pytest.approx(0.07 * unit_cpu, abs=TOL)
    assert float(system["memory_cost"].iloc[0]) == pytest.approx(0.75 * unit_mem, abs=TOL)
    idle = frame[frame["name"] == IDLE]
    assert float(idle["cpu_cost"].sum()) == pytest.approx((1.93 - 1.3) * unit_cpu, abs=TOL)
    assert float(idle["memory_cost"].sum()) == pytest.approx((7.25 - 1.5) * unit_mem, abs=TOL)
    assert node_micros(frame, "node-a") == micros(0.115)


def test_node_without_pods_is_all_idle_and_system_in_every_window(tmp_path):
    pods = section2_pods(H0) + section2_pods(H1)
    frame = run(tmp_path, M6I_LARGE + "spare,general,2,8,1.9,7,0.1\n", pods)
    spare = frame[frame["node"] == "spare"]
    assert sorted(spare["name"]) == [IDLE, IDLE, IDLE, IDLE, SYSTEM, SYSTEM]
    for start in spare["window_start"].unique():
        in_window = spare[spare["window_start"] == start]
        assert in_window["total_cost"].sum() == pytest.approx(0.1, abs=1e-9)


def test_windowed_nodes_run_only_in_their_windows(tmp_path):
    nodes = (
        "node,pool,vcpu,memory_gib,allocatable_vcpu,allocatable_memory_gib,hourly_price,"
        "window_start,window_end\n"
        f"node-a,general,2,8,2,8,0.115,{H0}\n"
        f"node-b,general,4,16,4,16,0.23,{H1}\n"
    )
    node_frame = read_nodes(write(tmp_path / "nodes.csv", nodes))
    pods = section2_pods(H0) + pod("late", "p", "node-a", 0.5, 0, 1, 0, H1)
    pod_frame = read_pods(write(tmp_path / "pods.csv", POD_HEADER + pods))
    with pytest.warns(InputWarning, match="does not list for this window") as caught:
        frame = podcost(node_frame, pod_frame, WEIGHTS)
    assert "2026-01-01T01:00:00+00:00" in str(caught[0].message)
    h0 = frame[frame["window_start"] == pd.Timestamp("2026-01-01T00:00:00Z")]
    h1 = frame[frame["window_start"] == pd.Timestamp("2026-01-01T01:00:00Z")]
    assert set(h0["node"]) == {"node-a"}
    assert h0["total_cost"].sum() == pytest.approx(0.115, abs=1e-9)
    # node-b (empty) is all idle in H1; the late pod is kept and priced at the median.
    assert h1.loc[h1["node"] == "node-b", "total_cost"].sum() == pytest.approx(0.23, abs=1e-9)
    assert cost(h1, "late/p") > 0


def test_empty_pod_file_gives_an_empty_canonical_table(tmp_path):
    frame, warned = run_warned(tmp_path, M6I_LARGE, "")
    assert frame.empty
    assert list(frame.columns) == [*COST_REQUIRED_COLUMNS, "cpu_cost", "memory_cost"]
    assert len(warned) == 1 and "no rows" in warned[0]
    assert write_podcost(frame, "json", None) == "[]\n"


def test_unit_prices_ignore_the_node_file_with_a_warning(tmp_path):
    frame, warned = run_warned(tmp_path, M6I_LARGE, section2_pods(), AUTOPILOT)
    assert set(frame["name"]) == {"shop/pod-1", "shop/pod-2"}
    assert any("node file is not used" in w for w in warned)


def test_output_does_not_depend_on_row_order(tmp_path):
    pods = section2_pods() + section3_pods() + section2_pods(H1) + section3_pods(H1)
    lines = pods.splitlines(keepends=True)
    a = run(tmp_path / "a", M6I_LARGE + M6I_XLARGE, "".join(lines))
    b = run(tmp_path / "b", M6I_XLARGE + M6I_LARGE, "".join(reversed(lines)))
    columns = [c for c in a.columns if c != "origin"]
    pd.testing.assert_frame_equal(a[columns], b[columns])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_fleet_every_node_window_adds_up_to_its_price_exactly(seed):
    """Many nodes, windows and pods (some overcommitted, some on unknown nodes)."""
    rng = np.random.default_rng(seed)
    n_nodes, n_windows, per_node = 6, 5, 7
    vcpu = rng.choice([2.0, 4.0, 8.0], n_nodes)
    memory = vcpu * rng.choice([2.0, 4.0, 8.0], n_nodes)
    nodes = pd.DataFrame(
        {
            "node": [f"n{i}" for i in range(n_nodes)],
            "pool": "general",
            "vcpu": vcpu,
            "memory_gib": memory,
            "allocatable_vcpu": vcpu * rng.uniform(0.9, 1.0, n_nodes),
            "allocatable_memory_gib": memory * rng.uniform(0.85, 1.0, n_nodes),
            "hourly_price": rng.uniform(0.01, 1.0, n_nodes).round(4),
        }
    )
    starts = pd.date_range("2026-01-01", periods=n_windows, freq="h", tz="UTC")
    count = n_nodes * n_windows * per_node
    window = np.repeat(np.arange(n_windows), n_nodes * per_node)
    node = np.arange(count) % (n_nodes + 1)  # every 7th pod on a node missing from the file
    requests = rng.uniform(0, 1.5, (count, 2))
    requests[rng.random((count, 2)) < 0.1] = np.nan  # some BestEffort
    pods = pd.DataFrame(
        {
            "window_start": starts[window],
            "window_end": starts[window] + pd.Timedelta(hours=1),
            "node": [f"n{i}" for i in node],  # n{n_nodes} is not in the node file
            "namespace": "ns",
            "controller_kind": "deployment",
            "controller": "app",
            "pod": [f"p{i}" for i in range(count)],
            "cpu_request": requests[:, 0],
            "cpu_usage": rng.uniform(0, 2.0, count),
            "memory_request_gib": requests[:, 1] * 4,
            "memory_usage_gib": rng.uniform(0, 6.0, count),
        }
    )
    for model in (WEIGHTS, CostModel.model_validate({"fractions": {"cpu": 0.7, "memory": 0.3}})):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = podcost(nodes, pods, model)
            shuffled = podcost(nodes, pods.sample(frac=1, random_state=seed), model)
        messages = " ".join(str(w.message) for w in caught)
        assert "idle would be negative" in messages  # some nodes are overcommitted
        assert f"node 'n{n_nodes}'" in messages
        assert len(frame) == count + n_nodes * n_windows * 3  # every pod kept
        assert (frame["total_cost"] >= 0).all()
        parts = to_micros(frame["cpu_cost"]) + to_micros(frame["memory_cost"])
        assert (parts == to_micros(frame["total_cost"])).all()
        frame["micros"] = to_micros(frame["total_cost"])
        on_nodes = frame[frame["node"] != f"n{n_nodes}"]
        sums = on_nodes.groupby(["node", "window_start"])["micros"].sum()
        prices = nodes.set_index("node")["hourly_price"]
        expected = to_micros(prices.reindex(sums.index.get_level_values("node")).to_numpy())
        assert (sums.to_numpy() == expected).all()
        columns = [c for c in shuffled.columns if c != "origin"]
        pd.testing.assert_frame_equal(frame[columns], shuffled[columns])


# --------------------------------------------------------------------------- warnings


def test_negative_idle_is_warned_with_node_and_window_and_pods_scaled_to_the_node(tmp_path):
    # 1.5 + 1.0 vCPU of usage on a node with 2 allocatable vCPU: idle would be negative.
    pods = pod("s", "a", "node-a", 0.5, 1.5, 1, 0.5) + pod("s", "b", "node-a", 0.5, 1.0, 1, 0.5)
    frame, warned = run_warned(tmp_path, M6I_LARGE, pods)
    assert len(warned) == 1
    message = warned[0]
    for part in ("node 'node-a'", "2026-01-01T00:00:00+00:00", "CPU", "2.5 vCPU", "2 vCPU"):
        assert part in message, (part, message)
    unit_cpu = 0.115 * 18 / 26 / 2
    cpu_pool = 2 * unit_cpu
    assert cost(frame, "s/a", "cpu_cost") == pytest.approx(cpu_pool * 1.5 / 2.5, abs=TOL)
    assert cost(frame, "s/b", "cpu_cost") == pytest.approx(cpu_pool * 1.0 / 2.5, abs=TOL)
    idle = frame[frame["name"] == IDLE]
    assert len(idle) == 2  # the row is kept, at 0
    assert float(idle["cpu_cost"].sum()) == 0.0
    assert (frame["total_cost"] >= 0).all()
    assert node_micros(frame, "node-a") == micros(0.115)


def test_pod_on_a_missing_node_is_kept_priced_at_the_median_and_warned(tmp_path):
    nodes = M6I_LARGE + "big,general,4,16,4,16,0.30\n" + "cheap,general,2,8,2,8,0.05\n"
    pods = section2_pods() + pod("lost", "p", "gone-1", 1, 0, 1, 0)
    frame, warned = run_warned(tmp_path, nodes, pods)
    assert len(warned) == 1
    parts = ("node 'gone-1'", "2026-01-01T00:00:00+00:00", "pods.csv:row 4", "median", "backs")
    for part in parts:
        assert part in warned[0], (part, warned[0])
    cpu_units = [0.115 * 18 / 26 / 2, 0.30 * 36 / 52 / 4, 0.05 * 18 / 26 / 2]
    mem_units = [0.115 / 26, 0.30 / 52, 0.05 / 26]
    expected = float(np.median(cpu_units) + np.median(mem_units))
    assert cost(frame, "lost/p") == pytest.approx(expected, abs=TOL)
    lost = frame[frame["name"] == "lost/p"].iloc[0]
    assert lost["node"] == "gone-1"
    assert not ((frame["node"] == "gone-1") & (frame["name"] != "lost/p")).any()  # no idle


def test_pod_without_node_is_priced_like_a_missing_node(tmp_path):
    frame, warned = run_warned(tmp_path, M6I_LARGE, pod("p", "pending", "", 0.5, 0, 1, 0))
    assert len(warned) == 1 and "has no node" in warned[0]
    assert cost(frame, "p/pending") > 0


# --------------------------------------------------------------------------- output


def test_output_has_exactly_the_canonical_columns(tmp_path):
    frame = run(tmp_path, M6I_LARGE, section2_pods())
    assert list(frame.columns) == [*COST_REQUIRED_COLUMNS, "cpu_cost", "memory_cost"]
    assert str(frame["window_start"].dtype) == "datetime64[ns, UTC]"
    for column in ["name", "cluster", "node", "namespace", "controller_kind", "controller"]:
        assert frame[column].dtype == "str"
    assert set(frame["name"]) == {"shop/pod-1", "shop/pod-2", IDLE, SYSTEM}


def test_csv_round_trip_through_the_canonical_reader_is_exact(tmp_path):
    frame = run(tmp_path, M6I_LARGE + M6I_XLARGE, section2_pods() + section3_pods())
    out = tmp_path / "costs.csv"
    text = write_podcost(frame, "csv", out)
    assert out.read_text() == text
    assert text.splitlines()[0].split(",") == [*COST_REQUIRED_COLUMNS, "cpu_cost", "memory_cost"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)  # no unknown columns
        back = read_costs([out])
    keys = ["window_start", "node", "name", "cpu_cost"]
    left = frame.drop(columns="origin").sort_values(keys).reset_index(drop=True)
    right = back.drop(columns="origin").sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right, check_exact=True)


def test_json_lists_the_same_rows_and_table_shows_totals(tmp_path):
    frame = run(tmp_path, M6I_LARGE, section2_pods())
    rows = json.loads(write_podcost(frame, "json", None))
    assert len(rows) == len(frame)
    assert rows[0]["window_start"] == "2026-01-01T00:00:00Z"
    assert sum(r["total_cost"] for r in rows) == pytest.approx(0.115, abs=1e-9)
    assert set(rows[0]) == set(frame.columns)
    table = write_podcost(frame, "table", None)
    assert "shop/pod-1" in table and "__idle__" in table
    assert table.rstrip().splitlines()[-1].startswith("total 0.115000")


def test_unknown_format_is_an_input_error(tmp_path):
    frame = run(tmp_path, M6I_LARGE, section2_pods())
    with pytest.raises(InputError, match="--format"):
        write_podcost(frame, "xml", None)


def test_allocation_core_reads_the_output_and_closes(tmp_path):
    frame = run(tmp_path, M6I_LARGE + M6I_XLARGE, section2_pods() + section3_pods())
    write_podcost(frame, "csv", tmp_path / "costs.csv")
    rules = parse_rules(
        {
            "rules": [
                {
                    "id": "r",
                    "effective_from": "2026-01-01",
                    "workloads": [
                        {"match": {"name": IDLE}, "class": "idle"},
                        {"match": {"name": SYSTEM}, "class": "overhead"},
                        {"match": {}, "class": "direct", "client_from": "namespace"},
                    ],
                }
            ]
        }
    )
    result = allocate(read_costs([tmp_path / "costs.csv"]), None, rules)
    assert result.reference_total == round((0.115 + 0.23) * 1_000_000)
    clients = dict(zip(*result.client_totals().to_dict("list").values(), strict=True))
    assert clients["team-a"] == 77404  # micro-USD, 0.0774 USD/h


# --------------------------------------------------------------------------- the bundled example


@pytest.mark.parametrize("name", ["weights", "fractions", "autopilot"])
def test_bundled_example_outputs_are_up_to_date(name):
    nodes = None if name == "autopilot" else EXAMPLE / "nodes.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        frame = podcost_from_files(nodes, EXAMPLE / "pods.csv", EXAMPLE / f"rules-{name}.yaml")
    committed = read_costs([EXAMPLE / f"costs-{name}.csv"])
    keys = ["window_start", "node", "name", "cpu_cost"]
    left = frame.drop(columns="origin").sort_values(keys).reset_index(drop=True)
    right = committed.drop(columns="origin").sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right, check_exact=False, rtol=0, atol=1e-12)


def test_bundled_example_figures_match_domain():
    weights = read_costs([EXAMPLE / "costs-weights.csv"])
    by_name = weights.groupby(["node", "name"])["total_cost"].sum()
    assert abs(by_name["node-a", "shop/pod-1"] - 17.76) <= 0.005
    assert abs(by_name["node-a", "shop/pod-2"] - 24.86) <= 0.005
    assert abs(by_name["node-a", IDLE] / 730 - 0.0566) <= 0.0001
    assert abs(by_name["node-b", "team-a/api-0"] - 56.50) <= 0.005
    assert abs(by_name["node-b", IDLE] - 69.42) <= 0.005
    for node, price in (("node-a", 0.115), ("node-b", 0.23), ("node-c", 0.115)):
        assert weights.loc[weights["node"] == node, "total_cost"].sum() == pytest.approx(
            price * 730, abs=1e-9
        )
    autopilot = read_costs([EXAMPLE / "costs-autopilot.csv"]).set_index("name")
    assert abs(autopilot.loc["shop/pod-1", "total_cost"] - 25.54) <= 0.005
    assert load_rules(EXAMPLE / "rules-autopilot.yaml").cost_model is not None


# --------------------------------------------------------------------------- readers


def assert_error(exc: pytest.ExceptionInfo[InputError], *parts: str) -> None:
    text = str(exc.value)
    for part in parts:
        assert part in text, f"{part!r} not in {text!r}"


def test_misspelt_node_column_is_named_with_a_suggestion(tmp_path):
    path = write(
        tmp_path / "nodes.csv", NODE_HEADER.replace("hourly_price", "hourly_prce") + M6I_LARGE
    )
    with pytest.raises(InputError) as exc:
        read_nodes(path)
    assert_error(exc, "nodes.csv", "header", "column 'hourly_price'", "did you mean 'hourly_prce'")


def test_missing_pod_column_is_named(tmp_path):
    path = write(tmp_path / "pods.csv", POD_HEADER.replace(",memory_usage_gib", "") + "\n")
    with pytest.raises(InputError) as exc:
        read_pods(path)
    assert_error(exc, "pods.csv", "column 'memory_usage_gib'", "required column is missing")


@pytest.mark.parametrize(
    ("line", "column", "problem"),
    [
        ("node-a,general,two,8,2,8,0.115\n", "vcpu", "expected a number, got 'two'"),
        ("node-a,general,2,8,2,8,-0.1\n", "hourly_price", "must be >= 0"),
        ("node-a,general,0,8,0,8,0.1\n", "vcpu", "must be > 0"),
        ("node-a,general,2,8,2,,0.1\n", "allocatable_memory_gib", "missing"),
        ("node-a,general,2,8,2.5,8,0.1\n", "allocatable_vcpu", "above the capacity"),
        (",general,2,8,2,8,0.1\n", "node", "node is empty"),
        ("node-a,general,2,8,2,8,inf\n", "hourly_price", "finite"),
    ],
)
def test_bad_node_cells_name_file_row_and_column(tmp_path, line, column, problem):
    path = write(tmp_path / "nodes.csv", NODE_HEADER + M6I_XLARGE + line)
    with pytest.raises(InputError) as exc:
        read_nodes(path)
    assert_error(exc, "nodes.csv", "row 3", f"column '{column}'", problem)


@pytest.mark.parametrize(
    ("line", "column", "problem"),
    [
        (pod("s", "p", "n", "half", 0, 1, 1), "cpu_request", "expected a number, got 'half'"),
        (pod("s", "p", "n", 0.5, -0.1, 1, 1), "cpu_usage", "must be >= 0"),
        (pod("", "p", "n", 0.5, 0, 1, 1), "namespace", "namespace is empty"),
        (pod("s", "", "n", 0.5, 0, 1, 1), "pod", "pod name"),
        (
            pod("s", "p", "n", 0.5, 0, 1, 1, window=f"{H0[21:]},{H0[:20]}"),
            "window_end",
            "not after",
        ),
        (pod("s", "p", "n", 0.5, 0, 1, 1, window="yesterday,today"), "window_start", "timestamp"),
    ],
)
def test_bad_pod_cells_name_file_row_and_column(tmp_path, line, column, problem):
    path = write(tmp_path / "pods.csv", POD_HEADER + pod("s", "ok", "n", 1, 1, 1, 1) + line)
    with pytest.raises(InputError) as exc:
        read_pods(path)
    assert_error(exc, "pods.csv", "row 3", f"column '{column}'", problem)


def test_duplicate_node_and_pod_rows_are_errors_naming_both_rows(tmp_path):
    path = write(tmp_path / "nodes.csv", NODE_HEADER + M6I_LARGE + M6I_XLARGE + M6I_LARGE)
    with pytest.raises(InputError) as exc:
        read_nodes(path)
    assert_error(exc, "row 4", "duplicate node row", "node 'node-a'", "nodes.csv:row 2")
    line = pod("s", "p", "n", 1, 1, 1, 1)
    path = write(tmp_path / "pods.csv", POD_HEADER + line + line)
    with pytest.raises(InputError) as exc:
        read_pods(path)
    assert_error(exc, "row 3", "duplicate pod row", "charged twice", "pods.csv:row 2")


def test_one_node_window_column_without_the_other_is_an_error(tmp_path):
    path = write(
        tmp_path / "nodes.csv",
        NODE_HEADER.rstrip("\n") + ",window_start\n" + M6I_LARGE.rstrip("\n") + ",2026-01-01\n",
    )
    with pytest.raises(InputError) as exc:
        read_nodes(path)
    assert_error(exc, "column 'window_end'", "both or neither")


def test_unknown_columns_are_ignored_with_a_warning(tmp_path):
    path = write(
        tmp_path / "nodes.csv", NODE_HEADER.rstrip("\n") + ",zone\n" + "node-a,g,2,8,2,8,0.1,a\n"
    )
    with pytest.warns(InputWarning, match="ignoring unknown column"):
        nodes = read_nodes(path)
    assert "zone" not in nodes.columns


def test_unsupported_file_type_is_an_error(tmp_path):
    with pytest.raises(InputError, match=r"expected \.csv or \.parquet"):
        read_pods(write(tmp_path / "pods.json", "[]"))


def test_parquet_files_are_read_with_record_numbers(tmp_path):
    nodes = pa.table(
        {
            "node": ["node-a"],
            "pool": ["general"],
            "vcpu": [2],
            "memory_gib": [8.0],
            "allocatable_vcpu": [2.0],
            "allocatable_memory_gib": [8.0],
            "hourly_price": [0.115],
        }
    )
    pq.write_table(nodes, tmp_path / "nodes.parquet")
    start = pd.Timestamp("2026-01-01T00:00:00Z")
    pods = pa.table(
        {
            "window_start": [start, start],
            "window_end": [start + pd.Timedelta(hours=1)] * 2,
            "node": ["node-a", "node-a"],
            "namespace": ["shop", "shop"],
            "controller_kind": ["deployment", "deployment"],
            "controller": ["web", "worker"],
            "pod": ["pod-1", "pod-2"],
            "cpu_request": [0.5, 0.25],
            "cpu_usage": [0.2, 0.8],
            "memory_request_gib": [1.0, 0.5],
            "memory_usage_gib": [MIB_600, None],
        }
    )
    pq.write_table(pods, tmp_path / "pods.parquet")
    node_frame = read_nodes(tmp_path / "nodes.parquet")
    pod_frame = read_pods(tmp_path / "pods.parquet")
    assert pod_frame["origin"].iloc[1].endswith("pods.parquet:row 2")
    with pytest.warns(InputWarning, match="no usage"):
        frame = podcost(node_frame, pod_frame, WEIGHTS)
    assert abs(cost(frame, "shop/pod-1") - 0.0243) <= 0.0001
    bad = pods.set_column(7, "cpu_request", pa.array([0.5, -1.0]))
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(InputError) as exc:
        read_pods(tmp_path / "bad.parquet")
    assert_error(exc, "bad.parquet", "row 2", "column 'cpu_request'")


def test_overlapping_windows_are_an_error_naming_the_rows(tmp_path):
    pods = pod("s", "a", "node-a", 1, 0, 1, 0) + pod(
        "s", "b", "node-a", 1, 0, 1, 0, window="2026-01-01T00:30:00Z,2026-01-01T01:30:00Z"
    )
    with pytest.raises(InputError) as exc:
        run(tmp_path, M6I_LARGE, pods)
    assert_error(exc, "pods.csv", "row 3", "overlaps", "pods.csv:row 2")


# --------------------------------------------------------------------------- the rule file


@pytest.mark.parametrize(
    ("section", "where", "problem"),
    [
        (
            {"weights": {"cpu": 9, "memory": 1}, "fractions": {"cpu": 1, "memory": 0}},
            "cost_model.weights/fractions/unit_prices",
            "exactly one",
        ),
        ({"fractions": {"cpu": 0.6, "memory": 0.5}}, "cost_model.fractions", "add up to 1"),
        (
            {"weights": {"cpu": 9, "memory": 1}, "min_cpu": 0.25},
            "cost_model.min_cpu",
            "billing: requests",
        ),
        (
            {"unit_prices": {"cpu": 1, "memory": 1}, "billing": "request"},
            "cost_model.billing",
            "'request'",
        ),
        ({"weights": {"cpu": 9}}, "cost_model.weights.memory", "required"),
        (
            {
                "unit_prices": {"cpu": 1, "memory": 1},
                "billing": "requests",
                "memory_per_cpu": {"min": 7, "max": 6.5},
            },
            "cost_model.memory_per_cpu.min",
            "above max",
        ),
        ({"weights": {"cpu": 9, "memory": 1}, "idle": "keep"}, "cost_model", "unknown key 'idle'"),
    ],
)
def test_cost_model_section_errors_name_their_path(section, where, problem):
    doc = {
        "rules": [{"id": "r", "effective_from": "2026-01-01", "workloads": []}],
        "cost_model": section,
    }
    with pytest.raises(InputError) as exc:
        parse_rules(doc, origin="rules.yaml")
    assert_error(exc, "rules.yaml", where, problem)


def test_rule_file_without_cost_model_or_nodes_is_an_error(tmp_path):
    rules = "rules:\n  - {id: r, effective_from: '2026-01-01', workloads: []}\n"
    path = write(tmp_path / "rules.yaml", rules)
    pods = write(tmp_path / "pods.csv", POD_HEADER + section2_pods())
    with pytest.raises(InputError) as exc:
        podcost_from_files(None, pods, path)
    assert_error(exc, "rules.yaml", "no 'cost_model' section")
    write(path, rules + "cost_model: {weights: {cpu: 9, memory: 1}}\n")
    with pytest.raises(InputError) as exc:
        podcost_from_files(None, pods, path)
    assert_error(exc, "rules.yaml", "cost_model", "--nodes")


def test_podcost_command_output_feeds_allocate_end_to_end(tmp_path):
    """`tenantcost podcost` writes the canonical cost file; `allocate` reads it and closes."""
    import json

    from typer.testing import CliRunner

    from tenantcost.cli import app

    example = Path(__file__).resolve().parents[1] / "examples" / "node-price-model"
    runner = CliRunner()
    out = tmp_path / "costs.csv"
    made = runner.invoke(app, ["podcost", "--nodes", str(example / "nodes.csv"),
                               "--pods", str(example / "pods.csv"),
                               "--config", str(example / "rules-weights.yaml"),
                               "--format", "csv", "--out", str(out)])
    assert made.exit_code == 0, made.output
    written = pd.read_csv(out).drop(columns="origin")  # origin names the input paths as given
    committed = pd.read_csv(example / "costs-weights.csv").drop(columns="origin")
    pd.testing.assert_frame_equal(written, committed)
    result = runner.invoke(app, ["allocate", "--config", str(example / "rules-weights.yaml"),
                                 "--costs", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["gap"] == 0
    assert doc["reference_total"] == 335_800_000  # the three nodes' price for the window
    bad = runner.invoke(app, ["podcost", "--pods", str(example / "pods.csv"),
                              "--config", str(example / "rules-weights.yaml")])
    assert bad.exit_code == 2 and "--nodes" in bad.stderr
