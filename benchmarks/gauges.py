"""Gauge integration at scale: a month of hourly samples for N clients, integrated per hour.

    python benchmarks/gauges.py --clients 10000 --repeat 3

Generates the samples in numpy (one level per client and hour, a few gaps and re-sent
instants), then times :func:`tenantcost.gauges.integrate` over the calendar month (DuckDB:
dedupe, segments, the cut at hours, exact sums) and prints samples per second. The store's
read of the samples (SQL) is not included: see docs/scale.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from tenantcost.duck import connect
from tenantcost.gauges import integrate

HOUR_US = 3_600_000_000
MONTH = pd.Timestamp("2026-11-01T00:00:00Z")


def samples(clients: int, hours: int, seed: int = 39) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    client = np.repeat(np.arange(clients), hours)
    hour = np.tile(np.arange(hours), clients)
    jitter = rng.integers(0, 60_000_000, clients * hours)  # within the first minute
    keep = rng.random(clients * hours) > 0.01  # 1 % of the samples missing
    t_us = MONTH.value // 1000 + hour * HOUR_US + jitter
    level = rng.integers(0, 2**40, clients * hours)
    return pd.DataFrame(
        {
            "metric": "storage_bytes",
            "service": "db",
            "client": pd.Series([f"client-{c:05d}" for c in range(clients)]).to_numpy()[client],
            "t_us": t_us,
            "value": level.astype(str),
            "rank": 1,
        }
    ).loc[keep]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--hours", type=int, default=720)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    frame = samples(args.clients, args.hours)
    end = MONTH + pd.Timedelta(hours=args.hours)
    times = []
    for _ in range(args.repeat):
        con = connect()
        con.register("samples", frame)
        started = time.perf_counter()
        done = integrate(con, "SELECT * FROM samples", {"storage_bytes": 7200}, MONTH, end)
        rows = con.execute(f"SELECT count(*) FROM {done.table}").fetchall()[0][0]
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    print(
        f"{len(frame):,} samples, {args.clients:,} clients, {args.hours} h: "
        f"{rows:,} hourly rows, {len(done.stale):,} stale spans; "
        f"median {median:.2f} s ({len(frame) / median:,.0f} samples/s; runs "
        + ", ".join(f"{t:.2f}" for t in times)
        + ")"
    )


if __name__ == "__main__":
    main()
