"""``GET /metrics``: the service's Prometheus metrics, on their own port (``serve
--metrics-port``), for the cluster's Prometheus.

Why a port of its own, without authentication: a Prometheus scrapes with no token, and the
metrics carry no client's name or figure (routes are templates such as
``/clients/{client}``, never a path as requested), so they are kept off the port users and
the ingress reach. Off by default; the Helm chart turns it on.

Two kinds of figures, two sources:

* **What the serving processes see**, the requests per route, method and status and their
  latency, counted in each worker by :class:`RequestMetrics`. Several workers add up
  through prometheus_client's multiprocess mode: each process writes its values to files
  in one folder (``PROMETHEUS_MULTIPROC_DIR``, which must be set before prometheus_client
  is imported, so ``serve`` sets it before it starts uvicorn), and the exporter sums them.
* **What happens anywhere**: ingests per kind and origin, the last successful ingest per
  kind and source, runs, closes and reopens, alert deliveries, each month's state. The
  hourly pull, the watch and the close run as CronJobs, gone before any scrape, so these are
  read from the store at scrape time (:mod:`tenantcost.store.activity`), the same whichever
  process answers. A store that cannot be read gives ``tenantcost_store_up 0`` and the
  process metrics, not a failed scrape.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from tenantcost.store.activity import Activity, read_activity

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's own setting: where each process writes its values."""

UNMATCHED = "unmatched"
"""The route label of a request no route matched (a 404, a static file): never the path."""


def enabled() -> bool:
    """Whether this process counts requests (``serve --metrics-port`` set the folder)."""
    return bool(os.environ.get(MULTIPROC_ENV))


class RequestMetrics:
    """A pure ASGI middleware counting each HTTP request by route template, method and
    status, with its duration (``tenantcost_http_request_duration_seconds``)."""

    def __init__(self, app: ASGIApp) -> None:
        from prometheus_client import Counter, Histogram

        self.app = app
        self.requests = Counter(
            "tenantcost_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
        )
        self.duration = Histogram(
            "tenantcost_http_request_duration_seconds",
            "Time to answer an HTTP request, by route template and method.",
            ["route", "method"],
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # an exception before the response started
        started = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            method = str(scope.get("method", ""))
            self.requests.labels(route, method, str(status)).inc()
            self.duration.labels(route, method).observe(time.perf_counter() - started)


class StoreCollector:
    """The store's activity as metric families, read at each scrape."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def describe(self) -> list[Metric]:
        return []  # not read at registration: the store is read at scrape time only

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            activity = read_activity(self.engine)
        except SQLAlchemyError:
            yield GaugeMetricFamily("tenantcost_store_up", _STORE_UP, value=0)
            return
        yield GaugeMetricFamily("tenantcost_store_up", _STORE_UP, value=1)
        yield from _families(activity)


_STORE_UP = "1 when the store's database answered this scrape's queries, else 0."


def _families(activity: Activity) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    batches = CounterMetricFamily(
        "tenantcost_ingest_batches",
        "Committed ingest batches, by kind (costs, usage, billing) and origin "
        "(opencost, prometheus, otlp, api: the meter, file).",
        labels=["kind", "origin"],
    )
    rows = CounterMetricFamily(
        "tenantcost_ingest_rows",
        "Rows of committed ingest batches, by kind and origin.",
        labels=["kind", "origin"],
    )
    for count in activity.ingests:
        batches.add_metric([count.kind, str(count.origin)], count.batches)
        rows.add_metric([count.kind, str(count.origin)], count.rows)
    last = GaugeMetricFamily(
        "tenantcost_ingest_last_success_timestamp_seconds",
        "When the latest committed batch of a kind from a source was ingested (Unix time): "
        "a live source by its URL, others by origin. An old value is a failing job.",
        labels=["kind", "source"],
    )
    for item in activity.last_ingests:
        last.add_metric([item.kind, item.source], item.at.timestamp())
    runs = CounterMetricFamily("tenantcost_runs", "Runs recorded, by status.", labels=["status"])
    for status, n in sorted(activity.runs.items()):
        runs.add_metric([status], n)
    events = CounterMetricFamily(
        "tenantcost_month_events",
        "Month closes and reopens recorded, by action (close, reopen).",
        labels=["action"],
    )
    for action in ("close", "reopen"):
        events.add_metric([action], activity.month_events.get(action, 0))
    alerts = GaugeMetricFamily(
        "tenantcost_alert_deliveries",
        "Alert deliveries by channel and status: sent (final), failed (retried by the next "
        "watch --notify), sending.",
        labels=["channel", "status"],
    )
    for (channel, status), n in sorted(activity.alerts.items()):
        alerts.add_metric([channel, status], n)
    state = GaugeMetricFamily(
        "tenantcost_month_state",
        "1 for each month's current state (open, closed), for every month with a run.",
        labels=["month", "state"],
    )
    revision = GaugeMetricFamily(
        "tenantcost_month_revision", "A month's latest issued revision (0: never closed).",
        labels=["month"],
    )  # fmt: skip
    for month in activity.months:
        state.add_metric([month.month, month.state], 1)
        revision.add_metric([month.month], month.revision)
    yield from (batches, rows, last, runs, events, alerts, state, revision)


def start_exporter(host: str, port: int, engine: Engine) -> None:
    """Serve ``/metrics`` on ``host:port`` in a daemon thread of this process (uvicorn's
    supervisor with ``--workers``, the server itself without): every worker's request
    metrics from the multiprocess folder, and the store's activity."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    registry.register(StoreCollector(engine))
    start_http_server(port, addr=host, registry=registry)
