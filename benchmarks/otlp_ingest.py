"""OTLP ingest rate of ``POST /v1/metrics`` over real HTTP (on demand, not a test).

    python benchmarks/otlp_ingest.py                       # 10,000 clients, 3 services
    python benchmarks/otlp_ingest.py --workers 1 --in-flight 1 --runs 5
    python benchmarks/otlp_ingest.py --profile             # where the route's time goes

What it does:

1. makes a fresh store (SQLite by default; ``--db postgresql+psycopg://...`` works the same)
   with a rule file of three services (``api``, ``import-worker``, ``search``) split by
   requests and CPU seconds, an ingest token and an ``otlp:`` settings file;
2. starts a real ``tenantcost serve`` (``--workers``) in a subprocess;
3. encodes, before any timing, cumulative exports as an SDK or a Collector sends them: one
   export per service per round (a minute), each holding a histogram
   ``http.server.request.duration`` (its count: ``requests``) and a counter ``app.cpu.time``
   (``cpu_seconds``) for every client: ``2 x --clients`` data points (20,000 by default);
4. posts one warm-up round (every series' first point), then ``--runs`` timed runs of
   ``--rounds`` rounds each, with a plain HTTP client (``http.client``, one keep-alive
   connection per thread, new connections for each run; ``--reconnect``: one per export)
   keeping ``--in-flight`` exports in flight, and reports each run's data points per second,
   end to end (HTTP, decoding, series state, the usage batches), and their median, lowest
   and highest;
5. checks every answer is a full success and the stored usage equals the last cumulative
   values exactly (per service and client).

``--in-flight`` at most the number of services keeps two exports of one series from racing:
the server handles it (the later write finds the series moved, rolls its batch back and
plans again), at the cost of a second batch. A process stores one export at a time
(``tenantcost/service/otlp.py``), so ``--workers 2`` is what uses two cores; uvicorn's
workers share the listening socket, and which one accepts a connection is the kernel's
choice: two connections on one worker halve a run's rate (the lowest runs).

``--profile`` instead runs the route's work in this process under cProfile (the same bodies,
``decode``, ``points``, ``ingest_points`` on a store of its own) and prints the functions
that take the time, grouped by stage. Sampling the real server works too:
``py-spy record -p <pid> -o profile.svg`` (``pip install py-spy``).

Prints Markdown.
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

SECRET = "benchmark-secret-0123456789"
SERVICES = ("api", "import-worker", "search")
SETTINGS = """\
otlp:
  metrics:
    requests: {name: http.server.request.duration, value: count}
    cpu_seconds: {name: app.cpu.time, value: sum}
"""
RULES = """\
currency: USD
rules:
  - id: otlp-bench
    effective_from: "2020-01-01"
    workloads:
      - match: {namespace: saas, controller: api}
        class: shared
        service: api
        key: requests
      - match: {namespace: saas, controller: import-worker}
        class: shared
        service: import-worker
        key: cpu_seconds
      - match: {namespace: saas, controller: search}
        class: shared
        service: search
        key: requests
    unmatched: error
"""
MINUTE = 60 * 10**9


def export(service: str, clients: int, minute: int, start: int) -> bytes:
    """The export of ``service`` at ``minute`` (1, 2, ...), cumulative since ``start``:
    every client has 3 requests and 0.25 s of CPU more each minute."""
    time_ns = start + minute * MINUTE
    tags = [[KeyValue(key="tenant.id", value=AnyValue(string_value=f"client-{c:05d}")),
             KeyValue(key="http.route", value=AnyValue(string_value="/v1/items"))]
            for c in range(clients)]  # fmt: skip
    histogram = [pb.HistogramDataPoint(start_time_unix_nano=start, time_unix_nano=time_ns,
                                       count=3 * minute, sum=0.01 * minute,
                                       bucket_counts=[minute, 2 * minute],
                                       explicit_bounds=[0.005], attributes=t)
                 for t in tags]  # fmt: skip
    counter = [pb.NumberDataPoint(start_time_unix_nano=start, time_unix_nano=time_ns,
                                  as_double=0.25 * minute, attributes=t[:1])
               for t in tags]  # fmt: skip
    metrics = [
        pb.Metric(name="http.server.request.duration", unit="s",
                  histogram=pb.Histogram(data_points=histogram, aggregation_temporality=2)),
        pb.Metric(name="app.cpu.time", unit="s", sum=pb.Sum(data_points=counter,
                                                            is_monotonic=True,
                                                            aggregation_temporality=2)),
    ]  # fmt: skip
    resource = Resource(attributes=[
        KeyValue(key="service.name", value=AnyValue(string_value=service)),
        KeyValue(key="service.instance.id", value=AnyValue(string_value=f"{service}-0")),
    ])  # fmt: skip
    scope = InstrumentationScope(name="benchmark", version="1")
    scopes = [pb.ScopeMetrics(scope=scope, metrics=metrics)]
    request = ExportMetricsServiceRequest(
        resource_metrics=[pb.ResourceMetrics(resource=resource, scope_metrics=scopes)]
    )
    return request.SerializeToString()


def rounds(clients: int, first: int, count: int, start: int) -> list[bytes]:
    """Rounds ``first .. first + count - 1`` (each a minute): one export per service."""
    return [export(service, clients, minute, start)
            for minute in range(first, first + count) for service in SERVICES]  # fmt: skip


def cli(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTCOST_")}
    done = subprocess.run([sys.executable, "-m", "tenantcost", *args], env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(folder: Path, db: str, workers: int) -> Iterator[tuple[int, int]]:
    """A real ``tenantcost serve``: its port and process id, until the block ends."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTCOST_")}
    env["TENANTCOST_SECRET"] = SECRET
    command = [sys.executable, "-m", "tenantcost", "serve", "--db", db, "--data",
               str(folder / "data"), "--settings", str(folder / "settings.yaml"),
               "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]  # fmt: skip
    with (folder / "serve.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((folder / "serve.log").read_text())
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                connection.request("GET", "/healthz")
                if connection.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def post_all(port: int, token: str, bodies: Sequence[bytes], in_flight: int,
             reconnect: bool = False) -> float:  # fmt: skip
    """Post every body, ``in_flight`` at a time; the seconds from the first to the last
    answer. Every answer must be a full success. ``reconnect``: a connection per export
    (with several workers, the one free to accept takes it), else one kept per thread."""
    work: queue.Queue[bytes | None] = queue.Queue()
    for body in bodies:
        work.put(body)
    failures: list[str] = []
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"}

    def poster() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while True:
            try:
                body = work.get_nowait()
            except queue.Empty:
                break
            if reconnect:
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            connection.request("POST", "/v1/metrics", body=body, headers=headers)
            answer = connection.getresponse()
            content = answer.read()
            partial = ExportMetricsServiceResponse.FromString(content).partial_success \
                if answer.status == 200 else None  # fmt: skip
            if partial is None or partial.rejected_data_points:
                failures.append(f"{answer.status}: {content[:300]!r}")
        connection.close()

    threads = [threading.Thread(target=poster) for _ in range(in_flight)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    if failures:
        raise RuntimeError(f"{len(failures)} exports not fully stored: {failures[0]}")
    return seconds


def check_totals(folder: Path, db: str, clients: int, minutes: int) -> None:
    """The store holds exactly the last cumulative values, per service and client."""
    from sqlalchemy import select

    from tenantcost.store.engine import open_engine
    from tenantcost.store.models import Batch, BatchFile, table
    from tenantcost.store.settings import resolve_settings

    engine = open_engine(resolve_settings(db=db, environ={}))
    with engine.connect() as conn:
        f, b = table(BatchFile).c, table(Batch).c
        paths = conn.execute(
            select(f.path).join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
            .where(b.status == "committed")).scalars().all()  # fmt: skip
    engine.dispose()
    usage = pd.concat([pd.read_parquet(folder / "data" / p) for p in paths])
    cells = usage.groupby(["service", "client"])[["requests", "cpu_seconds"]].sum()
    assert len(cells) == clients * len(SERVICES), len(cells)
    assert (cells["requests"] == 3 * minutes).all(), cells
    assert (cells["cpu_seconds"] == 0.25 * minutes).all(), cells


def prepare(folder: Path, db: str) -> str:
    """A fresh store with the rules, the settings file; the ingest token."""
    store = ("--db", db, "--data", str(folder / "data"))
    cli("db", "upgrade", *store)
    (folder / "rules.yaml").write_text(RULES)
    cli("rules", "load", str(folder / "rules.yaml"), *store)
    (folder / "settings.yaml").write_text(SETTINGS)
    return cli("token", "create", "--role", "ingest", "--name", "bench", "--db", db).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="timed runs (median reported)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds per run: one export per service each")  # fmt: skip
    parser.add_argument("--in-flight", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="tenantcost serve --workers")
    parser.add_argument("--reconnect", action="store_true",
                        help="a new connection per export (else one kept per thread)")  # fmt: skip
    parser.add_argument("--db", default=None, help="store URL (default: a SQLite file)")
    parser.add_argument("--profile", action="store_true",
                        help="profile the route's work in process instead")  # fmt: skip
    args = parser.parse_args()
    start = int(pd.Timestamp.now(tz="UTC").floor("h").value) - 3 * 3_600 * 10**9
    if (args.runs * args.rounds + 1) * MINUTE > 3 * 3_600 * 10**9:
        parser.error("at most 179 rounds in all (the exports' minutes must not pass now)")
    with tempfile.TemporaryDirectory(prefix="otlp-bench-") as tmp:
        folder = Path(tmp)
        db = args.db or f"sqlite:///{folder / 'store.db'}"
        token = prepare(folder, db)
        if args.profile:
            profile(folder, db, args, start)
            return
        rates: list[float] = []
        with serve(folder, db, args.workers) as (port, pid):
            print(f"tenantcost serve: pid {pid}, port {port}", file=sys.stderr)
            post_all(
                port, token, rounds(args.clients, 1, 1, start), args.in_flight, args.reconnect
            )  # warm-up: every series' first point
            minute = 2
            for run in range(args.runs):
                bodies = rounds(args.clients, minute, args.rounds, start)
                seconds = post_all(port, token, bodies, args.in_flight, args.reconnect)
                points = 2 * args.clients * len(bodies)
                rates.append(points / seconds)
                minute += args.rounds
                print(f"run {run + 1}: {points:,} points in {seconds:.2f} s: "
                      f"{points / seconds:,.0f} points/s", file=sys.stderr)  # fmt: skip
        check_totals(folder, db, args.clients, minute - 1)
        report(args, rates)


def report(args: argparse.Namespace, rates: list[float]) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{args.runs} runs of {args.rounds} rounds x {len(SERVICES)} services: exports of "
          f"{2 * args.clients:,} data points ({args.clients:,} clients x 2 instruments), "
          f"cumulative, protobuf, over HTTP, {args.in_flight} in flight, "
          f"serve --workers {args.workers}; {platform.machine()}, {os.cpu_count()} cores, "
          f"load {load:.1f}, {datetime.now(UTC):%Y-%m-%d}\n")  # fmt: skip
    print("| points/s, median | lowest | highest | runs |")
    print("|---:|---:|---:|---|")
    shown = ", ".join(f"{r:,.0f}" for r in rates)
    print(f"| {statistics.median(rates):,.0f} | {min(rates):,.0f} | {max(rates):,.0f} | "
          f"{shown} |")  # fmt: skip


def profile(folder: Path, db: str, args: argparse.Namespace, start: int) -> None:
    """The route's work (``decode``, ``points``, ``ingest_points``) in process, profiled."""
    import cProfile
    import pstats

    from tenantcost.otlp import Encoding, points
    from tenantcost.otlp_count import decode
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.engine import open_engine
    from tenantcost.store.otlp_series import ingest_points
    from tenantcost.store.settings import resolve_settings
    from tenantcost.store.usage_metrics import stored_gauges

    settings = resolve_settings(db, str(folder / "data"), folder / "settings.yaml", environ={})
    store = Store(open_engine(settings), DataDir(str(folder / "data")))
    otlp = settings.otlp

    def handle(body: bytes) -> None:
        with store.engine.connect() as conn:
            gauges = stored_gauges(conn)
        found = points(decode(body, Encoding.PROTOBUF, 100_000), otlp, gauges=gauges)
        outcome = ingest_points(store, found, otlp.counter_columns, actor="bench",
                                origin="bench", wait=30)  # fmt: skip
        assert not any(len(r) for r in outcome.refused), outcome.refused

    for body in rounds(args.clients, 1, 1, start):  # warm-up
        handle(body)
    bodies = rounds(args.clients, 2, args.rounds, start)
    profiler = cProfile.Profile()
    began = time.perf_counter()
    profiler.enable()
    for body in bodies:
        handle(body)
    profiler.disable()
    seconds = time.perf_counter() - began
    count = 2 * args.clients * len(bodies)
    print(f"in process, profiled: {count:,} points in {seconds:.2f} s "
          f"({count / seconds:,.0f} points/s under cProfile)\n")  # fmt: skip
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
