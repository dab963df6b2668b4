"""`serve --metrics-port`: Prometheus metrics scraped by a real Prometheus from a real
`tenantcost serve --workers 2` (issue 38).

Requests are counted by route template in every worker and add up; what CronJobs do
(ingest, run, close) is read from the store at scrape time, so an ingest by another process
while the service runs shows at the next scrape; no client's name reaches the metrics.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tenantcost.service.metrics import UNMATCHED
from tenantcost.store.activity import Origin, origin_of, read_activity, source_label
from tenantcost.store.engine import open_engine
from tenantcost.store.settings import resolve_settings

from .postgres_fixture import free_port
from .prometheus_fixture import serve as serve_prometheus
from .service_server import (
    MONTH,
    Service,
    create_token,
    example_store,
    invoke,
    running_service,
    tenantcost,
)

MONTHS_CALLS = 24
MISSING_CALLS = 3


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, int, str, str]]:
    folder = tmp_path_factory.mktemp("metrics")
    db, data = f"sqlite:///{folder / 'tc.db'}", str(folder / "data")
    example_store(db, data)
    metrics_port = free_port()
    args = ("--workers", "2", "--metrics-port", str(metrics_port))
    with running_service(db, data, folder / "serve.log", args=args) as service:
        yield service, metrics_port, db, data


def query(prometheus: str, expression: str) -> list[dict]:  # type: ignore[type-arg]
    answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": expression}, timeout=5)
    answer.raise_for_status()
    return list(answer.json()["data"]["result"])


def value(prometheus: str, expression: str, deadline: float = 20.0) -> float | None:
    """The expression's single value once Prometheus has scraped it (None: never)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        result = query(prometheus, expression)
        if result:
            return float(result[0]["value"][1])
        time.sleep(0.3)
    return None


def test_prometheus_scrapes_requests_of_every_worker_and_the_store(served, tmp_path):
    service, metrics_port, db, data = served
    token = create_token(db, "finance", "metrics-reader")
    headers = {"Authorization": f"Bearer {token}"}

    def months(_: int) -> int:
        with httpx.Client(headers=headers) as client:  # a new connection each time
            return client.get(f"{service.url}/api/v1/months", timeout=10).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(months, range(MONTHS_CALLS))) == {200}
    for _ in range(MISSING_CALLS):
        assert httpx.get(f"{service.url}/no/such/client-a/page", timeout=5).status_code == 404
    assert httpx.get(f"{service.url}/metrics", timeout=5).status_code == 404  # its own port

    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    for name in ("client-a", "client-b", "client-c", "metrics-reader", "/no/such"):
        assert name not in text, name  # routes are templates; no client, token or path

    (tmp_path / "tsdb").mkdir()
    with serve_prometheus(tmp_path / "tsdb", tmp_path,
                          scrape=[f"127.0.0.1:{metrics_port}"]) as (prometheus, _):  # fmt: skip
        calls = value(prometheus, 'sum(tenantcost_http_requests_total{route="/api/v1/months",'
                                  'method="GET",status="200"})')  # fmt: skip
        assert calls == MONTHS_CALLS  # both workers' counts add up
        missing = value(prometheus, f'sum(tenantcost_http_requests_total{{route="{UNMATCHED}",'
                                    'status="404"})')  # fmt: skip
        assert missing == MISSING_CALLS + 1  # and /metrics on the service's port
        seconds = value(prometheus, 'sum(tenantcost_http_request_duration_seconds_count'
                                    '{route="/api/v1/months"})')  # fmt: skip
        assert seconds == MONTHS_CALLS
        assert value(prometheus, "tenantcost_store_up") == 1
        assert value(prometheus, f'tenantcost_month_state{{month="{MONTH}",state="closed"}}') == 1
        assert value(prometheus, f'tenantcost_month_revision{{month="{MONTH}"}}') == 1
        assert value(prometheus, 'tenantcost_month_events_total{action="close"}') == 1
        engine = open_engine(resolve_settings(db=db, environ={}))
        runs = read_activity(engine).runs["succeeded"]
        engine.dispose()
        assert runs >= 1 and value(prometheus, 'tenantcost_runs_total{status="succeeded"}') == runs
        last = value(prometheus, 'tenantcost_ingest_last_success_timestamp_seconds'
                                 '{kind="usage",source="file"}')  # fmt: skip
        assert last is not None and time.time() - 600 < last <= time.time()
        usage = 'tenantcost_ingest_batches_total{kind="usage",origin="file"}'
        assert value(prometheus, usage) == 1
        # a CronJob's ingest in another process shows at the next scrape: read from the store
        pushed = tmp_path / "usage.csv"
        row = "2026-12-01T10:00:00Z,2026-12-01T11:00:00Z,api,client-a,5,1.5"
        pushed.write_text(f"window_start,window_end,service,client,requests,cpu_seconds\n{row}\n")
        tenantcost("ingest", "usage", "--usage", str(pushed), "--db", db, "--data", data)
        assert value(prometheus, f"{usage} == 2") == 2


def test_the_metrics_port_is_checked_before_anything_starts(served):
    service, _metrics_port, db, data = served
    port = service.url.rsplit(":", 1)[1]
    same = invoke("serve", "--db", db, "--data", data, "--port", "8123", "--metrics-port", "8123")
    assert same.exit_code == 2 and "--metrics-port 8123 is --port too" in same.stderr
    taken = invoke("serve", "--db", db, "--data", data, "--port", str(free_port()),
                   "--metrics-port", port)  # fmt: skip
    assert taken.exit_code == 2 and port in taken.stderr, taken.output


def test_sources_become_bounded_labels(store_url: str, tmp_path: Path) -> None:
    """A file's batch is `file` (its name would be a label value per ingest); a live pull
    keeps its URL (one per cluster); the meter's and OTLP's pushes are named by how they
    came; on SQLite and PostgreSQL alike."""
    assert origin_of("OpenCost API http://opencost.opencost:9003") is Origin.OPENCOST
    assert source_label("OpenCost API http://east:9003") == "OpenCost API http://east:9003"
    assert source_label("prometheus http://prom:9090") == "prometheus http://prom:9090"
    assert source_label("POST /api/v1/usage (meter-token)") == "api"
    assert source_label("POST /v1/metrics (otel)") == "otlp"
    assert source_label("/data/usage-2026-11-03.csv") == "file"
    data = str(tmp_path / "data")
    example_store(store_url, data)
    engine = open_engine(resolve_settings(db=store_url, environ={}))
    try:
        activity = read_activity(engine)
    finally:
        engine.dispose()
    assert {(c.kind, c.origin, c.batches) for c in activity.ingests} == {
        ("costs", Origin.FILE, 1), ("usage", Origin.FILE, 1)
    }  # fmt: skip
    assert sum(c.rows for c in activity.ingests) > 0
    assert [(m.month, m.state, m.revision) for m in activity.months] == [(MONTH, "closed", 1)]
    assert activity.month_events == {"close": 1}
