"""Generate a realistic benchmark data set for tenantcost: OpenCost costs, usage, a rule file.

    python benchmarks/generate.py --clients 1000 --services 10 --hours 744 --out /tmp/bench-small

Writes into ``--out``:

* ``costs.json``: an OpenCost ``/allocation/compute`` response (``{"code": 200, "status":
  "success", "data": [step, ...]}``), one step map per hour, aggregated by
  ``cluster,namespace,controllerKind,controller``. Per hour: every service's deployment
  (``cluster-one/saas/deployment:svc-07``; its cost follows its CPU load, like an autoscaled
  deployment), a capacity reserve, an overhead row (``ingress/daemonset:edge-proxy``), an
  excluded monitoring row and ``__idle__``. Costs have at most 5 decimals, like OpenCost's.
* usage, Parquet, with columns ``window_start, window_end`` (``timestamp[ns, UTC]``),
  ``service, client`` (string), ``requests`` (integer-valued float64) and ``cpu_seconds``
  (float64, 3 decimals). ``--layout hive`` (default): ``usage/date=YYYY-MM-DD/part-0.parquet``;
  ``folder``: ``usage/part-YYYY-MM-DD.parquet``; ``file``: one ``usage.parquet``.
* ``rules.yaml``: services split by a mix of keys (``requests``, ``cpu_seconds``, ``even``), one
  external cost per hour keyed by requests over all services, one per month keyed by CPU time
  over half of the services, ``idle: proportional``, ``sources`` naming both inputs.
* ``meta.json``: the parameters, the period covered and the number of rows written.

The model: client sizes follow a Zipf law (a few large clients, a long tail of small ones);
each client has a time zone, so its load follows a diurnal sine in *its* local time, and less
on weekends; each client uses a subset of the services with its own intensity and its own CPU
time per request; request counts are Poisson, so small clients are inactive (no row) in many
hours; some clients are onboarded or churn during the month, and each client has a few
hour-long outages. A few rows carry only background CPU time (``requests = 0``) or are all
zero. Usage without a client id is the empty client ``""``: about 0.5 % of each service's
requests in each hour, exported as one row per (hour, service) (the usage key
``window_start, window_end, service, client`` is unique, so it cannot be 0.5 % of the rows).

The generator streams: each calendar day is generated and written on its own (about 3 M rows a
day for 10,000 clients x 20 services), never the whole period. The output depends only on the
arguments (``--seed``): every day draws from its own random stream.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

NS_PER_HOUR = 3_600_000_000_000
CLUSTER = "cluster-one"
USAGE_SCHEMA = pa.schema(
    [
        ("window_start", pa.timestamp("ns", tz="UTC")),
        ("window_end", pa.timestamp("ns", tz="UTC")),
        ("service", pa.string()),
        ("client", pa.string()),
        ("requests", pa.float64()),
        ("cpu_seconds", pa.float64()),
    ]
)
KEY_PATTERN = ("requests", "cpu_seconds", "even", "requests", "cpu_seconds", "requests", "even")
"""Key of service i is KEY_PATTERN[i % 7]: about 3/7 requests, 2/7 CPU time, 2/7 even."""

NO_CLIENT_SHARE = 0.005
"""Share of each (hour, service)'s requests that arrive without a client id."""


@dataclass
class Model:
    """Everything drawn once for the whole period (per client and per service)."""

    clients: list[str]
    services: list[str]
    base: np.ndarray  # (N,) mean requests per hour of each client over all services
    tz: np.ndarray  # (N,) UTC offset in hours
    weekend: np.ndarray  # (N,) weekend load factor
    first_day: np.ndarray  # (N,) first active day index (onboarding)
    last_day: np.ndarray  # (N,) last active day index, exclusive (churn)
    mix: np.ndarray  # (S, N) share of a client's requests going to each service (0 = unused)
    ms_per_request: np.ndarray  # (S, N) CPU milliseconds per request
    service_ms: np.ndarray  # (S,) typical CPU milliseconds per request of each service
    background: np.ndarray  # (S,) True for worker services with background CPU time
    outage_rate: float


def build_model(clients: int, services: int, seed: int) -> Model:
    """Draw the per-client and per-service parameters."""
    rng = np.random.default_rng([seed, 0])
    width = max(4, len(str(clients)))
    names = [f"client-{i:0{width}d}" for i in range(1, clients + 1)]
    svc = [f"svc-{s:02d}" for s in range(1, services + 1)]
    # Zipf-like sizes: the client of rank r sends ~ 1/r of the largest one's traffic.
    ranks = rng.permutation(clients) + 1
    base = 500_000.0 * ranks.astype("float64") ** -1.0
    tz = rng.choice([-8, -5, -3, 0, 1, 1, 1, 2, 2, 3, 5.5, 8, 9], size=clients).astype("float64")
    weekend = rng.choice([0.3, 0.45, 0.9], p=[0.5, 0.3, 0.2], size=clients)
    days = 400
    first_day = np.where(rng.random(clients) < 0.03, rng.integers(1, 28, clients), 0)
    last_day = np.where(rng.random(clients) < 0.02, rng.integers(3, 30, clients), days)
    last_day = np.maximum(last_day, first_day + 2)
    # Service popularity decreases with its index; larger clients use more services.
    popularity = 1.0 / np.arange(1, services + 1) ** 0.5
    pct = 1.0 - (ranks - 1) / max(clients - 1, 1)  # 1 for the largest client, 0 for the smallest
    p_use = np.clip(0.55 + 0.3 * popularity[:, None] + 0.3 * pct[None, :], 0.0, 1.0)
    used = rng.random((services, clients)) < p_use
    used[0] = True  # every client uses the first service (the API)
    intensity = used * popularity[:, None] * rng.lognormal(0.0, 0.8, (services, clients))
    mix = intensity / intensity.sum(axis=0, keepdims=True)
    service_ms = np.exp(rng.uniform(np.log(8.0), np.log(400.0), services))
    background = np.zeros(services, dtype=bool)
    background[2::5] = True  # every fifth service is an import worker: slow requests
    service_ms[background] *= 10.0
    ms_per_request = service_ms[:, None] * rng.lognormal(0.0, 0.5, (services, clients))
    return Model(
        clients=names,
        services=svc,
        base=base,
        tz=tz,
        weekend=weekend,
        first_day=first_day,
        last_day=last_day,
        mix=mix,
        ms_per_request=ms_per_request,
        service_ms=service_ms,
        background=background,
        outage_rate=0.01,
    )


@dataclass
class DayUsage:
    """One day of usage as Arrow columns plus per-hour, per-service CPU totals for costs."""

    table: pa.Table
    cpu_per_service: np.ndarray  # (H, S) CPU seconds per hour and service
    requests_total: np.ndarray  # (H,) requests per hour, all services


def generate_day(
    model: Model, seed: int, day_index: int, hour_starts: np.ndarray, start_day: pd.Timestamp
) -> DayUsage:
    """Usage rows of the hours ``hour_starts`` (int64 ns, all in one UTC day)."""
    rng = np.random.default_rng([seed, 1, day_index])
    n = len(model.clients)
    s_count = len(model.services)
    hours = len(hour_starts)
    ts = pd.to_datetime(hour_starts, utc=True)
    utc_hour = ts.hour.to_numpy().astype("float64")
    dow = ts.day_of_week.to_numpy()
    day_no = int((ts[0].normalize() - start_day) / pd.Timedelta(days=1))

    # Load factor of each client in each hour: diurnal sine in local time, weekend dip.
    local = (utc_hour[:, None] + model.tz[None, :]) % 24.0  # (H, N)
    diurnal = np.maximum(0.08, 1.0 + 0.85 * np.sin(2 * np.pi * (local - 9.0) / 24.0))
    local_dow = (dow[:, None] + np.floor((utc_hour[:, None] + model.tz[None, :]) / 24.0)) % 7
    factor = diurnal * np.where(local_dow >= 5, model.weekend[None, :], 1.0)
    active = (day_no >= model.first_day) & (day_no < model.last_day)  # (N,)
    up = rng.random((hours, n)) >= model.outage_rate  # hour-long outages
    factor = factor * active[None, :] * up
    noise = rng.gamma(20.0, 1.0 / 20.0, (hours, n))
    lam_client = model.base[None, :] * factor * noise  # (H, N)

    # Per (hour, service, client): index 0 of the client axis is the empty client "".
    lam = lam_client[:, None, :] * model.mix[None, :, :]  # (H, S, N)
    requests = np.zeros((hours, s_count, n + 1), dtype="float64")
    requests[:, :, 1:] = rng.poisson(lam)
    total = requests[:, :, 1:].sum(axis=2)
    requests[:, :, 0] = rng.poisson(total * NO_CLIENT_SHARE / (1 - NO_CLIENT_SHARE))
    ms = np.empty((s_count, n + 1), dtype="float64")
    ms[:, 1:] = model.ms_per_request
    ms[:, 0] = model.service_ms
    cpu = requests * ms[None, :, :] * rng.lognormal(0.0, 0.15, requests.shape) / 1000.0

    # Rows without requests: background CPU time on worker services, and a few zero rows.
    used = np.zeros((s_count, n + 1), dtype=bool)
    used[:, 1:] = model.mix > 0
    awake = np.zeros((hours, n + 1), dtype=bool)
    awake[:, 1:] = factor > 0
    idle_cell = (requests == 0) & used[None, :, :] & awake[:, None, :]
    draw = rng.random(requests.shape)
    bg = idle_cell & model.background[None, :, None] & (draw < 0.15)
    cpu[bg] = rng.lognormal(np.log(2.0), 1.0, int(bg.sum()))
    zero = idle_cell & ~bg & (draw > 0.99)
    cpu = np.round(cpu, 3)
    present = (requests > 0) | (cpu > 0) | zero

    h_idx, s_idx, c_idx = np.nonzero(present)  # sorted by hour, service, client ("" first)
    starts = hour_starts[h_idx]
    names = pa.array(["", *model.clients], type=pa.string())
    services = pa.array(model.services, type=pa.string())
    table = pa.table(
        {
            "window_start": pa.array(starts, type=pa.timestamp("ns", tz="UTC")),
            "window_end": pa.array(starts + NS_PER_HOUR, type=pa.timestamp("ns", tz="UTC")),
            "service": services.take(pa.array(s_idx)),
            "client": names.take(pa.array(c_idx)),
            "requests": pa.array(requests[h_idx, s_idx, c_idx], type=pa.float64()),
            "cpu_seconds": pa.array(cpu[h_idx, s_idx, c_idx], type=pa.float64()),
        },
        schema=USAGE_SCHEMA,
    )
    return DayUsage(
        table=table,
        cpu_per_service=cpu.sum(axis=2),
        requests_total=requests.sum(axis=(1, 2)),
    )


def _iso(ns: int) -> str:
    return pd.Timestamp(ns, tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def _allocation(
    name: str, props: dict[str, str], start: str, end: str, cost_e5: int
) -> dict[str, object]:
    """One OpenCost allocation object; ``cost_e5`` is the total in 10^-5 currency units."""
    cpu_e5 = cost_e5 * 6 // 10  # the cost model gives 60 % to CPU, 40 % to memory
    ram_e5 = cost_e5 - cpu_e5
    cores = round(cpu_e5 / 1e5 / 0.0336, 5)
    ram_bytes = round(ram_e5 / 1e5 / 0.0056 * 2**30, 1)
    return {
        "name": name,
        "properties": props,
        "window": {"start": start, "end": end},
        "start": start,
        "end": end,
        "minutes": 60,
        "cpuCores": cores,
        "cpuCoreRequestAverage": cores,
        "cpuCoreUsageAverage": round(cores * 0.3, 5),
        "cpuCoreHours": cores,
        "cpuCost": cpu_e5 / 1e5,
        "cpuCostAdjustment": 0,
        "cpuEfficiency": 0.3,
        "gpuCount": 0,
        "gpuHours": 0,
        "gpuCost": 0,
        "gpuCostAdjustment": 0,
        "networkTransferBytes": 0,
        "networkReceiveBytes": 0,
        "networkCost": 0,
        "networkCrossZoneCost": 0,
        "networkCrossRegionCost": 0,
        "networkInternetCost": 0,
        "networkCostAdjustment": 0,
        "loadBalancerCost": 0,
        "loadBalancerCostAdjustment": 0,
        "pvBytes": 0,
        "pvByteHours": 0,
        "pvCost": 0,
        "pvs": None,
        "pvCostAdjustment": 0,
        "ramBytes": ram_bytes,
        "ramByteRequestAverage": ram_bytes,
        "ramByteUsageAverage": round(ram_bytes * 0.6, 1),
        "ramByteHours": ram_bytes,
        "ramCost": ram_e5 / 1e5,
        "ramCostAdjustment": 0,
        "ramEfficiency": 0.6,
        "externalCost": 0,
        "sharedCost": 0,
        "totalCost": cost_e5 / 1e5,
        "totalEfficiency": 0.4,
        "proportionalAssetResourceCosts": {},
        "lbAllocations": None,
        "sharedCostBreakdown": {},
    }


def _workload(namespace: str, kind: str, controller: str) -> tuple[str, dict[str, str]]:
    props = {
        "cluster": CLUSTER,
        "namespace": namespace,
        "controllerKind": kind,
        "controller": controller,
    }
    return f"{CLUSTER}/{namespace}/{kind}:{controller}", props


def cost_steps(
    model: Model, seed: int, day_index: int, hour_starts: np.ndarray, day: DayUsage
) -> list[dict[str, object]]:
    """One OpenCost step map per hour: services (cost follows CPU load), residual rows, idle."""
    rng = np.random.default_rng([seed, 2, day_index])
    steps = []
    # Replicas of 0.5 vCPU + 1 GiB sized for 30 % CPU utilisation, at least one replica.
    replicas = np.maximum(1, np.ceil(day.cpu_per_service / 3600.0 / 0.3 / 0.5))
    replica_cost_e5 = 0.5 * 3360 + 1.0 * 560  # 0.0336/vCPU-h, 0.0056/GiB-h, in 1e-5 units
    for h, start_ns in enumerate(hour_starts):
        start, end = _iso(int(start_ns)), _iso(int(start_ns) + NS_PER_HOUR)
        step: dict[str, object] = {}
        requested_e5 = 0
        for s, service in enumerate(model.services):
            cost = int(np.rint(replicas[h, s] * replica_cost_e5 * rng.uniform(0.97, 1.03)))
            requested_e5 += cost
            name, props = _workload("saas", "deployment", service)
            step[name] = _allocation(name, props, start, end, cost)
        fixed = [
            (("saas", "deployment", "capacity-reserve"), 6720),
            (("ingress", "daemonset", "edge-proxy"), 910 + int(day.requests_total[h] // 50_000)),
            (("monitoring", "statefulset", "prometheus"), 2800 + int(rng.integers(0, 400))),
        ]
        for (ns, kind, ctrl), cost in fixed:
            requested_e5 += cost
            name, props = _workload(ns, kind, ctrl)
            step[name] = _allocation(name, props, start, end, cost)
        # Idle: nodes are added in steps of 4 vCPU / 16 GiB (0.2240 USD/h) with ~25 % headroom.
        node_e5 = 4 * 3360 + 16 * 560
        nodes = int(np.ceil(requested_e5 * 1.25 / node_e5))
        idle = nodes * node_e5 - requested_e5
        step["__idle__"] = _allocation("__idle__", {"cluster": CLUSTER}, start, end, idle)
        steps.append(step)
    return steps


def rules_yaml(model: Model, start: pd.Timestamp, usage_source: str) -> str:
    """The rule file: keys per service, two external costs, proportional idle."""
    lines = [
        "# Generated by benchmarks/generate.py: a benchmark rule set.",
        "currency: USD",
        "sources:",
        "  costs: [costs.json]",
        f"  usage: [{usage_source}]",
        "rules:",
        "  - id: bench",
        f'    effective_from: "{start.normalize().date().isoformat()}"',
        "    description: services by a mix of keys, two external costs, idle shared",
        "    workloads:",
    ]
    for s, service in enumerate(model.services):
        lines += [
            f"      - match: {{namespace: saas, controller: {service}}}",
            "        class: shared",
            f"        service: {service}",
            f"        key: {KEY_PATTERN[s % len(KEY_PATTERN)]}",
        ]
    n = len(model.clients)
    monthly = f"{200 + 0.35 * n:.2f}"
    half = model.services[: max(1, (len(model.services) + 1) // 2)]
    lines += [
        "      - match: {namespace: saas, controller: capacity-reserve}",
        "        class: reserve",
        "      - match: {namespace: ingress, controller: edge-proxy}",
        "        class: overhead",
        "      - match: {namespace: monitoring}",
        "        class: excluded",
        "        reason: platform monitoring, outside the client perimeter",
        "      - match: {name: __idle__}",
        "        class: idle",
        "    external:",
        "      - name: search-api",
        f'        amount: "{0.05 + 0.0004 * n:.4f}"',
        "        per: hour",
        "        key: requests",
        "      - name: managed-postgres",
        f'        amount: "{monthly}"',
        "        per: month",
        "        key: cpu_seconds",
        f"        services: [{', '.join(half)}]",
        "    idle: proportional",
        "    unmatched: error",
    ]
    return "\n".join(lines) + "\n"


def generate(
    clients: int,
    services: int,
    hours: int,
    start: pd.Timestamp,
    out: Path,
    seed: int,
    layout: str,
) -> dict[str, object]:
    """Write the data set into ``out``; return its metadata (also written as meta.json)."""
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("usage", "usage.parquet", "costs.json", "rules.yaml", "meta.json"):
        path = out / stale
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    model = build_model(clients, services, seed)
    start_ns = start.value
    all_starts = start_ns + np.arange(hours, dtype="int64") * NS_PER_HOUR
    start_day = start.normalize()
    dates = pd.to_datetime(all_starts, utc=True).normalize()
    day_numbers = ((dates - start_day) / pd.Timedelta(days=1)).astype("int64").to_numpy()

    writer: pq.ParquetWriter | None = None
    if layout == "file":
        writer = pq.ParquetWriter(out / "usage.parquet", USAGE_SCHEMA, compression="zstd")
    rows = 0
    with open(out / "costs.json", "w", encoding="utf-8") as costs:
        costs.write('{"code": 200, "status": "success", "data": [\n')
        first = True
        for day_index in np.unique(day_numbers):
            hour_starts = all_starts[day_numbers == day_index]
            day = generate_day(model, seed, int(day_index), hour_starts, start_day)
            date = pd.Timestamp(int(hour_starts[0]), tz="UTC").date().isoformat()
            if writer is not None:
                writer.write_table(day.table, row_group_size=1_000_000)
            else:
                if layout == "hive":
                    path = out / "usage" / f"date={date}" / "part-0.parquet"
                else:
                    path = out / "usage" / f"part-{date}.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(day.table, path, compression="zstd", row_group_size=1_000_000)
            rows += day.table.num_rows
            for step in cost_steps(model, seed, int(day_index), hour_starts, day):
                costs.write(("" if first else ",\n") + json.dumps(step, separators=(",", ":")))
                first = False
            print(
                f"  {date}: {day.table.num_rows:,} usage rows ({time.perf_counter() - t0:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
            del day
        costs.write("\n]}\n")
    if writer is not None:
        writer.close()
    usage_source = "usage.parquet" if layout == "file" else "usage"
    (out / "rules.yaml").write_text(rules_yaml(model, start, usage_source), encoding="utf-8")
    end_ns = int(all_starts[-1]) + NS_PER_HOUR
    meta: dict[str, object] = {
        "clients": clients,
        "services": services,
        "hours": hours,
        "seed": seed,
        "layout": layout,
        "start": _iso(start_ns),
        "end": _iso(end_ns),
        "usage": usage_source,
        "usage_rows": rows,
        "cost_rows": hours * (services + 4),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--services", type=int, default=10)
    parser.add_argument("--hours", type=int, default=744)
    parser.add_argument("--start", default="2026-11-01T00:00:00Z", help="first window start")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--layout",
        choices=("hive", "folder", "file"),
        default="hive",
        help="usage as usage/date=YYYY-MM-DD/part-0.parquet (hive), usage/part-DATE.parquet "
        "(folder) or one usage.parquet (file)",
    )
    args = parser.parse_args(argv)
    if args.clients < 1 or args.services < 1 or args.hours < 1:
        parser.error("--clients, --services and --hours must be >= 1")
    start = pd.Timestamp(args.start)
    start = start.tz_localize("UTC") if start.tzinfo is None else start.tz_convert("UTC")
    if start != start.floor("h"):
        parser.error("--start must be on a whole hour")
    meta = generate(
        args.clients, args.services, args.hours, start, args.out, args.seed, args.layout
    )
    print(
        f"wrote {meta['usage_rows']:,} usage rows and {meta['cost_rows']:,} cost rows "
        f"({meta['clients']} clients x {meta['services']} services x {meta['hours']} h) "
        f"to {args.out} in {meta['seconds']} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
