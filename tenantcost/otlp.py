"""OTLP metrics into usage increments: the pure core of ``POST /v1/metrics``.

An OpenTelemetry exporter posts an ``ExportMetricsServiceRequest``: resources (a service's
process, ``service.name``), scopes, metrics, and each metric's data points with their
attributes (``tenant.id``). The settings file's ``otlp:`` section
(:class:`tenantcost.config.otlp.OtlpSettings`) says which metric feeds which usage column.
Three steps, each a function here, none touching the store:

1. :func:`parse` reads the body (protobuf, or the OTLP JSON mapping);
2. :func:`points` flattens it into one table, a row per (data point, usage column) it feeds:
   the series' key (a digest of resource, scope, metric, point attributes and column), the
   service, the client, ``start``/``time`` (ns since the epoch), the value and whether the
   series is cumulative. A point that cannot be usage is a row of :attr:`Points.refused`
   with its reason: an unknown metric, a gauge or other non-monotonic kind, no service, no
   time, no value. Reading the protobuf messages is the one step per point in Python (list
   comprehensions over the decoded C messages); everything after it is whole columns;
3. :func:`plan` compares the points with each series' last point kept in the store
   (:mod:`tenantcost.store.otlp_series`) and gives, per month, the usage to add, per UTC hour
   of the points' time, service, client and column, and each series' new last point.

**The rules of step 3** (docs/service.md, "What is stored"; applied per series in time order):

* a point at or before the series' last point (same time or earlier) was received already:
  it is not added again (exporters retry; OTLP has no idempotency key);
* a delta point adds its value;
* a cumulative point adds its difference from the series' previous point; a point whose
  ``start_time_unix_nano`` differs from the previous one's is a reset (the process
  restarted): it adds its whole value; so does the first point of a series never seen (or
  not seen for ``otlp.series_expiry_hours``: its kept point has expired);
* a negative increment (a delta below 0; a cumulative value below the previous one without
  a new start) or one over :data:`~tenantcost.limits.MAX_USAGE_VALUE` is refused, and never
  becomes the series' last point: the next point is compared with the last one accepted.
  Only a point refused later because its month is closed still becomes the series' last
  point (:mod:`tenantcost.store.otlp_series`): the next point then adds only what is new, in
  its own month.

A point outside the store's instants (2000-01-01 .. 2100-01-01), or dated more than an hour
after the server received it, is refused in step 2: it never reaches a series.

Each increment goes to the UTC hour of its point's time: what a cumulative series counted
since its previous point lands in that hour, so usage near an hour boundary can be counted
in the next hour, by at most one export interval.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.client_id import bad_client_ids, client_id_problem
from tenantcost.config.otlp import OtlpSettings, ValueKind
from tenantcost.limits import EARLIEST_INSTANT_ISO, LATEST_INSTANT_ISO, MAX_USAGE_VALUE

HOUR_NS = 3_600_000_000_000
MAX_TIME_NS = 2**63 - 1
"""Times are kept as int64 nanoseconds (to the year 2262); a later start is refused."""
EARLIEST_NS = int(datetime.fromisoformat(EARLIEST_INSTANT_ISO).timestamp()) * 10**9
LATEST_NS = int(datetime.fromisoformat(LATEST_INSTANT_ISO).timestamp()) * 10**9
"""A point's time is in the store's range of instants (``tenantcost.limits``), or refused."""
MAX_AHEAD_NS = 3_600 * 10**9
"""A point dated more than an hour after the server received it is refused: a clock that
far ahead, or a corrupt time, would otherwise make a batch for a future month and become its
series' last point, after which every true point would look received already."""
DELTA, CUMULATIVE = 1, 2
"""``AggregationTemporality`` values (opentelemetry.proto.metrics.v1)."""
NO_RECORDED_VALUE = 1
"""``DataPointFlags.NO_RECORDED_VALUE_MASK``: the point marks a gap, it holds no value."""
USABLE_KINDS = ("sum", "histogram", "exponential_histogram")
POINT_COLUMNS = ["point", "key", "column", "service", "client", "start", "time", "value",
                 "cumulative"]  # fmt: skip
STATE_COLUMNS = ["key", "start", "time", "value"]


class Encoding(StrEnum):
    """The two OTLP/HTTP bodies (and the answer's, which is the request's)."""

    PROTOBUF = "application/x-protobuf"
    JSON = "application/json"


class DecodeError(ValueError):
    """The body is no ``ExportMetricsServiceRequest`` (answered 400, not retried)."""


def parse(body: bytes, encoding: Encoding) -> Any:
    """The ``ExportMetricsServiceRequest`` of a body. JSON follows the OTLP mapping, which
    :mod:`google.protobuf.json_format` reads (lowerCamelCase or original field names, int64
    as strings or numbers, enums as integers); unknown fields are ignored, as OTLP asks."""
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError as ProtobufError
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    request = ExportMetricsServiceRequest()
    try:
        if encoding is Encoding.PROTOBUF:
            request.ParseFromString(body)
        else:
            json_format.Parse(body.decode("utf-8"), request, ignore_unknown_fields=True)
    except (ProtobufError, json_format.ParseError, UnicodeDecodeError, RecursionError) as exc:
        raise DecodeError(f"not an OTLP ExportMetricsServiceRequest ({encoding}): {exc}") from None
    return request


def parse_document(document: Any) -> Any:
    """The ``ExportMetricsServiceRequest`` of a loaded JSON body (as :func:`parse` reads it)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    request = ExportMetricsServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError) as exc:
        raise DecodeError(f"not an OTLP ExportMetricsServiceRequest ({Encoding.JSON}): "
                          f"{exc}") from None  # fmt: skip
    return request


@dataclass(frozen=True)
class Points:
    """What a request holds: usable rows (:data:`POINT_COLUMNS`) and refused points."""

    rows: pd.DataFrame
    refused: pd.DataFrame
    """``point, reason``: one row per refusal (a point feeding two columns may have two)."""
    count: int
    """Data points in the request (``rejected_data_points`` counts among these)."""
    notes: tuple[str, ...] = ()
    """Points counted without a client (no client attribute, or an id the store refuses)."""


@dataclass(frozen=True)
class MetricPart:
    """One metric of an export, with its resource and scope: what :func:`points` reads.
    ``chunks`` gives its data points, a sequence at a time (``len`` counts them all): the
    metric's own ``data_points`` for a decoded request, or pieces decoded from the wire one
    after the other (:mod:`tenantcost.otlp_wire`), so that a large export is never decoded
    whole."""

    resource: Any
    scope: Any
    metric: Any
    chunks: Iterable[Sequence[Any]]


def message_parts(request: Any) -> Iterator[MetricPart]:
    """The metrics of a decoded ``ExportMetricsServiceRequest``."""
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                found = getattr(metric, kind).data_points if kind is not None else []
                yield MetricPart(resource_metrics.resource, scope_metrics.scope, metric,
                                 _OneChunk(found))  # fmt: skip


@dataclass(frozen=True)
class _OneChunk:
    points: Sequence[Any]

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self) -> Iterator[Sequence[Any]]:
        yield self.points


def points(request: Any, settings: OtlpSettings, *, received: int | None = None) -> Points:
    """Flatten a request (see the module docstring, step 2): a decoded one, or an iterable
    of :class:`MetricPart` (:class:`tenantcost.otlp_wire.WireExport`); ``received`` is when
    the server received it (ns since the epoch; now if None): a point dated more than
    :data:`MAX_AHEAD_NS` after it is refused."""
    import time

    parts = message_parts(request) if hasattr(request, "resource_metrics") else request
    builder = _Builder(settings, time.time_ns() if received is None else received)
    last: tuple[Any, Any, str | None, bytes] | None = None
    for part in parts:
        if last is None or last[0] is not part.resource or last[1] is not part.scope:
            resource, scope = part.resource, part.scope
            service = _text(resource.attributes, settings.service_attribute)
            prefix = (resource.SerializeToString(deterministic=True) + b"\x00"
                      + scope.SerializeToString(deterministic=True))  # fmt: skip
            last = (resource, scope, service, prefix)
        builder.add(last[3], last[2], part.metric, part.chunks)
    return builder.finish()


def _text(attributes: Iterable[Any], key: str) -> str | None:
    """An attribute's value as text (strings, integers, booleans; None if absent or other)."""
    for attribute in attributes:
        if attribute.key == key:
            value = attribute.value
            kind = value.WhichOneof("value")
            if kind == "string_value":
                return str(value.string_value)
            if kind in ("int_value", "bool_value"):
                return str(getattr(value, kind)).lower()
            return None
    return None


def _identity(attributes: Iterable[Any]) -> bytes:
    return b"\x1f".join([a.SerializeToString(deterministic=True) for a in attributes])


@dataclass
class _Builder:
    """Collects one block of columns per (metric, usage column), and the refusals."""

    settings: OtlpSettings
    received: int
    count: int = 0
    blocks: list[pd.DataFrame] = field(default_factory=list)
    refused: list[pd.DataFrame] = field(default_factory=list)

    def refuse(self, ids: np.ndarray, reason: str) -> None:
        if len(ids):
            self.refused.append(pd.DataFrame({"point": ids, "reason": reason}))

    def add(self, prefix: bytes, service: str | None, metric: Any, chunks: Any) -> None:
        kind = metric.WhichOneof("data")
        data = getattr(metric, kind) if kind is not None else None
        columns = self.settings.columns_of(metric.name)
        reason = _metric_refusal(metric.name, kind, data, bool(columns))
        if reason is None:
            reason = _service_refusal(service, self.settings.service_attribute)
        if reason is not None:  # every chunk is still decoded: protobuf checks every byte
            for found in chunks:
                self.refuse(self.ids(len(found)), reason)
            return
        assert data is not None
        cumulative = data.aggregation_temporality == CUMULATIVE
        for chunk in chunks:
            found = list(chunk)
            ids = self.ids(len(found))
            common = _common(found, self.settings.client_attribute)
            common["cumulative"] = cumulative
            common["service"] = service
            for column, value in columns:
                self.column(ids, prefix + metric.name.encode(), kind or "", found, common,
                            column, value)  # fmt: skip
            del chunk, found, common  # this chunk's messages: freed before the next is decoded

    def ids(self, count: int) -> np.ndarray:
        """The ids of the next ``count`` data points (in the order of the request)."""
        ids = np.arange(self.count, self.count + count, dtype="int64")
        self.count += count
        return ids

    def column(self, ids: np.ndarray, prefix: bytes, kind: str, found: Sequence[Any],
               common: dict[str, Any], column: str, value: ValueKind) -> None:  # fmt: skip
        if kind == "sum" and value is ValueKind.COUNT:
            self.refuse(ids, f"column '{column}' takes the count of a sum (a counter has "
                             "no count: use value: sum)")  # fmt: skip
            return
        values = _values(found, kind, value)
        base = hashlib.blake2b(prefix + b"\x00" + column.encode() + b"\x00", digest_size=16)
        keys = [_digest(base, identity) for identity in common["identity"]]
        shared = {k: v for k, v in common.items() if k != "identity"}
        block = pd.DataFrame(
            {"point": ids, "key": keys, "column": column, "value": values, **shared}
        )
        self.blocks.append(self.checked(block))

    def checked(self, block: pd.DataFrame) -> pd.DataFrame:
        """The block without its unusable points (refused with their reason)."""
        problems = (
            (block["flags"] & NO_RECORDED_VALUE != 0, "the point has no recorded value"),
            (block["time"] == 0, "the point has no time_unix_nano"),
            (
                (block["time"] < EARLIEST_NS) | (block["time"] >= LATEST_NS),
                f"time_unix_nano is outside {EARLIEST_INSTANT_ISO[:10]} .. "
                f"{LATEST_INSTANT_ISO[:10]} (the range the store accepts)",
            ),
            (
                block["time"] > self.received + MAX_AHEAD_NS,
                f"time_unix_nano is more than {MAX_AHEAD_NS // 10**9} s after the server "
                "received the export (a clock ahead, or a corrupt time)",
            ),
            (block["start"] > MAX_TIME_NS, "start_time_unix_nano is after the year 2262"),
            (~np.isfinite(block["value"]), "the point's value is missing or not finite"),
        )
        bad = np.zeros(len(block), dtype=bool)
        for mask, reason in problems:
            new = mask.to_numpy() & ~bad
            self.refuse(block["point"].to_numpy()[new], reason)
            bad |= new
        return block[~bad]

    def finish(self) -> Points:
        rows = pd.concat(self.blocks, ignore_index=True) if self.blocks else _empty_points()
        rows, notes = _clients(rows, self.settings.client_attribute)
        none = pd.DataFrame({"point": pd.Series([], dtype="int64"), "reason": ""})
        refused = pd.concat(self.refused, ignore_index=True) if self.refused else none
        return Points(rows[POINT_COLUMNS], refused, self.count, notes)


def _digest(base: Any, identity: bytes) -> str:
    h = base.copy()
    h.update(identity)
    return str(h.hexdigest())


def _service_refusal(service: str | None, attribute: str) -> str | None:
    """Why a resource's service cannot name usage (the usage reader refuses an empty one;
    the client-id rule keeps control characters and NUL, which PostgreSQL refuses in text,
    out of the store's keys), or None."""
    if service is None or not service.strip():
        return f"the resource has no '{attribute}' attribute: the service of this usage is unknown"
    problem = client_id_problem(service)  # the same rule: "client id holds..." -> "it holds..."
    if problem is None:
        return None
    problem = problem.replace("client id", "it", 1)
    return f"the resource's '{attribute}' is no usable service name: {problem}"


def _shown(name: str) -> str:
    """A metric name for a message: at most 100 characters, control characters escaped."""
    short = name if len(name) <= 100 else name[:100] + "..."
    return short if short.isprintable() else short.encode("unicode_escape").decode("ascii")


def _metric_refusal(name: str, kind: str | None, data: Any, mapped: bool) -> str | None:
    """Why no point of this metric can be usage, or None."""
    name = _shown(name)
    if not mapped:
        return f"metric '{name}' is not mapped to a usage column (settings file: otlp.metrics)"
    if kind not in USABLE_KINDS:
        return (f"metric '{name}' is a {kind or 'metric without data'}: only monotonic sums "
                "(counters) and histograms are usage")  # fmt: skip
    if kind == "sum" and not data.is_monotonic:
        return f"metric '{name}' is a non-monotonic sum (an up-down counter): not usage"
    if data.aggregation_temporality not in (DELTA, CUMULATIVE):
        return f"metric '{name}' has no aggregation temporality (delta or cumulative)"
    return None


def _common(found: Sequence[Any], client_attribute: str) -> dict[str, Any]:
    """The columns every usage column of a metric shares, read from its points."""
    return {
        "start": np.array([p.start_time_unix_nano for p in found], dtype="uint64"),
        "time": np.array([p.time_unix_nano for p in found], dtype="uint64"),
        "flags": np.array([p.flags for p in found], dtype="uint32"),
        "client": [_interned(_text(p.attributes, client_attribute)) for p in found],
        "identity": [_identity(p.attributes) for p in found],
    }


def _interned(text: str | None) -> str | None:
    """One string object per client id, not one per point (100,000 points, few clients)."""
    return None if text is None else sys.intern(text)


def _values(found: Sequence[Any], kind: str, value: ValueKind) -> np.ndarray:
    if kind == "sum":  # a oneof: the value not set reads 0
        return np.array([p.as_double or p.as_int for p in found], dtype="float64")
    if value is ValueKind.COUNT:
        return np.array([p.count for p in found], dtype="float64")
    return np.array([p.sum if p.HasField("sum") else np.nan for p in found], dtype="float64")


def _empty_points() -> pd.DataFrame:
    return pd.DataFrame({
        "point": pd.Series([], dtype="int64"), "key": "", "column": "", "service": "",
        "client": pd.Series([], dtype=object), "start": pd.Series([], dtype="uint64"),
        "time": pd.Series([], dtype="uint64"), "value": pd.Series([], dtype="float64"),
        "cumulative": pd.Series([], dtype=bool), "flags": pd.Series([], dtype="uint32"),
    })  # fmt: skip


def _clients(rows: pd.DataFrame, attribute: str) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Points without the client attribute, and points whose client id the store refuses
    (:mod:`tenantcost.client_id`), are counted without a client: one hostile or careless
    exporter costs no other client its usage, and the usage is reported unattributed."""
    notes = []
    codes, found = pd.factorize(rows["client"])  # checked once per distinct id, not per point
    distinct = np.asarray(found, dtype=object)
    missing = codes < 0
    if missing.any():
        points = rows["point"].to_numpy()[missing]
        notes.append(f"data points without a '{attribute}' attribute: {len(np.unique(points))}, "
                     "counted as usage without a client")  # fmt: skip
    refused = bad_client_ids(pd.Series(distinct, dtype=object)).to_numpy(dtype=bool)
    bad = ~missing & np.append(refused, False)[codes]  # codes -1 (missing) read the False
    if bad.any():
        first = client_id_problem(str(distinct[codes[bad][0]])) or "refused"
        points = rows["point"].to_numpy()[bad]
        notes.append(f"data points whose '{attribute}' the store refuses as a client id "
                     f"({first}): {len(np.unique(points))}, counted without a client")  # fmt: skip
    usable = np.append(np.where(refused, "", distinct), "")  # the last: for code -1
    rows["client"] = pd.Series(usable[codes], index=rows.index, dtype=object).astype(str)
    rows["start"] = rows["start"].astype("int64")
    rows["time"] = rows["time"].astype("int64")
    return rows, tuple(notes)


@dataclass(frozen=True)
class MonthPart:
    """One calendar month of a request: one atomic usage batch and its series' new points."""

    month: str
    usage: pd.DataFrame
    """``window_start, window_end, service, client`` and every column (0 where none)."""
    points: np.ndarray
    """The data points whose usage this is (refused with the batch, if it is)."""
    state: pd.DataFrame
    """:data:`STATE_COLUMNS`: each series' last point in this month."""


@dataclass(frozen=True)
class Plan:
    """What to store for a request, month by month (ascending)."""

    parts: list[MonthPart]
    refused: pd.DataFrame
    """``point, reason`` (negative increments, beyond the limit)."""
    received: int
    """Data points at or before their series' last point: not added again."""
    seen: list[str]
    """Every series key of the request (their ``seen_at`` is refreshed)."""


def plan(rows: pd.DataFrame, state: pd.DataFrame, columns: Sequence[str]) -> Plan:
    """Step 3 of the module docstring. ``state`` is the kept last point of (some of) the
    series, indexed by key (:data:`STATE_COLUMNS` but the key); ``columns`` every usage
    column of the batches (the mapped ones and the store's). The rows are ordered by series,
    time and point once, and read as numpy columns from then on: an export of 100,000 points
    makes no copy of its frame (each cost about 10 MB)."""
    codes, distinct = pd.factorize(rows["key"], sort=True)  # sorted keys, codes per row
    keys = np.asarray(distinct, dtype=object)  # the one Python str per series (pandas keeps
    del distinct  # text in Arrow: each conversion of the column would make 100,000 more)
    order = np.lexsort((rows["point"].to_numpy(), rows["time"].to_numpy(), codes))
    code = codes[order]
    col = {name: rows[name].to_numpy()[order] for name in ("point", "time", "start", "value")}
    times, ids = col["time"], col["point"]
    s_has, s_start, s_time, s_value = _kept_points(keys, state)
    same_key = np.zeros(len(code), dtype=bool)
    same_key[1:] = code[1:] == code[:-1]
    earlier = np.where(same_key, np.roll(times, 1), -1)
    received = (times <= s_time[code]) | (same_key & (times == earlier))
    kept = np.flatnonzero(~received)
    at = code[kept]
    increment = _increments(at, col["start"][kept], col["value"][kept],
                            rows["cumulative"].to_numpy(dtype=bool)[order][kept],
                            s_has[at], s_start[at], s_value[at])  # fmt: skip
    negative = increment < 0
    over = increment > MAX_USAGE_VALUE
    refused = pd.concat([
        pd.DataFrame({"point": ids[kept][negative],
                      "reason": "a negative increment (a delta below 0, or a cumulative value "
                                "below the previous one without a new start_time_unix_nano)"}),
        pd.DataFrame({"point": ids[kept][over],
                      "reason": f"an increment over {MAX_USAGE_VALUE:g} (a corrupt counter?)"}),
    ], ignore_index=True)  # fmt: skip
    good = ~negative & ~over
    usable = kept[good]  # positions (in ``order``) of the points that add usage
    added = np.zeros(len(code), dtype="float64")
    added[usable] = increment[good]
    parts = _months(rows, order, code, keys, col, kept, usable, added, columns)
    received_points = np.setdiff1d(ids[received], ids[kept])
    return Plan(parts, refused, len(received_points), keys.tolist())


def _kept_points(keys: np.ndarray, state: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """Each series' kept point (``has``, ``start``, ``time``, ``value``; False, -1, -1 and 0
    without one), by position: a join would turn the int64 nanoseconds into floats wherever
    a series has none, and 2**53 ns is only 104 days."""
    at = state.index.get_indexer(keys)
    has = at >= 0
    safe = np.where(has, at, 0)

    def column(name: str, dtype: str, missing: float) -> np.ndarray:
        values = state[name].to_numpy(dtype=dtype)
        return np.where(has, values[safe] if len(values) else missing, missing).astype(dtype)

    return has, column("start", "int64", -1), column("time", "int64", -1), \
        column("value", "float64", 0.0)  # fmt: skip


def _increments(code: np.ndarray, starts: np.ndarray, values: np.ndarray,
                cumulative: np.ndarray, has_state: np.ndarray, s_start: np.ndarray,
                s_value: np.ndarray) -> np.ndarray:  # fmt: skip
    """Each kept point's increment (the arguments: the kept points' columns, in order of
    series, time and point). A delta point's is its value. A cumulative point's is its
    difference from its series' baseline: the largest value before it with the same start,
    among the stored point and the request's earlier points (a refused point never raises it:
    it is below the baseline, or over the limit and left out). Without one (a reset, a new
    series), its whole value."""
    first_of_key = np.ones(len(code), dtype=bool)
    first_of_key[1:] = code[1:] != code[:-1]
    new_run = first_of_key.copy()
    new_run[1:] |= starts[1:] != starts[:-1]
    run = np.cumsum(new_run) - 1
    heads = np.flatnonzero(new_run)
    stored = has_state[heads] & first_of_key[heads] & (s_start[heads] == starts[heads])
    base = np.where(stored, s_value[heads], -np.inf)[run]

    def increments(counted: np.ndarray) -> np.ndarray:
        earlier = pd.Series(np.where(counted, values, -np.inf)).groupby(run).cummax()
        before = earlier.groupby(run).shift(1).fillna(-np.inf).to_numpy()
        baseline = np.maximum(before, base)
        has = cumulative & np.isfinite(baseline)
        return np.where(has, values - np.where(has, baseline, 0.0), values)

    first = increments(np.ones(len(code), dtype=bool))
    return increments(first <= MAX_USAGE_VALUE)


def _months(rows: pd.DataFrame, order: np.ndarray, code: np.ndarray, keys: np.ndarray,
            col: dict[str, np.ndarray], kept: np.ndarray, usable: np.ndarray,
            added: np.ndarray, columns: Sequence[str]) -> list[MonthPart]:  # fmt: skip
    """Split the kept points by the calendar month of their time (numpy months: no text).
    A month's series state is its last usable point per series: a refused point never
    becomes a series' last point (the store still keeps it if it is refused for a closed
    month only: :mod:`tenantcost.store.otlp_series`). Positions are in ``order``."""
    month = col["time"].astype("datetime64[ns]").astype("datetime64[M]")
    parts = []
    for this in np.unique(month[kept]):  # one iteration per month
        mine = usable[month[usable] == this]
        ends = np.ones(len(mine), dtype=bool)  # a series' last point of the month
        ends[:-1] = code[mine][1:] != code[mine][:-1]
        last = mine[ends]
        state = pd.DataFrame(
            {
                "key": pd.Series(keys[code[last]], dtype=object),
                **{c: col[c][last] for c in ("start", "time", "value")},
            }
        )
        cells = pd.DataFrame({
            "time": col["time"][mine], "increment": added[mine],
            **{c: rows[c].array.take(order[mine]) for c in ("service", "client", "column")},
        })  # fmt: skip
        parts.append(MonthPart(str(this), _usage(cells, columns), np.unique(col["point"][mine]),
                               state))  # fmt: skip
    return parts


def _usage(usable: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Increments summed per (hour, service, client, column), one column per usage column."""
    if usable.empty:
        return pd.DataFrame(columns=["window_start", "window_end", "service", "client",
                                     *columns])  # fmt: skip
    hour = pd.to_datetime(usable["time"].to_numpy() // HOUR_NS * HOUR_NS, utc=True)
    cells = usable.assign(window_start=hour)
    summed = (
        cells.groupby(["window_start", "service", "client", "column"], sort=True)["increment"]
        .sum()
        .unstack("column", fill_value=0.0)
        .reindex(columns=list(columns), fill_value=0.0)
        .reset_index()
    )
    summed.columns.name = None
    summed.insert(1, "window_end", summed["window_start"] + pd.Timedelta(hours=1))
    return summed
