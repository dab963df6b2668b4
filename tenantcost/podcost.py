"""Pod costs from node prices: the OpenCost cost model, built in (``tenantcost podcost``).

For clusters without OpenCost, for checking OpenCost's figures, and for what-if on node pricing.
The output is the canonical cost table of :mod:`tenantcost.tables`, so ``tenantcost allocate
--costs`` reads it as is.

**The rule-file section** (validated by :class:`tenantcost.config.cost_model.CostModel`)::

    cost_model:
      weights: {cpu: 9, memory: 1}        # or fractions: {cpu: 0.6, memory: 0.4}
                                          # or unit_prices: {cpu: 0.0573, memory: 0.0063421}
      billing: usage                      # usage (default) | requests
      min_cpu: 0.25                       # billing: requests only, vCPU per pod
      min_memory_gib: 0.5                 # billing: requests only, GiB per pod
      memory_per_cpu: {min: 1, max: 6.5}  # billing: requests only, GiB per vCPU
      cluster: prod-eu                    # the cluster column of every row (default "")

**Unit prices.** Each node's price is split between CPU and memory on its *capacity*:

* ``weights``: CPU share = ``w_cpu × vcpu / (w_cpu × vcpu + w_memory × memory_gib)``;
* ``fractions``: CPU share = ``fractions.cpu`` (memory gets the rest);
* price per vCPU-hour = ``hourly_price × CPU share / vcpu``, per GiB-hour = ``hourly_price ×
  (1 − CPU share) / memory_gib``. An m6i.large (2 vCPU, 8 GiB, 0.115/h) at 9:1 gives 0.039808
  per vCPU-hour and 0.0044231 per GiB-hour;
* ``unit_prices``: the published prices, for every pod; node prices are not used and there is
  no idle (Autopilot and Fargate bill pods, not nodes).

**What a pod is charged**, per resource, times the window's hours:

* ``billing: usage``: ``max(request, usage)``. No request (BestEffort) means the usage is
  charged; no usage metric means the request is charged (with a warning). Limits never count.
* ``billing: requests``: the request only (Fargate, GKE Autopilot), raised to ``min_cpu`` /
  ``min_memory_gib`` and then into the ``memory_per_cpu`` range (too little memory per vCPU
  raises memory, too much raises CPU), as Autopilot does. ``cpu_cost`` and ``memory_cost`` are
  the cost of the requests as written; the cost of the raise is its own column,
  ``raise_cost``, present whenever minimums or a ratio range are configured.

**Rows** (one window each; cost columns ``cpu_cost``, ``memory_cost``, [``raise_cost``],
``total_cost``, in currency units, as examples/node-price-model/README.md ("Output rows") lists
them. OpenCost's JSON calls memory ``ramCost``, read as ``ram_cost``; compare the two by
resource, not by column name):

* every pod row: ``name`` = ``namespace/pod``, with node, namespace, controller_kind, controller
  and pod from the pod file; ``origin`` is its row in the pod file;
* ``__idle__``, two per node and window, one per resource: the CPU row carries the unused
  CPU in ``cpu_cost`` (``memory_cost`` 0), the memory row the unused memory in ``memory_cost``
  (``cpu_cost`` 0). Idle = cost of the *allocatable* capacity minus what the node's pods are
  charged for that resource. Other properties are ``""``; ``origin`` is the node's row;
* ``__system__``, one per node and window: the cost of capacity minus allocatable (kubelet,
  runtime and OS reserve), shared operation rather than idle; ``cpu_cost`` and ``memory_cost``.

So for every node and window: pods + idle + system = ``hourly_price × hours``. Idle and system
are computed as remainders of the node's price, and every amount is then rounded to whole
micro-units (10^-6, as :mod:`tenantcost.money` counts money) *together* with the other rows of
its node and window (largest remainder), so the identity holds exactly in micro-units and the
allocation core's reference total equals the node bill to the micro-unit. Each amount is less
than one micro-unit from its exact value. With unit prices there are pod rows only, each
component rounded on its own.

**Negative idle** (pods charged more of a resource than the node has allocatable, for example
usage above allocatable, or node sizes that are wrong in the node file): the pods of that node,
window and resource are scaled down pro rata so that together they are charged exactly the
allocatable capacity's cost, the idle row stays with 0, and a warning names the node, window,
resource and the overcommit. The node's price is the money there is: charging pods more than
the node costs would make the client costs exceed the bill, and a negative idle row is not a
cost (the allocation core rejects it).

**Pods on a node missing from the node file** (or with no node): the row is kept and priced at
the median unit prices of all node rows (the usual price of a vCPU-hour and a GiB-hour in this
cluster), with a warning naming the node, the windows and the amount this adds that no node
price backs. The node was most likely billed (a node file exported before a scale-up), so
zero would under-report the pod; an error would block a whole month for one short-lived node.
Such a node has no idle or system rows.

**Windows.** Pod rows carry their window; a node without window columns in the node file runs
in every window of the pod file, a node with them only in its own windows (autoscaled fleets).
Distinct windows must not overlap.

Everything is vectorised: pods are merged with their node's prices and costed with column
arithmetic; node sums are group-bys.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from tenantcost.config.cost_model import CostModel
from tenantcost.config.rules import load_rules
from tenantcost.csv_cells import neutralised
from tenantcost.errors import InputError, warn
from tenantcost.money import MICROS_PER_UNIT, split_largest_remainder, to_micros
from tenantcost.readers.canonical import split_origin
from tenantcost.readers.nodes_pods import (
    NODE_COLUMNS,
    POD_COLUMNS,
    WINDOW,
    read_nodes,
    read_pods,
)
from tenantcost.tables import COST_REQUIRED_COLUMNS
from tenantcost.timefmt import iso_z_series, window_text

__all__ = [
    "FORMATS",
    "IDLE",
    "SYSTEM",
    "CostModel",
    "podcost",
    "podcost_from_files",
    "read_nodes",
    "read_pods",
    "write_podcost",
]

IDLE = "__idle__"
SYSTEM = "__system__"
FORMATS = ("table", "json", "csv")
MAX_WARNINGS = 5
"""Per kind of warning, how many cases are named one by one before a summary line."""
OVERCOMMIT_TOLERANCE = 1e-9
"""Relative: charged quantities this close to allocatable are float noise, not overcommit."""

_HOUR = pd.Timedelta(hours=1)
_PARTS = ["cpu_cost", "memory_cost", "cpu_raise_cost", "mem_raise_cost"]


def podcost(nodes: pd.DataFrame | None, pods: pd.DataFrame, model: CostModel) -> pd.DataFrame:
    """The cost table of ``pods`` on ``nodes`` under ``model`` (pure, apart from warnings).

    ``nodes`` and ``pods`` are frames as :func:`read_nodes` and :func:`read_pods` return them
    (``origin`` may be absent; it then reads ``nodes[i]`` / ``pods[i]``). ``nodes`` is not
    used, and may be ``None``, with ``unit_prices``.
    """
    pods = _conform(pods, POD_COLUMNS, "pods")
    _check_windows(pods, nodes)
    pods["hours"] = (pods["window_end"] - pods["window_start"]) / _HOUR
    billed = _billed_quantities(pods, model)

    if model.unit_prices is not None:
        if nodes is not None and len(nodes):
            warn(
                "cost_model uses unit_prices: the node file is not used (pods are priced at "
                "the published prices; there are no idle or system rows)"
            )
        pods["cpu_unit"] = model.unit_prices.cpu
        pods["mem_unit"] = model.unit_prices.memory
        return _finish(_pod_rows(pods, billed), None, model)

    if nodes is None or not len(nodes):
        raise InputError(
            f"cost_model '{model.pricing}' prices pods from node prices, but the node file "
            "has no rows"
        )
    nodes = _unit_prices(_conform(nodes, NODE_COLUMNS, "nodes"), model)
    if pods.empty and not all(c in nodes.columns for c in WINDOW):
        warn(
            "the pod file has no rows, so there are no windows to cost the nodes in (give the "
            "node file window_start/window_end columns to cost empty nodes)"
        )
    slots = _node_windows(nodes, pods)
    key = ["node", *WINDOW]
    priced = pods.merge(
        slots[[*key, "cpu_unit", "mem_unit", "slot"]], on=key, how="left", validate="many_to_one"
    )
    # A pod whose node (in its window) is not in the node file: median unit prices, a warning.
    missing = priced["slot"].isna().to_numpy()
    medians = (float(nodes["cpu_unit"].median()), float(nodes["mem_unit"].median()))
    pods["cpu_unit"] = priced["cpu_unit"].fillna(medians[0]).to_numpy()
    pods["mem_unit"] = priced["mem_unit"].fillna(medians[1]).to_numpy()
    pods["slot"] = priced["slot"].to_numpy()
    pod_rows = _pod_rows(pods, billed)
    if missing.any():
        _warn_missing(pod_rows[missing], set(nodes["node"]), medians)
    pod_rows, node_rows = _idle_and_system(slots, pod_rows)
    rows = pd.concat([pod_rows, node_rows], ignore_index=True)
    return _finish(rows, slots.set_index("slot")["node_cost"], model)


def podcost_from_files(
    nodes: str | Path | None, pods: str | Path, config: str | Path
) -> pd.DataFrame:
    """Read the node file, the pod file and the rule file's ``cost_model``; run :func:`podcost`."""
    ruleset = load_rules(config)
    model = ruleset.cost_model
    if model is None:
        raise InputError(
            "no 'cost_model' section: podcost needs one, for example "
            "cost_model: {weights: {cpu: 9, memory: 1}}",
            file=str(config),
        )
    if nodes is None and model.unit_prices is None:
        raise InputError(
            f"cost_model '{model.pricing}' prices pods from node prices: give the node file "
            "(--nodes)",
            file=str(config),
            where="cost_model",
        )
    node_frame = read_nodes(nodes) if nodes is not None else None
    return podcost(node_frame, read_pods(pods), model)


# --------------------------------------------------------------------------- inputs


def _conform(frame: pd.DataFrame, required: list[str], what: str) -> pd.DataFrame:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"{what} table lacks column '{missing[0]}'")
    out = frame.reset_index(drop=True).copy()
    if "origin" not in out.columns:
        out["origin"] = [f"{what}[{i}]" for i in range(len(out))]
    return out


def _check_windows(pods: pd.DataFrame, nodes: pd.DataFrame | None) -> None:
    """Distinct windows (of pods, and of nodes when they have windows) must not overlap.

    Overlapping windows would charge one node-hour twice; the allocation core rejects them too,
    but here the rows can still be named.
    """
    frames = [pods[[*WINDOW, "origin"]]]
    if nodes is not None and all(c in nodes.columns for c in WINDOW):
        frames.append(_conform(nodes, WINDOW, "nodes")[[*WINDOW, "origin"]])
    windows = (
        pd.concat(frames, ignore_index=True)
        .drop_duplicates(WINDOW)
        .sort_values(WINDOW, kind="mergesort")
        .reset_index(drop=True)
    )
    if len(windows) < 2:
        return
    overlap = (windows["window_start"] < windows["window_end"].shift(1)).to_numpy()
    if overlap.any():
        i = int(np.flatnonzero(overlap)[0])
        a, b = windows.iloc[i - 1], windows.iloc[i]
        file, where = split_origin(str(b["origin"]))
        raise InputError(
            f"window {window_text(b.window_start, b.window_end)} overlaps window "
            f"{window_text(a.window_start, a.window_end)} of {a.origin}; windows must not "
            "overlap (a node-hour would be charged twice)",
            file=file,
            where=where,
            column="window_start",
        )


# --------------------------------------------------------------------------- quantities


def _billed_quantities(pods: pd.DataFrame, model: CostModel) -> pd.DataFrame:
    """Per pod and resource: the base quantity charged and the raise on top (vCPU, GiB)."""
    req_cpu = pods["cpu_request"].astype("float64").fillna(0.0)
    req_mem = pods["memory_request_gib"].astype("float64").fillna(0.0)
    if model.billing == "usage":
        use_cpu = pods["cpu_usage"].astype("float64")
        use_mem = pods["memory_usage_gib"].astype("float64")
        no_usage = (use_cpu.isna() | use_mem.isna()).to_numpy()
        if no_usage.any():
            first = int(np.flatnonzero(no_usage)[0])
            warn(
                f"{int(no_usage.sum())} pod row(s) have no usage for CPU or memory (first: "
                f"{pods['origin'].iloc[first]}); they are charged their request for it "
                "(nothing if they have none)"
            )
        base_cpu = np.maximum(req_cpu, use_cpu.fillna(req_cpu))
        base_mem = np.maximum(req_mem, use_mem.fillna(req_mem))
        zeros = pd.Series(0.0, index=pods.index)
        return pd.DataFrame(
            {"cpu": base_cpu, "mem": base_mem, "cpu_raise": zeros, "mem_raise": zeros}
        )

    billed_cpu = req_cpu.copy()
    billed_mem = req_mem.copy()
    if model.min_cpu is not None:
        billed_cpu = billed_cpu.clip(lower=model.min_cpu)
    if model.min_memory_gib is not None:
        billed_mem = billed_mem.clip(lower=model.min_memory_gib)
    ratio = model.memory_per_cpu
    if ratio is not None:
        # Too little memory per vCPU raises memory; too much raises CPU (never lowers either).
        if ratio.min is not None:
            billed_mem = np.maximum(billed_mem, billed_cpu * ratio.min)
        if ratio.max is not None:
            billed_cpu = np.maximum(billed_cpu, billed_mem / ratio.max)
    for column, minimum, billed, label in (
        ("cpu_request", model.min_cpu, billed_cpu, "CPU"),
        ("memory_request_gib", model.min_memory_gib, billed_mem, "memory"),
    ):
        unbilled = (pods[column].isna() & billed.eq(0)).to_numpy()
        if minimum is None and unbilled.any():
            first = int(np.flatnonzero(unbilled)[0])
            warn(
                f"billing: requests: {int(unbilled.sum())} pod row(s) have no {label} request "
                f"(first: {pods['origin'].iloc[first]}) and are charged nothing for {label}; "
                "set a minimum in cost_model if the provider bills one"
            )
    return pd.DataFrame(
        {
            "cpu": req_cpu,
            "mem": req_mem,
            "cpu_raise": billed_cpu - req_cpu,
            "mem_raise": billed_mem - req_mem,
        }
    )


# --------------------------------------------------------------------------- prices


def _unit_prices(nodes: pd.DataFrame, model: CostModel) -> pd.DataFrame:
    """Each node's CPU share of its price and its prices per vCPU-hour and GiB-hour."""
    out = nodes.copy()
    vcpu = out["vcpu"].astype("float64")
    mem = out["memory_gib"].astype("float64")
    if model.weights is not None:
        cpu_weight = model.weights.cpu * vcpu
        share = cpu_weight / (cpu_weight + model.weights.memory * mem)
    else:
        assert model.fractions is not None
        share = pd.Series(model.fractions.cpu, index=out.index, dtype="float64")
    price = out["hourly_price"].astype("float64")
    out["cpu_share"] = share
    out["cpu_unit"] = price * share / vcpu
    out["mem_unit"] = (price - price * share) / mem
    return out


def _node_windows(nodes: pd.DataFrame, pods: pd.DataFrame) -> pd.DataFrame:
    """One row per node and window, with its price pools (``slot`` numbers the rows).

    Nodes with window columns run in their own windows; nodes without run in every window of
    the pod file.
    """
    if all(c in nodes.columns for c in WINDOW):
        slots = nodes.copy()
    else:
        windows = pods[WINDOW].drop_duplicates().sort_values(WINDOW, kind="mergesort")
        slots = nodes.merge(windows, how="cross")
    slots = slots.reset_index(drop=True)
    slots["slot"] = np.arange(len(slots), dtype="float64")
    hours = (slots["window_end"] - slots["window_start"]) / _HOUR
    node_cost = slots["hourly_price"].astype("float64") * hours
    cpu_pool = node_cost * slots["cpu_share"]
    mem_pool = node_cost - cpu_pool
    slots["node_cost"] = node_cost
    slots["cpu_alloc_pool"] = cpu_pool * (slots["allocatable_vcpu"] / slots["vcpu"])
    slots["mem_alloc_pool"] = mem_pool * (slots["allocatable_memory_gib"] / slots["memory_gib"])
    slots["cpu_system"] = cpu_pool - slots["cpu_alloc_pool"]
    slots["mem_system"] = mem_pool - slots["mem_alloc_pool"]
    return slots


def _warn_missing(lost: pd.DataFrame, known: set[str], medians: tuple[float, float]) -> None:
    """One warning per node missing from the node file (up to :data:`MAX_WARNINGS`)."""
    lost = lost.sort_values([*WINDOW, "origin"], kind="mergesort").assign(
        label=lambda f: f["node"].where(f["node"] != "", "(none)"),
        amount=lambda f: f[_PARTS].sum(axis=1),
    )
    summary = lost.groupby("label", sort=True).agg(
        rows=("pod", "size"),
        windows=("window_start", "nunique"),
        first_start=("window_start", "first"),
        first_end=("window_end", "first"),
        first_origin=("origin", "first"),
        amount=("amount", "sum"),
    )
    for count, (label, row) in enumerate(summary.iterrows()):
        if count == MAX_WARNINGS:
            rest = summary.iloc[count:]
            warn(
                f"{int(rest['rows'].sum())} more pod row(s) on {len(rest)} more node(s) "
                f"missing from the node file, priced at the median unit prices "
                f"({rest['amount'].sum():.6f} not backed by a node price)"
            )
            break
        where = (
            "has no node"
            if label == "(none)"
            else f"is on node '{label}', which the node file "
            + ("does not list for this window" if label in known else "does not list")
        )
        warn(
            f"{row['first_origin']}: pod {where} (window "
            f"{window_text(row['first_start'], row['first_end'])}; {int(row['rows'])} pod "
            f"row(s) in {int(row['windows'])} window(s)); priced at the node file's median "
            f"unit prices ({medians[0]:.6g} per vCPU-hour, {medians[1]:.6g} per GiB-hour): "
            f"{row['amount']:.6f} that no node price backs, and no idle or system rows for "
            "that node"
        )


# --------------------------------------------------------------------------- rows


def _pod_rows(pods: pd.DataFrame, billed: pd.DataFrame) -> pd.DataFrame:
    """One row per pod: base and raise costs per resource, charged quantities, node slot."""
    hours = pods["hours"].to_numpy(dtype="float64")
    cpu_rate = pods["cpu_unit"].to_numpy(dtype="float64") * hours
    mem_rate = pods["mem_unit"].to_numpy(dtype="float64") * hours
    rows = pd.DataFrame(
        {
            "window_start": pods["window_start"],
            "window_end": pods["window_end"],
            "name": (pods["namespace"] + "/" + pods["pod"]).astype("str"),
            "node": pods["node"].astype("str"),
            "namespace": pods["namespace"].astype("str"),
            "controller_kind": pods["controller_kind"].astype("str"),
            "controller": pods["controller"].astype("str"),
            "pod": pods["pod"].astype("str"),
            "cpu_cost": billed["cpu"].to_numpy() * cpu_rate,
            "memory_cost": billed["mem"].to_numpy() * mem_rate,
            "cpu_raise_cost": billed["cpu_raise"].to_numpy() * cpu_rate,
            "mem_raise_cost": billed["mem_raise"].to_numpy() * mem_rate,
            "cpu_qty": (billed["cpu"] + billed["cpu_raise"]).to_numpy(),
            "mem_qty": (billed["mem"] + billed["mem_raise"]).to_numpy(),
            "origin": pods["origin"].astype("str"),
            "kind": 0,
        }
    )
    if "slot" in pods.columns:
        rows["slot"] = pods["slot"].to_numpy()
    return rows


def _idle_and_system(
    slots: pd.DataFrame, pod_rows: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The pod rows (scaled where a node resource is overcommitted) and the node rows."""
    pod_rows = pod_rows.copy()
    on_node = pod_rows[pod_rows["slot"].notna()]
    sums = on_node.groupby("slot").agg(
        cpu_charged=("cpu_cost", "sum"),
        cpu_raised=("cpu_raise_cost", "sum"),
        mem_charged=("memory_cost", "sum"),
        mem_raised=("mem_raise_cost", "sum"),
        cpu_qty=("cpu_qty", "sum"),
        mem_qty=("mem_qty", "sum"),
    )
    slots = slots.join(sums, on="slot")
    for column in sums.columns:
        slots[column] = slots[column].fillna(0.0)

    resources = (
        ("cpu", "allocatable_vcpu", "cpu_cost", "cpu_raise_cost", "CPU", "vCPU"),
        ("mem", "allocatable_memory_gib", "memory_cost", "mem_raise_cost", "memory", "GiB"),
    )
    for res, allocatable, cost_col, raise_col, label, unit in resources:
        charged = slots[f"{res}_charged"] + slots[f"{res}_raised"]
        pool = slots[f"{res}_alloc_pool"]
        over = (
            slots[f"{res}_qty"] > slots[allocatable] * (1 + OVERCOMMIT_TOLERANCE) + 1e-12
        ).to_numpy()
        factor = np.where(over, pool / charged.where(charged > 0, 1.0), 1.0)
        if over.any():
            scale = pd.Series(factor, index=slots["slot"].to_numpy())
            row_factor = pod_rows["slot"].map(scale).fillna(1.0).to_numpy()
            pod_rows[cost_col] = pod_rows[cost_col].to_numpy() * row_factor
            pod_rows[raise_col] = pod_rows[raise_col].to_numpy() * row_factor
            _warn_overcommit(slots[over], res, allocatable, label, unit)
        remainder = pool - charged * factor
        slots[f"{res}_idle"] = np.where(over | (remainder < 0), 0.0, remainder)

    base = {
        "window_start": slots["window_start"],
        "window_end": slots["window_end"],
        "node": slots["node"].astype("str"),
        "namespace": "",
        "controller_kind": "",
        "controller": "",
        "pod": "",
        "cpu_raise_cost": 0.0,
        "mem_raise_cost": 0.0,
        "origin": slots["origin"].astype("str"),
        "slot": slots["slot"],
    }
    idle_cpu = pd.DataFrame(
        {**base, "name": IDLE, "cpu_cost": slots["cpu_idle"], "memory_cost": 0.0, "kind": 1}
    )
    idle_mem = pd.DataFrame(
        {**base, "name": IDLE, "cpu_cost": 0.0, "memory_cost": slots["mem_idle"], "kind": 2}
    )
    system = pd.DataFrame(
        {
            **base,
            "name": SYSTEM,
            "cpu_cost": slots["cpu_system"],
            "memory_cost": slots["mem_system"],
            "kind": 3,
        }
    )
    return pod_rows, pd.concat([idle_cpu, idle_mem, system], ignore_index=True)


def _warn_overcommit(over: pd.DataFrame, res: str, allocatable: str, label: str, unit: str) -> None:
    for count, (_, row) in enumerate(over.iterrows()):
        if count == MAX_WARNINGS:
            warn(
                f"{len(over) - count} more node window(s) where pods are charged more {label} "
                "than allocatable; their pods' costs were scaled down the same way"
            )
            break
        charged, capacity = float(row[f"{res}_qty"]), float(row[allocatable])
        warn(
            f"node '{row['node']}' (pool '{row['pool']}'), window "
            f"{window_text(row['window_start'], row['window_end'])}: pods are charged "
            f"{charged:.6g} {unit} of {label} but only {capacity:.6g} {unit} are allocatable, "
            f"so idle would be negative; idle is 0 and the pods' {label} costs are scaled by "
            f"{capacity / charged:.6g} to the node's price"
        )


def _finish(rows: pd.DataFrame, node_cost: pd.Series | None, model: CostModel) -> pd.DataFrame:
    """Round to micro-units, then order, type and trim the rows into the canonical cost table."""
    rows = _round_to_micros(rows, node_cost)
    rows["cluster"] = model.cluster
    rows = rows.sort_values(
        ["window_start", "window_end", "node", "kind", "namespace", "pod", "origin"],
        kind="mergesort",
    )
    components = ["cpu_cost", "memory_cost", *(["raise_cost"] if model.raises_requests else [])]
    out = rows[[*COST_REQUIRED_COLUMNS, *components]].reset_index(drop=True)
    for column in ("window_start", "window_end"):
        out[column] = out[column].astype("datetime64[ns, UTC]")
    for column in [c for c in COST_REQUIRED_COLUMNS if c not in (*WINDOW, "total_cost")]:
        out[column] = out[column].astype("str")
    for column in ["total_cost", *components]:
        out[column] = out[column].astype("float64")
    return out


def _round_to_micros(rows: pd.DataFrame, node_cost: pd.Series | None) -> pd.DataFrame:
    """Every amount as a whole number of micro-units (see :mod:`tenantcost.money`).

    The allocation core converts each row to micro-units; rounding each row on its own would
    let a node's rows drift a few micro-units from its price. So the parts of one node and
    window (every pod's base and raise per resource, the two idle rows, the system row) are
    rounded together with the largest-remainder method and add up *exactly* to the node's
    price × hours in micro-units. Pods without a node row (unknown node, unit prices) are
    rounded one amount at a time. Totals are the sums of the rounded components.
    """
    rows = rows.reset_index(drop=True).copy()
    amounts = rows[_PARTS].to_numpy(dtype="float64")  # one row per cost row, one column per part
    micros = to_micros(amounts.ravel()).reshape(amounts.shape)
    if node_cost is not None and "slot" in rows:
        slot = rows["slot"].to_numpy(dtype="float64")
        on_node = np.flatnonzero(~np.isnan(slot))
        if len(on_node):
            width = len(_PARTS)
            groups = np.repeat(slot[on_node], width)
            parents = np.repeat(to_micros(node_cost.reindex(slot[on_node]).to_numpy()), width)
            # Tie-break labels from the rows' own keys (unique within a node and window), so the
            # rounding never depends on the input row order.
            owner = rows.loc[on_node, ["kind", "namespace", "pod"]].astype("str")
            codes, _ = pd.factorize(
                owner["kind"] + "|" + owner["namespace"] + "/" + owner["pod"], sort=True
            )
            numbers = np.repeat(codes, width) * width + np.tile(np.arange(width), len(on_node))
            # Zero-padded so that the split's text tie-break follows the numeric order.
            labels = pd.Series(numbers).astype("str").str.zfill(len(str(int(numbers.max()))))
            micros[on_node] = split_largest_remainder(
                pd.Series(groups),
                pd.Series(parents),
                pd.Series(amounts[on_node].ravel()),
                labels,
            ).reshape(len(on_node), width)
    wide = pd.DataFrame(micros, columns=_PARTS, index=rows.index)
    total = wide.sum(axis=1)
    raised = wide["cpu_raise_cost"] + wide["mem_raise_cost"]
    rows["cpu_cost"] = wide["cpu_cost"].to_numpy() / MICROS_PER_UNIT
    rows["memory_cost"] = wide["memory_cost"].to_numpy() / MICROS_PER_UNIT
    rows["raise_cost"] = raised.to_numpy() / MICROS_PER_UNIT
    rows["total_cost"] = total.to_numpy() / MICROS_PER_UNIT
    return rows


# --------------------------------------------------------------------------- output


def write_podcost(frame: pd.DataFrame, fmt: str, out: Path | None = None) -> str:
    """Render the cost table as ``table``, ``json`` or ``csv``; write it to ``out`` if given.

    CSV is a canonical cost file (``allocate --costs`` reads it): ISO 8601 UTC windows and
    costs at full float precision, text cells neutralised for spreadsheets
    (:mod:`tenantcost.csv_cells`; the cost reader removes the ``'`` again). JSON is a list of
    the same rows. Returns the text.
    """
    if fmt not in FORMATS:
        raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got '{fmt}'")
    if fmt == "csv":
        rendered = _as_text_windows(neutralised(frame)).to_csv(index=False, lineterminator="\n")
    elif fmt == "json":
        records = _as_text_windows(frame).to_dict(orient="records")
        rendered = json.dumps(records, indent=2, allow_nan=False) + "\n"
    else:
        rendered = _table(frame)
    if out is not None:
        try:
            Path(out).write_text(rendered, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror}", file=str(out)) from None
    return rendered


def _as_text_windows(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for column in WINDOW:
        out[column] = iso_z_series(out[column])
    return out


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(no rows)\n"
    shown = _as_text_windows(frame)
    components = [c for c in ("cpu_cost", "memory_cost", "raise_cost") if c in frame.columns]
    columns = ["window_start", "window_end", "node", "name", *components, "total_cost"]
    if (frame["cluster"] != "").any():
        columns.insert(2, "cluster")
    body = shown[columns].to_string(index=False, float_format=lambda v: f"{v:.6f}")
    kinds = np.select(
        [frame["name"] == IDLE, frame["name"] == SYSTEM], ["idle", "system"], default="pods"
    )
    totals = frame.groupby(kinds)["total_cost"].sum()
    parts = ", ".join(f"{k} {totals.get(k, 0.0):.6f}" for k in ("pods", "idle", "system"))
    return f"{body}\ntotal {frame['total_cost'].sum():.6f} ({parts})\n"
