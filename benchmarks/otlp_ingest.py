"""OTLP ingest rate of ``POST /v1/metrics`` (on demand, not a test): data points per second.

    python benchmarks/otlp_ingest.py --clients 2000 --requests 20

What it does, in this process (FastAPI's TestClient over the real application, a fresh SQLite
store with the bundled example's rules; ``--db postgresql+psycopg://...`` works the same):

1. builds ``--requests`` cumulative exports of one service (``api``): a histogram
   ``http.server.request.duration`` and a counter ``app.cpu.time``, one series per client and
   instrument, so each export holds ``2 x --clients`` data points, one minute apart;
2. posts them one after the other as protobuf (``application/x-protobuf``) and reports data
   points per second, end to end (decoding, series state, one usage batch per request);
3. times the decoding core alone (:func:`tenantcost.otlp.points` and :func:`~tenantcost.otlp.plan`
   on the same bodies) to show where the time goes;
4. checks the stored totals equal the last cumulative values (exactly).

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

ROOT = Path(__file__).resolve().parents[1]
SECRET = "benchmark-secret-0123456789"
SETTINGS = """\
otlp:
  metrics:
    requests: {name: http.server.request.duration, value: count}
    cpu_seconds: {name: app.cpu.time, value: sum}
"""
START = int(pd.Timestamp("2026-12-02T00:00:00Z").value)
MINUTE = 60 * 10**9


def export(clients: int, number: int) -> bytes:
    """The ``number``-th cumulative export: every client has 3 more requests and 0.25 s more."""
    time_ns = START + (number + 1) * MINUTE
    tags = [[KeyValue(key="tenant.id", value=AnyValue(string_value=f"client-{c:05d}"))]
            for c in range(clients)]  # fmt: skip
    histogram = [pb.HistogramDataPoint(start_time_unix_nano=START, time_unix_nano=time_ns,
                                       count=3 * (number + 1), sum=0.01 * (number + 1),
                                       attributes=t) for t in tags]  # fmt: skip
    counter = [
        pb.NumberDataPoint(
            start_time_unix_nano=START,
            time_unix_nano=time_ns,
            as_double=0.25 * (number + 1),
            attributes=t,
        )
        for t in tags
    ]
    metrics = [
        pb.Metric(name="http.server.request.duration",
                  histogram=pb.Histogram(data_points=histogram, aggregation_temporality=2)),
        pb.Metric(name="app.cpu.time", sum=pb.Sum(data_points=counter, is_monotonic=True,
                                                  aggregation_temporality=2)),
    ]  # fmt: skip
    resource = Resource(attributes=[KeyValue(key="service.name",
                                             value=AnyValue(string_value="api"))])  # fmt: skip
    request = ExportMetricsServiceRequest(resource_metrics=[pb.ResourceMetrics(
        resource=resource, scope_metrics=[pb.ScopeMetrics(metrics=metrics)])])  # fmt: skip
    return request.SerializeToString()


def cli(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENANTCOST_")}
    done = subprocess.run([sys.executable, "-m", "tenantcost", *args], env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--db", default=None, help="store URL (default: a SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="otlp-bench-") as tmp:
        folder = Path(tmp)
        db = args.db or f"sqlite:///{folder / 'store.db'}"
        store = ("--db", db, "--data", str(folder / "data"))
        cli("db", "upgrade", *store)
        cli("rules", "load", str(ROOT / "examples" / "saas-three-clients" / "rules.yaml"), *store)
        token = cli("token", "create", "--role", "ingest", "--name", "bench", "--db", db).strip()
        (folder / "settings.yaml").write_text(SETTINGS)
        bodies = [export(args.clients, n) for n in range(args.requests)]
        rows = [run_service(folder, db, token, bodies), run_core(folder, bodies)]
        print_table(rows, args)


def run_service(folder: Path, db: str, token: str, bodies: list[bytes]) -> dict[str, object]:
    from fastapi.testclient import TestClient

    from tenantcost.service.app import create_app
    from tenantcost.service.config import ServiceSettings
    from tenantcost.store.settings import resolve_settings

    settings = resolve_settings(db, str(folder / "data"), folder / "settings.yaml", environ={})
    app = create_app(ServiceSettings(settings, SECRET))
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"}
    points = 0
    with TestClient(app) as client:
        began = time.perf_counter()
        for body in bodies:
            answer = client.post("/v1/metrics", content=body, headers=headers)
            response = ExportMetricsServiceResponse.FromString(answer.content)
            assert answer.status_code == 200 and not response.partial_success.rejected_data_points
            points += len(ExportMetricsServiceRequest.FromString(body).resource_metrics[0]
                          .scope_metrics[0].metrics[0].histogram.data_points) * 2  # fmt: skip
        seconds = time.perf_counter() - began
    check_totals(folder, db, len(bodies))
    return {"what": "POST /v1/metrics (end to end)", "points": points, "seconds": seconds}


def run_core(folder: Path, bodies: list[bytes]) -> dict[str, object]:
    from tenantcost.otlp import Encoding, parse, plan, points
    from tenantcost.store.settings import resolve_settings

    otlp = resolve_settings(settings=folder / "settings.yaml", environ={}).otlp
    state = pd.DataFrame(columns=["key", "start", "time", "value"]).set_index("key")
    count = 0
    began = time.perf_counter()
    for body in bodies:
        found = points(parse(body, Encoding.PROTOBUF), otlp)
        planned = plan(found.rows, state, ["requests", "cpu_seconds"])
        state = pd.concat([p.state for p in planned.parts]).set_index("key")
        count += found.count
    return {"what": "decode + plan only (tenantcost.otlp)", "points": count,
            "seconds": time.perf_counter() - began}  # fmt: skip


def check_totals(folder: Path, db: str, requests: int) -> None:
    """The store holds exactly the last cumulative values, summed over the clients."""
    from sqlalchemy import select

    from tenantcost.store.engine import open_engine
    from tenantcost.store.models import Batch, BatchFile, table
    from tenantcost.store.settings import resolve_settings

    engine = open_engine(resolve_settings(db=db, environ={}))
    with engine.connect() as conn:
        f, b = table(BatchFile).c, table(Batch).c
        paths = (
            conn.execute(
                select(f.path).join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
            )
            .scalars()
            .all()
        )
    engine.dispose()
    usage = pd.concat([pd.read_parquet(folder / "data" / p) for p in paths])
    per_client = usage.groupby("client")[["requests", "cpu_seconds"]].sum()
    assert (per_client["requests"] == 3 * requests).all(), per_client
    assert (per_client["cpu_seconds"] == 0.25 * requests).all(), per_client


def print_table(rows: list[dict[str, object]], args: argparse.Namespace) -> None:
    print(f"{args.requests} exports of {2 * args.clients} data points "
          f"({args.clients} clients x 2 instruments), cumulative, protobuf; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{datetime.now(UTC):%Y-%m-%d}\n")  # fmt: skip
    print("| What | Data points | Seconds | Points per second |")
    print("|---|---:|---:|---:|")
    for row in rows:
        seconds = float(str(row["seconds"]))
        points = int(str(row["points"]))
        print(f"| {row['what']} | {points:,} | {seconds:.2f} | {points / seconds:,.0f} |")


if __name__ == "__main__":
    main()
