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
    within, _ = run(
        counter(
            [
                (T0 + 200 * 10**9, T0 + t * 10**9, v)
                for t, v in ((400, 0.5), (420, 2.0), (440, 1.0), (460, 2.5))
            ],
            2,
        ),
        state,
    )
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
        "usage, and a gauge's points only as the levels of a column mapped with value: level": 1,
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
         "otlp.metrics.requests.value: Input should be 'count', 'sum' or 'level'"),
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


LEVELS = OtlpSettings.model_validate({"metrics": {
    **{c: m.model_dump() for c, m in SETTINGS.metrics.items()},
    "storage_bytes": {"name": "db.client.storage", "value": "level"},
}})  # fmt: skip
GAUGES = frozenset({"storage_bytes"})


def gauge(*values: dict[str, Any], name: str = "db.client.storage") -> pb.Metric:
    """A Gauge metric: each point a dict of NumberDataPoint fields (``client`` the tenant)."""
    data = []
    for fields in values:
        client = fields.pop("client", "client-a")
        data.append(pb.NumberDataPoint(attributes=attrs(tenant_id=client) if client else [],
                                       **{"time_unix_nano": T0, **fields}))  # fmt: skip
    return pb.Metric(name=name, gauge=pb.Gauge(data_points=data))


def test_gauge_points_are_samples_exactly() -> None:
    """as_int exactly, as_double through its shortest repr (as a plain decimal), the time
    truncated to the microsecond; a point without a client is a level without one."""
    found = points(wrap(gauge(
        {"as_int": 10**15 - 1},
        {"as_double": 0.1, "client": "client-b"},
        {"as_double": 1e-05, "client": "client-c", "time_unix_nano": T0 + 1_999},
        {"as_double": 1e15, "client": "client-d"},
        {"as_int": 0, "client": "client-e"},
        {"as_double": -0.0, "client": "client-f"},
        {"as_double": 12.5, "client": None},
        {"as_double": 1.000000001, "client": "client-g"},
    )), LEVELS, gauges=GAUGES)  # fmt: skip
    assert found.refused.empty and found.rows.empty and found.count == 8
    samples = found.samples
    assert samples.columns.tolist() == ["point", "metric", "service", "client", "t_us", "value"]
    assert samples["value"].tolist() == ["999999999999999", "0.1", "0.00001",
                                         "1000000000000000.0", "0", "0", "12.5",
                                         "1.000000001"]  # fmt: skip
    assert samples["client"].tolist() == ["client-a", "client-b", "client-c", "client-d",
                                          "client-e", "client-f", "", "client-g"]  # fmt: skip
    assert samples["t_us"].tolist()[:3] == [T0 // 1000, T0 // 1000, T0 // 1000 + 1]
    assert set(samples["metric"]) == {"storage_bytes"} and set(samples["service"]) == {"api"}
    assert "without a 'tenant.id' attribute: 1" in found.notes[0]


def test_gauge_points_that_cannot_be_levels_are_refused_with_their_reason() -> None:
    nan, inf = float("nan"), float("inf")
    found = points(wrap(gauge(
        {"as_int": -1, "client": "a"},
        {"as_double": -0.5, "client": "b"},
        {"as_double": nan, "client": "c"},
        {"as_double": inf, "client": "d"},
        {"as_double": 1e-10, "client": "e"},
        {"as_int": 10**15 + 1, "client": "f"},
        {"as_double": 2e15, "client": "g"},
        {"client": "h"},  # no value at all
        {"as_int": 1, "flags": 1, "client": "i"},
        {"as_int": 1, "time_unix_nano": 0, "client": "j"},
        {"as_int": 1, "time_unix_nano": 2**63 + 5, "client": "k"},
        {"as_int": 1, "time_unix_nano": T0 + 2 * HOUR, "client": "l"},  # ahead of received
        {"as_int": 5, "client": "m"},
        {"as_int": 6, "client": "m", "time_unix_nano": T0 + 999},  # the same microsecond
        {"as_int": 7, "client": "n"},
    )), LEVELS, gauges=GAUGES, received=T0)  # fmt: skip
    assert found.samples["client"].tolist() == ["n"]
    reasons = found.refused.groupby("reason")["point"].apply(list).to_dict()
    assert reasons == {
        "a negative level (a gauge's level is at least 0)": [0, 1],
        "the point's value is missing or not finite": [2, 3, 7],
        "a level with more than 9 decimal places (its shortest repr)": [4],
        "a level over 1e+15 (the largest level held exactly)": [5, 6],
        "the point has no recorded value": [8],
        "the point has no time_unix_nano": [9],
        "time_unix_nano is outside 2000-01-01 .. 2100-01-01 (the range the store accepts)": [10],
        "time_unix_nano is more than 3600 s after the server received the export (a clock "
        "ahead, or a corrupt time)": [11],
        "another point of this export gives the same gauge column, service, client and time "
        "(to the microsecond): which level holds? (a client's level must be one series: drop "
        "the attributes that split it)": [12, 13],
    }


def test_a_gauge_feeds_only_a_level_column_the_store_declares_a_gauge() -> None:
    """A Gauge for a counter column is refused as before; a level column the store does not
    declare a gauge refuses its points; a counter column the store declares a gauge refuses
    a counter's; a sum mapped to a level column is refused."""
    cpu_gauge = gauge({"as_int": 3}, name="app.cpu.time")
    cpu = counter([(T0, T0 + 10**9, 1.0)], 1).resource_metrics[0].scope_metrics[0].metrics[0]
    storage = gauge({"as_int": 3})
    found = points(wrap(cpu_gauge, storage), LEVELS, gauges=GAUGES)
    assert found.samples["point"].tolist() == [1] and found.rows.empty
    assert "metric 'app.cpu.time' is a gauge: only monotonic sums" in found.refused["reason"][0]
    undeclared = points(wrap(storage), LEVELS, gauges=frozenset())
    assert undeclared.samples.empty
    assert "column 'storage_bytes' takes a gauge's level, but the store does not declare it " \
        "a gauge" in undeclared.refused["reason"][0]  # fmt: skip
    declared = points(wrap(cpu), LEVELS, gauges=GAUGES | {"cpu_seconds"})
    assert declared.rows.empty
    assert "column 'cpu_seconds' is a gauge in the store" in declared.refused["reason"][0]
    as_sum = LEVELS.model_copy(update={"metrics": {
        "storage_bytes": LEVELS.metrics["storage_bytes"].model_copy(update={"name": "app.cpu.time"})
    }})  # fmt: skip
    summed = points(wrap(cpu), as_sum, gauges=GAUGES)
    assert summed.samples.empty and "is a sum: column 'storage_bytes' takes a gauge's level" \
        in summed.refused["reason"][0]  # fmt: skip


def test_json_gauges_read_like_protobuf() -> None:
    from google.protobuf import json_format

    from tenantcost.otlp_count import decode

    request = wrap(gauge({"as_int": 10**15}, {"as_double": 0.3, "client": "client-b"}))
    body = json_format.MessageToJson(request).encode()
    wire = points(decode(request.SerializeToString(), Encoding.PROTOBUF, 100), LEVELS,
                  gauges=GAUGES)  # fmt: skip
    loaded = points(decode(body, Encoding.JSON, 100), LEVELS, gauges=GAUGES)
    assert wire.samples.equals(loaded.samples)
    assert loaded.samples["value"].tolist() == [str(10**15), "0.3"]


WIRE = OtlpSettings.model_validate({"metrics": {
    "requests": {"name": "http", "value": "count"},
    "cpu_seconds": {"name": "http", "value": "sum"},
    "calls": {"name": "calls", "value": "sum"},
    "bytes_exp": {"name": "exp", "value": "sum"},
    "storage_bytes": {"name": "db.client.storage", "value": "level"},
}})  # fmt: skip

_values = st.one_of(
    st.text(max_size=6).map(lambda v: AnyValue(string_value=v)),
    st.integers(-5, 5).map(lambda v: AnyValue(int_value=v)),
    st.booleans().map(lambda v: AnyValue(bool_value=v)),
    st.floats(allow_nan=False).map(lambda v: AnyValue(double_value=v)),
    st.just(AnyValue()),
    st.lists(st.sampled_from(["a", "b"]), max_size=2).map(
        lambda v: AnyValue(array_value={"values": [AnyValue(string_value=x) for x in v]})),
)  # fmt: skip
_attribute = st.one_of(
    st.sampled_from(["c1", "c2", "", "bad\n", "ü"]).map(
        lambda v: KeyValue(key="tenant.id", value=AnyValue(string_value=v))),
    st.builds(KeyValue, key=st.sampled_from(["tenant.id", "route", "x"]), value=_values),
    st.just(KeyValue(key="tenant.id")),  # no value at all
)  # fmt: skip
_times = st.one_of(st.just(0), st.integers(T0 - HOUR, T0 + HOUR), st.just(2**63 + 7))


@st.composite
def _points(draw: Any, kind: str) -> list[Any]:
    found = []
    for _ in range(draw(st.integers(0, 4))):
        common = {"attributes": draw(st.lists(_attribute, max_size=3)),
                  "start_time_unix_nano": draw(_times), "time_unix_nano": draw(_times),
                  "flags": draw(st.sampled_from([0, 0, 1, 2]))}  # fmt: skip
        if kind in ("sum", "gauge"):
            value = draw(st.sampled_from(["d", "i", "none"]))
            number = {"d": {"as_double": draw(st.floats(-2, 1e16, allow_nan=False) | st.just(
                float("nan")) | st.just(-0.0) | st.just(1e-10))}, "i": {"as_int": draw(
                st.integers(-3, 2**62))}, "none": {}}[value]  # fmt: skip
            found.append(pb.NumberDataPoint(**common, **number))
        else:
            sums = {"sum": draw(st.floats(0, 1e6))} if draw(st.booleans()) else {}
            point = (pb.HistogramDataPoint if kind == "histogram" else
                     pb.ExponentialHistogramDataPoint)  # fmt: skip
            extra = ({"bucket_counts": [1, 2], "explicit_bounds": [0.5]} if kind == "histogram"
                     else {"scale": 2, "zero_count": 1})  # fmt: skip
            found.append(point(**common, count=draw(st.integers(0, 2**40)), **sums, **extra))
    return found


@st.composite
def _exports(draw: Any) -> ExportMetricsServiceRequest:
    metrics = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["sum", "gauge", "histogram", "exponential_histogram"]))
        name = {"sum": draw(st.sampled_from(["calls", "db.client.storage"])),
                "gauge": draw(st.sampled_from(["db.client.storage", "calls"])),
                "histogram": "http", "exponential_histogram": "exp"}[kind]  # fmt: skip
        data = draw(_points(kind))
        temporality = draw(st.sampled_from([1, 2]))
        if kind == "sum":
            metric = pb.Metric(
                name=name,
                sum=pb.Sum(
                    data_points=data, is_monotonic=True, aggregation_temporality=temporality
                ),
            )
        elif kind == "gauge":
            metric = pb.Metric(name=name, gauge=pb.Gauge(data_points=data))
        elif kind == "histogram":
            metric = pb.Metric(
                name=name,
                histogram=pb.Histogram(data_points=data, aggregation_temporality=temporality),
            )
        else:
            metric = pb.Metric(
                name=name,
                exponential_histogram=pb.ExponentialHistogram(
                    data_points=data, aggregation_temporality=temporality
                ),
            )
        metrics.append(metric)
    return wrap(*metrics)  # fmt: skip


def _same(one: Any, other: Any) -> None:
    """Two :class:`Points` read from one export hold the same, row for row."""
    assert one.count == other.count and one.notes == other.notes
    pd.testing.assert_frame_equal(one.rows.reset_index(drop=True),
                                  other.rows.reset_index(drop=True))  # fmt: skip
    pd.testing.assert_frame_equal(one.samples, other.samples)
    order = ["point", "reason"]
    pd.testing.assert_frame_equal(
        one.refused.sort_values(order).reset_index(drop=True),
        other.refused.sort_values(order).reset_index(drop=True),
    )


@settings(max_examples=150, deadline=None)
@given(request=_exports())
def test_points_read_from_the_wire_equal_points_read_from_the_messages(
    request: ExportMetricsServiceRequest,
) -> None:
    """The wire reading (canonical chunks read whole: :mod:`tenantcost.otlp_wire`) gives
    exactly what reading each decoded message gives: rows, keys, clients, values, samples,
    refusals and notes, for sums, gauges, histograms and exponential histograms with any
    attributes (a client that is an integer or has no value, arrays, empty values)."""
    from tenantcost.otlp import parse
    from tenantcost.otlp_count import decode

    body = request.SerializeToString()
    received = T0 + 2 * HOUR
    wire = points(decode(body, Encoding.PROTOBUF, 1000), WIRE, received=received,
                  gauges={"storage_bytes"})  # fmt: skip
    messages = points(parse(body, Encoding.PROTOBUF), WIRE, received=received,
                      gauges={"storage_bytes"})  # fmt: skip
    _same(wire, messages)


def test_the_wire_reading_applies_to_an_sdk_export_and_not_to_other_bytes() -> None:
    """Canonical bytes (every encoder writes fields in order) are read whole; the same
    points with their fields in another order are read message by message, the same."""
    from tenantcost.otlp_count import decode

    data = [pb.NumberDataPoint(start_time_unix_nano=T0, time_unix_nano=T0 + i, as_double=i,
                               attributes=attrs(tenant_id=f"c{i}", route="/x"))
            for i in range(5)]  # fmt: skip
    metric = pb.Metric(name="app.cpu.time", sum=pb.Sum(data_points=data, is_monotonic=True,
                                                       aggregation_temporality=2))  # fmt: skip
    body = wrap(metric).SerializeToString()
    (part,) = decode(body, Encoding.PROTOBUF, 100)
    (chunk,) = list(part.chunks)
    assert chunk.columns("tenant.id") is not None
    reordered = body
    for point in data:  # the time before the start: the same point, not canonical
        canonical = point.SerializeToString()
        start, time = canonical[:9], canonical[9:18]
        reordered = reordered.replace(canonical, time + start + canonical[18:])
    assert reordered != body
    (part,) = decode(reordered, Encoding.PROTOBUF, 100)
    (chunk,) = list(part.chunks)
    assert chunk.columns("tenant.id") is None
    _same(
        points(decode(reordered, Encoding.PROTOBUF, 100), SETTINGS, received=T0),
        points(decode(body, Encoding.PROTOBUF, 100), SETTINGS, received=T0),
    )


def test_a_small_body_is_counted_by_its_cut_and_refused_past_the_limit() -> None:
    """A body of at most 2,000,000 bytes cannot hold more than 1,000,000 messages: its
    points are counted by the cut into metrics, which stops past --max-records."""
    from google.protobuf.internal.encoder import _VarintBytes

    from tenantcost.otlp_count import TooLarge, decode

    def field(tag: int, body: bytes) -> bytes:
        return bytes([tag]) + _VarintBytes(len(body)) + body

    body = field(0x0A, field(0x12, field(0x12, field(0x3A, b"\x0a\x00" * 150_000))))
    assert len(body) < 2_000_000
    with pytest.raises(TooLarge, match="more than 100000 data points"):
        decode(body, Encoding.PROTOBUF, 100_000)
    assert len(list(decode(body, Encoding.PROTOBUF, 150_000)[0].chunks)) == 19  # 8,192 each
