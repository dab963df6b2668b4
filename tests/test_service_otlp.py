"""``POST /v1/metrics`` against a real ``tenantcost serve`` on SQLite and PostgreSQL, fed by the
real OpenTelemetry Python SDK and its OTLP/HTTP exporter: protobuf and JSON,
delta and cumulative, gzip; the stored usage equals what the SDK recorded; a restart of the
server between two cumulative exports changes nothing; an export sent twice is added once; a
closed month is a partial success whose cumulative point still advances its series."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ResourceProto
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from sqlalchemy import select

from tenantcost.store.engine import open_engine
from tenantcost.store.models import Batch, BatchFile, UsageSample, table
from tenantcost.store.settings import resolve_settings

from .service_server import (
    EXAMPLE,
    Service,
    create_token,
    example_store,
    running_service,
    tenantcost,
)

SETTINGS = """\
otlp:
  client_attribute: tenant.id
  service_attribute: service.name
  metrics:
    requests: {name: http.server.request.duration, value: count}
    cpu_seconds: {name: app.cpu.time, value: sum}
    storage_bytes: {name: db.client.storage, value: level}
"""
GAUGE_RULES = "metrics:\n  storage_bytes: {kind: gauge, unit: byte, stale_after: 6h}\n"
DELTA = {Counter: AggregationTemporality.DELTA, Histogram: AggregationTemporality.DELTA}
_instances = itertools.count()


@dataclass
class Served:
    service: Service
    db: str
    data: Path
    tmp: Path
    token: str

    @property
    def endpoint(self) -> str:
        return f"{self.service.url}/v1/metrics"

    def post(self, body: bytes, kind: str = "application/x-protobuf", **headers: str) -> Any:
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": kind, **headers}
        return httpx.post(self.endpoint, content=body, headers=headers, timeout=60)

    def exporter(self, **kwargs: Any) -> OTLPMetricExporter:
        return OTLPMetricExporter(
            endpoint=self.endpoint,
            timeout=60,
            headers={"Authorization": f"Bearer {self.token}"},
            **kwargs,
        )

    def usage(self) -> pd.DataFrame:
        """Every usage row the OTLP batches stored (read from the store's files)."""
        engine = open_engine(resolve_settings(db=self.db, environ={}))
        try:
            with engine.connect() as conn:
                f, b = table(BatchFile).c, table(Batch).c
                paths = conn.execute(
                    select(f.path).join_from(table(BatchFile), table(Batch), b.id == f.batch_id)
                    .where(b.kind == "usage", b.status == "committed",
                           b.source.like("POST /v1/metrics%"))).scalars().all()  # fmt: skip
        finally:
            engine.dispose()
        frames = [pd.read_parquet(self.data / p) for p in paths]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def samples(self, prefix: str) -> list[tuple[str, int, str]]:
        """``(client, t_us, level)`` of the stored samples of clients starting with
        ``prefix`` (committed OTLP batches), in time order."""
        engine = open_engine(resolve_settings(db=self.db, environ={}))
        try:
            with engine.connect() as conn:
                s, b = table(UsageSample).c, table(Batch).c
                rows = conn.execute(
                    select(s.client, s.t_us, s.value, s.metric, s.service)
                    .join_from(table(UsageSample), table(Batch), b.id == s.batch_id)
                    .where(b.status == "committed", b.source.like("POST /v1/metrics%"),
                           s.client.like(f"{prefix}%"))
                    .order_by(s.t_us, s.client)).all()  # fmt: skip
        finally:
            engine.dispose()
        assert {(r.metric, r.service) for r in rows} <= {("storage_bytes", "api")}
        return [(str(r.client), int(r.t_us), str(r.value)) for r in rows]

    def totals(self, prefix: str) -> dict[str, tuple[float, float]]:
        """(requests, cpu_seconds) per client whose id starts with ``prefix``."""
        rows = self.usage()
        if rows.empty:
            return {}
        mine = rows[rows["client"].str.startswith(prefix)]
        summed = mine.groupby("client")[["requests", "cpu_seconds"]].sum()
        return {c: (float(r.requests), float(r.cpu_seconds)) for c, r in summed.iterrows()}

    def restart(self) -> Iterator[Served]:
        with running_service(
            self.db,
            str(self.data),
            self.tmp / "serve2.log",
            args=("--settings", str(self.tmp / "settings.yaml")),
        ) as service:
            yield Served(service, self.db, self.data, self.tmp, self.token)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"otlp-{request.param}")
    if request.param == "sqlite":
        db = f"sqlite:///{tmp / 'store.db'}"
    else:
        from .postgres_fixture import new_database

        db = new_database(request.getfixturevalue("postgres_admin_url"))
    data = tmp / "data"
    example_store(db, str(data))  # 2026-11 closed; rules know the service 'api'
    token = create_token(db, "ingest", "otel-collector")
    (tmp / "settings.yaml").write_text(SETTINGS)
    args = ("--settings", str(tmp / "settings.yaml"))
    with running_service(db, str(data), tmp / "serve.log", args=args) as service:
        yield Served(service, db, data, tmp, token)


def meter(temporality: dict[type, AggregationTemporality] | None = None) -> tuple[Any, Any]:
    """An SDK meter provider (service 'api', a new instance) read in memory, and its meter."""
    reader = InMemoryMetricReader(preferred_temporality=temporality or {})
    resource = Resource.create({"service.name": "api",
                                "service.instance.id": f"test-{next(_instances)}"})  # fmt: skip
    provider = MeterProvider(metric_readers=[reader], resource=resource)
    return reader, provider.get_meter("tests")


def burn(instruments: tuple[Any, Any], client: str, requests: int, cpu: float) -> None:
    """What an application records for ``requests`` requests of ``client``."""
    histogram, counter = instruments
    for _ in range(requests):
        histogram.record(0.01, {"tenant.id": client, "http.route": "/x"})
    counter.add(cpu, {"tenant.id": client})


def instruments(m: Any) -> tuple[Any, Any]:
    return m.create_histogram("http.server.request.duration"), m.create_counter("app.cpu.time")


def test_delta_exports_through_the_sdk_are_stored_exactly(served: Served) -> None:
    """The SDK's own periodic reader and exporter (gzip), delta temporality."""
    exporter = served.exporter(compression=Compression.Gzip, preferred_temporality=DELTA)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    resource = Resource.create({"service.name": "api"})
    provider = MeterProvider(metric_readers=[reader], resource=resource)
    tools = instruments(provider.get_meter("tests"))
    burn(tools, "delta-a", 3, 0.25)
    burn(tools, "delta-b", 1, 1.5)
    assert reader.force_flush()
    burn(tools, "delta-a", 2, 0.125)
    assert reader.force_flush()
    provider.shutdown()
    assert served.totals("delta-") == {"delta-a": (5.0, 0.375), "delta-b": (1.0, 1.5)}


def test_cumulative_exports_survive_a_server_restart_and_a_repeat(served: Served) -> None:
    reader, m = meter()  # the SDK's default: cumulative
    tools = instruments(m)
    burn(tools, "cumul-a", 4, 0.5)
    first = reader.get_metrics_data()
    assert served.exporter().export(first) is MetricExportResult.SUCCESS
    assert served.exporter().export(first) is MetricExportResult.SUCCESS  # a retry
    assert served.totals("cumul-") == {"cumul-a": (4.0, 0.5)}
    burn(tools, "cumul-a", 2, 0.25)
    burn(tools, "cumul-b", 1, 2.0)
    second = reader.get_metrics_data()
    for again in served.restart():  # the series' last points are in the store, not the process
        assert again.exporter().export(second) is MetricExportResult.SUCCESS
        answer = again.post(encode_metrics(second).SerializeToString())
    assert answer.status_code == 200
    response = ExportMetricsServiceResponse.FromString(answer.content)
    assert response.partial_success.rejected_data_points == 0
    assert "received already: not added again" in response.partial_success.error_message
    assert served.totals("cumul-") == {"cumul-a": (6.0, 0.75), "cumul-b": (1.0, 2.0)}


def test_a_json_body_is_stored_and_answered_in_json(served: Served) -> None:
    reader, m = meter(DELTA)
    tools = instruments(m)
    burn(tools, "json-a", 2, 0.75)
    text = json_format.MessageToJson(encode_metrics(reader.get_metrics_data()))
    answer = served.post(text.encode(), "application/json")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == {}  # a full success: no partial_success
    assert served.totals("json-") == {"json-a": (2.0, 0.75)}


def _cumulative(points: list[tuple[int, int, int]], client: str) -> bytes:
    """A hand-made export: one cumulative counter series of ``app.cpu.time``, a gauge, and a
    metric the settings do not map (start and time in ns, value as an int)."""
    tag = [KeyValue(key="tenant.id", value=AnyValue(string_value=client))]
    data = [pb.NumberDataPoint(start_time_unix_nano=s, time_unix_nano=t, as_int=v, attributes=tag)
            for s, t, v in points]  # fmt: skip
    metrics = [
        pb.Metric(name="app.cpu.time", sum=pb.Sum(data_points=data, is_monotonic=True,
                                                  aggregation_temporality=2)),
        pb.Metric(name="app.cpu.time", gauge=pb.Gauge(data_points=data[:1])),
        pb.Metric(name="app.unknown", sum=pb.Sum(data_points=data[:1], is_monotonic=True,
                                                 aggregation_temporality=1)),
    ]  # fmt: skip
    resource = ResourceProto(attributes=[KeyValue(key="service.name",
                                                  value=AnyValue(string_value="api"))])  # fmt: skip
    return ExportMetricsServiceRequest(resource_metrics=[pb.ResourceMetrics(
        resource=resource, scope_metrics=[pb.ScopeMetrics(metrics=metrics)])]
    ).SerializeToString()  # fmt: skip


def test_a_closed_month_is_a_partial_success_and_still_advances_the_series(
    served: Served,
) -> None:
    start = int(pd.Timestamp("2026-11-30T20:00:00Z").value)
    in_november = int(pd.Timestamp("2026-11-30T23:59:00Z").value)  # 2026-11 is closed
    in_december = int(pd.Timestamp("2026-12-01T00:01:00Z").value)
    first = served.post(_cumulative([(start, in_november, 10)], "closed-a"))
    assert first.status_code == 200, first.content
    partial = ExportMetricsServiceResponse.FromString(first.content).partial_success
    assert partial.rejected_data_points == 3  # the closed month's point, the gauge, the unknown
    assert "2026-11, closed" in partial.error_message and "reopen" in partial.error_message
    assert "metric 'app.cpu.time' is a gauge" in partial.error_message
    assert "metric 'app.unknown' is not mapped" in partial.error_message
    second = served.post(_cumulative([(start, in_december, 13)], "closed-a"))
    assert ExportMetricsServiceResponse.FromString(second.content).partial_success \
        .rejected_data_points == 2  # fmt: skip
    assert served.totals("closed-") == {"closed-a": (0.0, 3.0)}  # not November's 10


def test_refusals_follow_the_otlp_specification(served: Served) -> None:
    garbage = served.post(b"\xff\x00 not protobuf")
    assert garbage.status_code == 400
    assert "not an OTLP ExportMetricsServiceRequest" in Status.FromString(garbage.content).message
    lone = served.post(b'{"\\ud800": null}', "application/json")  # half a UTF-16 pair
    assert lone.status_code == 400 and "unpaired UTF-16 surrogate" in lone.json()["message"]
    assert served.post(b"{}", "text/plain").status_code == 415
    bomb = gzip.compress(b"\x00" * (33 * 1024 * 1024))
    assert served.post(bomb, **{"Content-Encoding": "gzip"}).status_code == 413
    anonymous = httpx.post(served.endpoint, content=b"",
                           headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
    assert anonymous.status_code == 401 and Status.FromString(anonymous.content).code == 16
    manager = create_token(served.db, "account-manager", f"am-{served.tmp.name}", "client-a")
    refused = httpx.post(
        served.endpoint,
        content=b"",
        headers={"Authorization": f"Bearer {manager}", "Content-Type": "application/x-protobuf"},
    )
    assert refused.status_code == 403 and Status.FromString(refused.content).code == 7
    empty = served.post(b"")  # an empty export is a valid request: nothing to store
    assert empty.status_code == 200 and empty.content == b""


def test_the_same_export_posted_concurrently_is_added_once(served: Served) -> None:
    """Four posts of one export at once (an exporter's retries racing its first attempt):
    the write lock serialises their batches and each checks the series it advances, so the
    usage is added once."""
    from concurrent.futures import ThreadPoolExecutor

    reader, m = meter()
    burn(instruments(m), "race-a", 5, 1.25)
    body = encode_metrics(reader.get_metrics_data()).SerializeToString()
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: served.post(body), range(4)))
    assert [a.status_code for a in answers] == [200] * 4
    assert served.totals("race-") == {"race-a": (5.0, 1.25)}


def _empty_points(count: int) -> bytes:
    """An export of ``count`` empty data points in one sum (2 bytes of protobuf each)."""
    from google.protobuf.internal.encoder import _VarintBytes

    def field(tag: int, body: bytes) -> bytes:
        return bytes([tag]) + _VarintBytes(len(body)) + body

    points = b"\x0a\x00" * count  # Sum.data_points, empty
    return field(0x0A, field(0x12, field(0x12, field(0x3A, points))))


def test_hostile_exports_are_refused_or_counted_never_lost(served: Served) -> None:
    """Over --max-records (protobuf and JSON): 413 before decoding. Two gzip members: both
    stored. A point near 2^63 ns, or in 2036: refused in partial_success, no 500, no batch
    for 2036, and the 2036 point does not silence its series (issue 34, section 1)."""
    over = served.post(_empty_points(100_001))  # the default --max-records is 100,000
    assert over.status_code == 413
    assert "more than 100000 data points" in Status.FromString(over.content).message
    text = '{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"sum":{"dataPoints":[%s]}}]}]}]}'
    as_json = served.post((text % ",".join(["{}"] * 100_001)).encode(), "application/json")
    assert as_json.status_code == 413 and "more than" in as_json.json()["message"]

    now = int(pd.Timestamp.now(tz="UTC").floor("min").value)
    start = now - 3_600 * 10**9
    members = gzip.compress(_cumulative([(start, now - 120 * 10**9, 3)], "gz-a")) + gzip.compress(
        _cumulative([(start, now - 120 * 10**9, 5)], "gz-b"))  # fmt: skip
    both = served.post(members, **{"Content-Encoding": "gzip"})
    assert both.status_code == 200, both.content
    assert served.totals("gz-") == {"gz-a": (0.0, 3.0), "gz-b": (0.0, 5.0)}

    far = served.post(_cumulative([(start, 2**63 - 1, 1)], "far-a"))
    partial = ExportMetricsServiceResponse.FromString(far.content).partial_success
    assert far.status_code == 200 and partial.rejected_data_points == 3  # with gauge, unknown
    assert "outside 2000-01-01 .. 2100-01-01" in partial.error_message

    in_2036 = int(pd.Timestamp("2036-01-15T00:00:00Z").value)
    series = [(now - 300 * 10**9, 10), (in_2036, 12), (now - 240 * 10**9, 20),
              (now - 180 * 10**9, 30)]  # fmt: skip
    answers = [served.post(_cumulative([(start, t, v)], "future-a")) for t, v in series]
    message = ExportMetricsServiceResponse.FromString(answers[1].content) \
        .partial_success.error_message  # fmt: skip
    assert "more than 3600 s after the server received" in message
    for again in served.restart():
        again.post(_cumulative([(start, now - 60 * 10**9, 40)], "future-a"))
    # the first point of a new series adds its whole value (10), then 20, 30 and 40 add 10
    # each; 2036's 12 is refused and is no baseline. 40 is the counter's last value, which a
    # cumulative series' stored total equals (the issue's "47" is not reachable from 10..40)
    assert served.totals("future-") == {"future-a": (0.0, 40.0)}
    batches = served.usage()
    assert (batches["window_start"] < pd.Timestamp("2030-01-01", tz="UTC")).all()


def _gauge(points: list[tuple[int, int]], client: str) -> bytes:
    """A hand-made export: a Gauge ``db.client.storage`` of ``(time ns, level)`` points."""
    tag = [KeyValue(key="tenant.id", value=AnyValue(string_value=client))]
    data = [pb.NumberDataPoint(time_unix_nano=t, as_int=v, attributes=tag) for t, v in points]
    resource = ResourceProto(attributes=[KeyValue(key="service.name",
                                                  value=AnyValue(string_value="api"))])  # fmt: skip
    metric = pb.Metric(name="db.client.storage", gauge=pb.Gauge(data_points=data))
    return ExportMetricsServiceRequest(resource_metrics=[pb.ResourceMetrics(
        resource=resource, scope_metrics=[pb.ScopeMetrics(metrics=[metric])])]
    ).SerializeToString()  # fmt: skip


def test_an_observable_gauge_through_the_sdk_is_stored_as_samples(served: Served) -> None:
    """The SDK's observable gauge, exported by its periodic reader: each export's levels are
    samples of the column the store declares a gauge (exact, at the export's microsecond),
    and `status --usage` integrates them; a level column the store does not declare a gauge,
    and a Gauge of a counter column, are refused; a closed month refuses its levels only."""
    from opentelemetry.metrics import CallbackOptions, Observation

    store = ("--db", served.db, "--data", str(served.data))
    early = served.post(_gauge([(int(pd.Timestamp("2026-12-02T00:00Z").value), 5)], "early"))
    partial = ExportMetricsServiceResponse.FromString(early.content).partial_success
    assert partial.rejected_data_points == 1  # the store declares no gauge yet
    assert "the store does not declare it a gauge" in partial.error_message
    rules = served.tmp / "rules-gauge.yaml"
    rules.write_text((EXAMPLE / "rules.yaml").read_text() + GAUGE_RULES)
    tenantcost("rules", "load", str(rules), *store)

    levels: dict[str, int | float] = {"gauge-a": 1_073_741_824, "gauge-b": 0.1}

    def observe(_: CallbackOptions) -> list[Observation]:
        return [Observation(v, {"tenant.id": c}) for c, v in levels.items()]

    reader = PeriodicExportingMetricReader(served.exporter(), export_interval_millis=3_600_000)
    provider = MeterProvider(metric_readers=[reader],
                             resource=Resource.create({"service.name": "api"}))  # fmt: skip
    provider.get_meter("tests").create_observable_gauge(
        "db.client.storage", callbacks=[observe], unit="By"
    )
    before = pd.Timestamp.now(tz="UTC").value // 1000
    assert reader.force_flush()
    levels["gauge-a"] = 2_147_483_648
    assert reader.force_flush()
    provider.shutdown()  # exports once more
    after = pd.Timestamp.now(tz="UTC").value // 1000
    stored = served.samples("gauge-")
    a = [(t, v) for c, t, v in stored if c == "gauge-a"]
    assert [v for _, v in a] == ["1073741824"] + ["2147483648"] * (len(a) - 1) and len(a) >= 2
    assert [v for c, _, v in stored if c == "gauge-b"] == ["0.1"] * len(a)
    assert all(before <= t <= after for _, t, _ in stored)
    # each level held until the next sample, the last one for stale_after (6 h): byte-hours
    held_us = [later - t for (t, _), (later, _) in itertools.pairwise(a)] + [6 * 3_600_000_000]
    measure = sum(int(v) * us for (_, v), us in zip(a, held_us, strict=True)) / 3_600_000_000
    reach = [a[0][0], a[-1][0] + 6 * 3_600_000_000 - 1]
    months = sorted({str(pd.Timestamp(t * 1000, tz="UTC").strftime("%Y-%m")) for t in reach})
    held = 0.0
    for month in months:  # the month of the samples (and the next, where the 6 h reach it)
        shown = json.loads(tenantcost("status", "--usage", "--month", month, "--format", "json",
                                      *store))  # fmt: skip
        held += sum(float(u["storage_bytes"]) for m in shown["months"] for u in m["usage"]
                    if u["client"] == "gauge-a")  # fmt: skip
    assert held == pytest.approx(measure, abs=1e-5)

    other = MeterProvider(metric_readers=[memory := InMemoryMetricReader()],
                          resource=Resource.create({"service.name": "api"}))  # fmt: skip
    other.get_meter("tests").create_observable_gauge(
        "app.cpu.time", callbacks=[lambda _: [Observation(3, {"tenant.id": "gauge-c"})]]
    )
    answer = served.post(encode_metrics(memory.get_metrics_data()).SerializeToString())
    partial = ExportMetricsServiceResponse.FromString(answer.content).partial_success
    assert answer.status_code == 200 and partial.rejected_data_points == 1
    assert "metric 'app.cpu.time' is a gauge: only monotonic sums" in partial.error_message
    other.shutdown()

    november = int(pd.Timestamp("2026-11-30T23:00:00Z").value)  # 2026-11 is closed
    december = int(pd.Timestamp("2026-12-01T00:30:00Z").value)
    split = served.post(_gauge([(november, 4), (december, 6)], "gauge-d"))
    partial = ExportMetricsServiceResponse.FromString(split.content).partial_success
    assert partial.rejected_data_points == 1 and "2026-11, closed" in partial.error_message
    assert served.samples("gauge-d") == [("gauge-d", december // 1000, "6")]
