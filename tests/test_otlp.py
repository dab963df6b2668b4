"""The OTLP decoding core (tenantcost.otlp), without a store: points from a request, and the
increments of delta and cumulative series against their kept last points."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

from tenantcost.config.otlp import OtlpSettings
from tenantcost.errors import InputError
from tenantcost.otlp import STATE_COLUMNS, Encoding, plan, points
from tenantcost.store.settings import resolve_settings

SETTINGS = OtlpSettings.model_validate({"metrics": {
    "requests": {"name": "http.server.request.duration", "value": "count"},
    "cpu_seconds": {"name": "app.cpu.time", "value": "sum"},
}})  # fmt: skip
COLUMNS = ["requests", "cpu_seconds"]
T0 = 1_796_000_000 * 10**9  # 2026-11-30T...; hours below are relative to it
HOUR = 3_600 * 10**9


def attrs(**values: Any) -> list[KeyValue]:
    return [KeyValue(key=k.replace("_", "."), value=AnyValue(string_value=v))
            for k, v in values.items()]  # fmt: skip


def counter(
    series: list[tuple[int, int, float]], temporality: int, client: str | None = "client-a"
) -> ExportMetricsServiceRequest:
    """One resource (service api), one cumulative or delta counter ``app.cpu.time``."""
    point_attrs = attrs(tenant_id=client) if client is not None else []
    data = [pb.NumberDataPoint(start_time_unix_nano=s, time_unix_nano=t, as_double=v,
                               attributes=point_attrs) for s, t, v in series]  # fmt: skip
    metric = pb.Metric(name="app.cpu.time", sum=pb.Sum(
        data_points=data, aggregation_temporality=temporality, is_monotonic=True))  # fmt: skip
    return wrap(metric)


def wrap(*metrics: pb.Metric, service: str | None = "api") -> ExportMetricsServiceRequest:
    resource = {"attributes": attrs(service_name=service)} if service else {}
    return ExportMetricsServiceRequest(resource_metrics=[pb.ResourceMetrics(
        resource=Resource(**resource),
        scope_metrics=[pb.ScopeMetrics(metrics=list(metrics))])])  # fmt: skip


def no_state() -> pd.DataFrame:
    return pd.DataFrame(columns=STATE_COLUMNS).set_index("key")


def run(request: ExportMetricsServiceRequest, state: pd.DataFrame) -> tuple[Any, pd.DataFrame]:
    """The plan of ``request`` and the kept state afterwards."""
    found = points(request, SETTINGS)
    planned = plan(found.rows, state, COLUMNS)
    moved = [p.state.set_index("key") for p in planned.parts]
    after = pd.concat([state[~state.index.isin(pd.concat(moved).index)], *moved]) if moved \
        else state  # fmt: skip
    return planned, after


def total(planned: Any, column: str = "cpu_seconds") -> float:
    return float(sum(p.usage[column].sum() for p in planned.parts))


def test_cumulative_increments_reset_and_duplicates() -> None:
    first, state = run(counter([(T0, T0 + 60 * 10**9, 2.0), (T0, T0 + 120 * 10**9, 5.0)], 2),
                       no_state())  # fmt: skip
    assert total(first) == 5.0 and first.received == 0
    again, state = run(counter([(T0, T0 + 120 * 10**9, 5.0)], 2), state)
    assert total(again) == 0.0 and again.received == 1 and again.parts == []
    later, state = run(counter([(T0, T0 + 180 * 10**9, 5.5)], 2), state)
    assert total(later) == 0.5
    restarted, state = run(counter([(T0 + 200 * 10**9, T0 + 240 * 10**9, 0.75)], 2), state)
    assert total(restarted) == 0.75  # a new start is a reset: its whole value
    lower, state = run(counter([(T0 + 200 * 10**9, T0 + 300 * 10**9, 0.5)], 2), state)
    assert total(lower) == 0.0 and len(lower.refused) == 1
    assert "negative increment" in lower.refused["reason"].iloc[0]
    after, _ = run(counter([(T0 + 200 * 10**9, T0 + 360 * 10**9, 1.5)], 2), state)
    assert total(after) == 0.75  # from 0.75, the last point accepted: a refused one is no baseline
    within, _ = run(counter([(T0 + 200 * 10**9, T0 + t * 10**9, v) for t, v in
                             ((400, 0.5), (420, 2.0), (440, 1.0), (460, 2.5))], 2), state)
    assert total(within) == 1.25 + 0.5 and len(within.refused) == 2  # in one request too


def test_delta_points_add_and_a_retry_does_not() -> None:
    series = [(T0, T0 + 60 * 10**9, 1.25), (T0 + 60 * 10**9, T0 + 120 * 10**9, 2.5)]
    first, state = run(counter(series, 1), no_state())
    assert total(first) == 3.75
    retry, state = run(counter(series, 1), state)
    assert total(retry) == 0.0 and retry.received == 2
    negative, _ = run(counter([(T0 + 120 * 10**9, T0 + 180 * 10**9, -1.0)], 1), state)
    assert total(negative) == 0.0 and len(negative.refused) == 1


def test_each_increment_goes_to_its_points_hour_and_month() -> None:
    end_of_november = 1_796_083_200 * 10**9 - 30 * 10**9  # 2026-11-30T23:59:30Z
    request = counter([(T0, end_of_november, 1.0), (T0, end_of_november + 60 * 10**9, 3.0)], 2)
    planned, _ = run(request, no_state())
    assert [p.month for p in planned.parts] == ["2026-11", "2026-12"]
    november, december = (p.usage for p in planned.parts)
    assert november["window_start"].iloc[0] == pd.Timestamp("2026-11-30T23:00:00Z")
    assert december["window_start"].iloc[0] == pd.Timestamp("2026-12-01T00:00:00Z")
    assert november["cpu_seconds"].iloc[0] == 1.0 and december["cpu_seconds"].iloc[0] == 2.0
    assert list(december.columns) == ["window_start", "window_end", "service", "client",
                                      *COLUMNS]  # fmt: skip
    assert december["requests"].iloc[0] == 0.0  # the column no metric gave: 0


def test_unusable_points_are_refused_with_their_reason() -> None:
    gauge = pb.Metric(name="app.cpu.time", gauge=pb.Gauge(data_points=[
        pb.NumberDataPoint(time_unix_nano=T0, as_double=1.0)]))  # fmt: skip
    unknown = pb.Metric(name="db.calls", sum=pb.Sum(aggregation_temporality=1, is_monotonic=True,
        data_points=[pb.NumberDataPoint(time_unix_nano=T0, as_int=3)] * 2))  # fmt: skip
    updown = pb.Metric(name="app.cpu.time", sum=pb.Sum(aggregation_temporality=1,
        data_points=[pb.NumberDataPoint(time_unix_nano=T0, as_int=3)]))  # fmt: skip
    found = points(wrap(gauge, unknown, updown), SETTINGS)
    assert found.count == 4 and found.rows.empty
    reasons = found.refused.groupby("reason")["point"].nunique().to_dict()
    assert reasons == {
        "metric 'app.cpu.time' is a gauge: only monotonic sums (counters) and histograms are "
        "usage": 1,
        "metric 'db.calls' is not mapped to a usage column (settings file: otlp.metrics)": 2,
        "metric 'app.cpu.time' is a non-monotonic sum (an up-down counter): not usage": 1,
    }
    nameless = points(wrap(unknown, service=None), SETTINGS.model_copy(update={"metrics": {
        "calls": SETTINGS.metrics["requests"].model_copy(update={"name": "db.calls",
                                                                  "value": "sum"})}}))  # fmt: skip
    assert "no 'service.name' attribute" in nameless.refused["reason"].iloc[0]
    hostile = points(wrap(counter([(T0, T0 + 1, 1.0)], 1).resource_metrics[0].scope_metrics[0]
                          .metrics[0], service="api\x00"), SETTINGS)  # fmt: skip
    assert "is no usable service name: it holds" in hostile.refused["reason"].iloc[0]


def test_clients_missing_or_refused_are_usage_without_a_client() -> None:
    request = counter([(T0, T0 + 10**9, 1.0)], 1, client=None)
    hostile = counter([(T0, T0 + 10**9, 2.0)], 1, client="bad\nid")
    request.resource_metrics.extend(hostile.resource_metrics)
    found = points(request, SETTINGS)
    assert found.rows["client"].tolist() == ["", ""] and found.refused.empty
    assert len(found.notes) == 2 and "without a 'tenant.id' attribute: 1" in found.notes[0]
    assert "refuses as a client id" in found.notes[1] and "bad\nid" not in found.notes[1]


def test_a_histogram_gives_its_count_and_sum_to_two_columns() -> None:
    both = OtlpSettings.model_validate({"metrics": {
        "requests": {"name": "http", "value": "count"},
        "cpu_seconds": {"name": "http", "value": "sum"}}})  # fmt: skip
    histogram = pb.Metric(
        name="http",
        histogram=pb.Histogram(
            aggregation_temporality=1,
            data_points=[
                pb.HistogramDataPoint(
                    start_time_unix_nano=T0,
                    time_unix_nano=T0 + HOUR,
                    count=7,
                    sum=0.5,
                    attributes=attrs(tenant_id="c"),
                )
            ],
        ),
    )
    found = points(wrap(histogram), both)
    planned = plan(found.rows, no_state(), COLUMNS)
    usage = planned.parts[0].usage
    assert usage[COLUMNS].to_numpy().tolist() == [[7.0, 0.5]]


def test_json_bodies_parse_like_protobuf() -> None:
    from google.protobuf import json_format

    from tenantcost.otlp import parse

    request = counter([(T0, T0 + 10**9, 1.5)], 2)
    text = json_format.MessageToJson(request).encode()
    assert parse(text, Encoding.JSON) == parse(request.SerializeToString(), Encoding.PROTOBUF)


@settings(max_examples=20, deadline=None)
@given(
    steps=st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=12),
    retries=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_a_cumulative_series_adds_its_last_value_however_it_is_exported(
    steps: list[int], cuts: list[int], retries: list[bool]
) -> None:
    """Whatever the grouping of points into exports, and however many exports are sent
    twice, the stored increments of a series that never resets sum to its last value."""
    values = np.cumsum(steps).astype(float) / 4  # exact binary fractions
    series = [(T0, T0 + (i + 1) * 10**9, float(v)) for i, v in enumerate(values)]
    state, added, start = no_state(), 0.0, 0
    for number, cut in enumerate(cuts * len(series)):
        if start >= len(series):
            break
        export = counter(series[start : start + cut], 2)
        for _ in range(2 if retries[number % len(retries)] else 1):
            planned, state = run(export, state)
            added += total(planned)
        start += cut
    assert added == values[-1]


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"metrics": {"requests": {"name": "x", "value": "counts"}}},
         "otlp.metrics.requests.value: Input should be 'count' or 'sum'"),
        ({"metrics": {"requests": {"name": "x"}}}, "otlp.metrics.requests.value: Field required"),
        ({"metrics": {"client": {"name": "x", "value": "sum"}}},
         "otlp.metrics: Value error, 'client' cannot be a usage column"),
        ({"client_atribute": "tenant"}, "otlp.client_atribute: unknown key"),
        ({"metrics": {"a": {"name": "x", "value": "sum"}, "b": {"name": "x", "value": "sum"}}},
         "columns 'a' and 'b' both take the sum of 'x'"),
    ],
)  # fmt: skip
def test_the_settings_section_is_checked_naming_the_key(
    tmp_path: Path, section: dict[str, Any], expected: str
) -> None:
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump({"otlp": section}))
    with pytest.raises(InputError) as refused:
        resolve_settings(settings=path, environ={})
    assert expected in refused.value.one_line()
    assert refused.value.one_line().startswith(f"{path}, otlp")


def test_the_example_settings_file_maps_the_issues_metrics() -> None:
    example = Path(__file__).resolve().parents[1] / "config" / "settings.example.yaml"
    otlp = resolve_settings(settings=example, environ={}).otlp
    assert otlp.client_attribute == "tenant.id" and otlp.service_attribute == "service.name"
    assert otlp.columns_of("http.server.request.duration") == [("requests", "count")]
    assert otlp.columns_of("app.cpu.time") == [("cpu_seconds", "sum")]
