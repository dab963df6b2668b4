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
   time, no value. The points are read as columns (:func:`point_columns`): from the wire,
   whole, where a chunk's bytes are canonical (:mod:`tenantcost.otlp_wire`), else from each
   decoded message; the series' digest is the one step per point in Python, and everything
   after it is whole columns.
   A Gauge's points feeding a column mapped ``value: level`` (one the store declares a
   gauge) are **samples** instead, :attr:`Points.samples` (see "Gauges" below);
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

**Gauges** (docs/gauges.md). A Gauge data point of a metric mapped to a ``level`` column is a
sample ``(column, service, client, t_us, level)``, stored as a sample batch
(:mod:`tenantcost.store.samples`), never compared with a series' last point: a level is not
an increment. Its time is ``time_unix_nano`` truncated to the microsecond (the store's
resolution of instants); its level is ``as_int`` exactly, or ``as_double`` through its
shortest repr (``0.1`` is ``"0.1"``), written as a plain decimal. The point rules above
apply (no recorded value, no time, the store's range, an hour ahead), and a level below 0,
not finite, over :data:`~tenantcost.gauges.MAX_LEVEL` or with more than
:data:`~tenantcost.gauges.LEVEL_PLACES` decimal places (``1e-10``) is refused. Two points
of one request for the same column, service, client and microsecond are both refused:
which level holds is unknown (two series of one client, told apart by another attribute).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.client_id import bad_client_ids, client_id_problem
from tenantcost.config.otlp import OtlpSettings, ValueKind
from tenantcost.gauges import LEVEL_PLACES, MAX_LEVEL
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
SAMPLE_COLUMNS = ["point", "metric", "service", "client", "t_us", "value"]
"""A request's gauge samples: ``metric`` is the usage column, ``t_us`` the time in
microseconds since the epoch, ``value`` the level as exact decimal text."""


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
    samples: pd.DataFrame = field(default_factory=lambda: _empty_samples())
    """:data:`SAMPLE_COLUMNS`: the Gauge points of ``level`` columns, checked (no
    (metric, service, client, t_us) twice)."""


@dataclass(frozen=True)
class MetricPart:
    """One metric of an export, with its resource and scope: what :func:`points` reads.
    ``chunks`` gives its data points, a chunk at a time (``len`` counts them all; each chunk
    has a ``len`` and iterates its points): the metric's own ``data_points`` for a decoded
    request, or pieces decoded from the wire one after the other
    (:class:`tenantcost.otlp_wire.PointChunk`), so that a large export is never decoded
    whole."""

    resource: Any
    scope: Any
    metric: Any
    chunks: Iterable[Any]


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


def points(
    request: Any,
    settings: OtlpSettings,
    *,
    received: int | None = None,
    gauges: Collection[str] = (),
) -> Points:
    """Flatten a request (see the module docstring, step 2): a decoded one, or an iterable
    of :class:`MetricPart` (:class:`tenantcost.otlp_wire.WireExport`); ``received`` is when
    the server received it (ns since the epoch; now if None): a point dated more than
    :data:`MAX_AHEAD_NS` after it is refused. ``gauges`` are the usage columns the store
    declares gauges: only they take ``level`` points, and they take no other."""
    import time

    parts = message_parts(request) if hasattr(request, "resource_metrics") else request
    builder = _Builder(settings, time.time_ns() if received is None else received,
                       frozenset(gauges))  # fmt: skip
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
    """Collects one block of columns per (metric, usage column) and chunk, as numpy arrays
    (one frame is made of them all at the end), and the refusals."""

    settings: OtlpSettings
    received: int
    gauges: frozenset[str] = frozenset()
    count: int = 0
    blocks: list[dict[str, np.ndarray]] = field(default_factory=list)
    levels: list[dict[str, np.ndarray]] = field(default_factory=list)
    refused: list[tuple[np.ndarray, str]] = field(default_factory=list)

    def refuse(self, ids: np.ndarray, reason: str) -> None:
        if len(ids):
            self.refused.append((ids, reason))

    def add(self, prefix: bytes, service: str | None, metric: Any, chunks: Any) -> None:
        kind = metric.WhichOneof("data")
        data = getattr(metric, kind) if kind is not None else None
        columns = self.settings.columns_of(metric.name)
        reasons: list[str] = []
        usable: list[tuple[str, ValueKind]] = []
        if not columns:
            reasons.append(f"metric '{_shown(metric.name)}' is not mapped to a usage column "
                           "(settings file: otlp.metrics)")  # fmt: skip
        elif (problem := _service_refusal(service, self.settings.service_attribute)) is not None:
            reasons.append(problem)
        else:
            for column, value in columns:
                why = _column_refusal(metric.name, kind, data, column, value, self.gauges)
                if why is None:
                    usable.append((column, value))
                elif why not in reasons:
                    reasons.append(why)
        if not usable:  # every chunk is still decoded: protobuf checks every byte
            for chunk in chunks:
                ids = self.ids(len(chunk))
                for reason in reasons:
                    self.refuse(ids, reason)
            return
        assert data is not None
        cumulative = kind != "gauge" and data.aggregation_temporality == CUMULATIVE
        for chunk in chunks:
            ids = self.ids(len(chunk))
            for reason in reasons:  # a column of the metric that cannot take its points
                self.refuse(ids, reason)
            common = point_columns(chunk, kind or "", self.settings.client_attribute)
            common["cumulative"] = cumulative
            common["service"] = service
            for column, value in usable:
                if value is ValueKind.LEVEL:
                    self.level(ids, common, column)
                else:
                    self.column(ids, prefix + metric.name.encode(), kind or "", common,
                                column, value)  # fmt: skip
            del chunk, common  # this chunk's messages: freed before the next is decoded

    def ids(self, count: int) -> np.ndarray:
        """The ids of the next ``count`` data points (in the order of the request)."""
        ids = np.arange(self.count, self.count + count, dtype="int64")
        self.count += count
        return ids

    def column(self, ids: np.ndarray, prefix: bytes, kind: str, common: dict[str, Any],
               column: str, value: ValueKind) -> None:  # fmt: skip
        values = _values(common, kind, value)
        base = hashlib.blake2b(prefix + b"\x00" + column.encode() + b"\x00", digest_size=16)
        block = {
            "point": ids, "key": _digests(base, common["identity"]),
            "column": np.full(len(ids), column, dtype=object), "value": values,
            "start": common["start"], "time": common["time"], "flags": common["flags"],
            "cumulative": np.full(len(ids), common["cumulative"], dtype=bool),
            "client": common["client"], "service": np.full(len(ids), common["service"],
                                                           dtype=object),
        }  # fmt: skip
        self.blocks.append(self.checked(block))

    def level(self, ids: np.ndarray, common: dict[str, Any], column: str) -> None:
        """A Gauge chunk's points as samples of ``column`` (the checks of the module
        docstring, "Gauges"), kept for :meth:`finish`."""
        text, problems = _levels(common)
        block = {
            "point": ids, "metric": np.full(len(ids), column, dtype=object),
            "service": np.full(len(ids), common["service"], dtype=object),
            "client": common["client"], "time": common["time"], "flags": common["flags"],
            "value": text,
        }  # fmt: skip
        self.levels.append(self.checked(block, problems))

    def checked(
        self, block: dict[str, np.ndarray], values: Sequence[tuple[np.ndarray, str]] | None = None
    ) -> dict[str, np.ndarray]:
        """The block without its unusable points (refused with their reason); ``values``:
        the problems of a gauge's levels (a counter's values are checked here)."""
        time = block["time"]
        problems = [
            (block["flags"] & NO_RECORDED_VALUE != 0, "the point has no recorded value"),
            (time == 0, "the point has no time_unix_nano"),
            (
                (time < EARLIEST_NS) | (time >= LATEST_NS),
                f"time_unix_nano is outside {EARLIEST_INSTANT_ISO[:10]} .. "
                f"{LATEST_INSTANT_ISO[:10]} (the range the store accepts)",
            ),
            (
                time > self.received + MAX_AHEAD_NS,
                f"time_unix_nano is more than {MAX_AHEAD_NS // 10**9} s after the server "
                "received the export (a clock ahead, or a corrupt time)",
            ),
        ]
        if values is None:
            problems += [
                (block["start"] > MAX_TIME_NS, "start_time_unix_nano is after the year 2262"),
                (~np.isfinite(block["value"]), "the point's value is missing or not finite"),
            ]
        else:
            problems += values
        bad = np.zeros(len(block["point"]), dtype=bool)
        for mask, reason in problems:
            new = mask & ~bad
            self.refuse(block["point"][new], reason)
            bad |= new
        if not bad.any():
            return block
        return {name: column[~bad] for name, column in block.items()}

    def finish(self) -> Points:
        rows = _frame(self.blocks) if self.blocks else _empty_points()
        levels = _frame(self.levels) if self.levels else None
        rows, levels, notes = _clients(rows, levels, self.settings.client_attribute)
        rows["start"] = rows["start"].to_numpy().astype("int64")
        rows["time"] = rows["time"].to_numpy().astype("int64")
        samples = self.samples(levels) if levels is not None else _empty_samples()
        refused = pd.DataFrame({
            "point": np.concatenate([ids for ids, _ in self.refused]) if self.refused
            else np.zeros(0, dtype="int64"),
            "reason": pd.Series(np.repeat(np.array([r for _, r in self.refused] or [""],
                                                   dtype=object),
                                          [len(ids) for ids, _ in self.refused] or [0]),
                                dtype=object),
        })  # fmt: skip
        return Points(rows[POINT_COLUMNS], refused, self.count, notes, samples)

    def samples(self, levels: pd.DataFrame) -> pd.DataFrame:
        """The checked levels as samples; a (metric, service, client, t_us) given twice is
        refused, every point of it (which level holds?)."""
        levels["t_us"] = (levels["time"].to_numpy(dtype="uint64") // 1000).astype("int64")
        keys = ["metric", "service", "client", "t_us"]
        twice = levels.duplicated(keys, keep=False).to_numpy()
        self.refuse(levels["point"].to_numpy()[twice],
                    "another point of this export gives the same gauge column, service, "
                    "client and time (to the microsecond): which level holds? (a client's "
                    "level must be one series: drop the attributes that split it)")  # fmt: skip
        samples = levels.loc[~twice, SAMPLE_COLUMNS].reset_index(drop=True)
        return samples.astype({"point": "int64", "metric": object, "service": object,
                               "client": object, "value": object})  # fmt: skip


def _frame(blocks: list[dict[str, np.ndarray]]) -> pd.DataFrame:
    """One frame of the blocks' columns (text stays Python objects, not Arrow)."""
    return pd.DataFrame({
        name: pd.Series(np.concatenate([b[name] for b in blocks]), dtype=object)
        if blocks[0][name].dtype == object else np.concatenate([b[name] for b in blocks])
        for name in blocks[0]
    })  # fmt: skip


def _digests(base: Any, identities: tuple[bytes, list[int], list[int]]) -> np.ndarray:
    """Each series' key: the hex blake2b digest of ``base``'s bytes and its identity (the
    identities' bytes, and each one's start and end in them), as object text: pandas'
    Arrow text would convert at each lookup."""
    joined, starts, ends = identities
    view = memoryview(joined)
    copy = base.copy
    keys = np.empty(len(starts), dtype=object)
    for at, (start, end) in enumerate(zip(starts, ends, strict=True)):
        h = copy()
        h.update(view[start:end])
        keys[at] = h.hexdigest()
    return keys


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


def _column_refusal(name: str, kind: str | None, data: Any, column: str, value: ValueKind,
                    gauges: frozenset[str]) -> str | None:  # fmt: skip
    """Why no point of this metric can feed this usage column, or None. A ``level`` column
    takes a Gauge's points and must be a gauge of the store; any other column takes
    monotonic sums and histograms, and must not be one."""
    name = _shown(name)
    if value is ValueKind.LEVEL:
        if kind != "gauge":
            return (f"metric '{name}' is a {kind or 'metric without data'}: column "
                    f"'{column}' takes a gauge's level (value: level), from Gauge data "
                    "points")  # fmt: skip
        if column not in gauges:
            return (f"column '{column}' takes a gauge's level, but the store does not declare "
                    f"it a gauge (a rule file's metrics: {{{column}: {{kind: gauge, "
                    "stale_after: ...}}, docs/gauges.md)")  # fmt: skip
        return None
    if kind not in USABLE_KINDS:
        return (f"metric '{name}' is a {kind or 'metric without data'}: only monotonic sums "
                "(counters) and histograms are usage, and a gauge's points only as the "
                "levels of a column mapped with value: level")  # fmt: skip
    if column in gauges:
        return (f"column '{column}' is a gauge in the store: it takes a gauge's level (map "
                "it with value: level), not a counter's")  # fmt: skip
    if kind == "sum" and not data.is_monotonic:
        return f"metric '{name}' is a non-monotonic sum (an up-down counter): not usage"
    if data.aggregation_temporality not in (DELTA, CUMULATIVE):
        return f"metric '{name}' has no aggregation temporality (delta or cumulative)"
    if kind == "sum" and value is ValueKind.COUNT:
        return (f"column '{column}' takes the count of a sum (a counter has no count: use "
                "value: sum)")  # fmt: skip
    return None


def point_columns(chunk: Any, kind: str, client_attribute: str) -> dict[str, Any]:
    """A chunk of data points as columns: ``start``, ``time``, ``flags``, ``client`` (text or
    None), ``identity`` (each point's attributes' bytes, :func:`_identity`, as one string and
    each one's start and end in it) and the values: ``double``,
    ``int`` and whether each is set (``NumberDataPoint``), or ``count``, ``sum`` and
    ``sum_set`` (histograms). A chunk cut from the wire whose bytes are canonical is read
    whole there (:meth:`tenantcost.otlp_wire.PointChunk.columns`); any other, point by point
    from its messages, with the same result."""
    read = getattr(chunk, "columns", None)
    columns = read(client_attribute) if read is not None else None
    if columns is not None:
        return columns
    found = list(chunk)
    columns = {
        "start": np.array([p.start_time_unix_nano for p in found], dtype="uint64"),
        "time": np.array([p.time_unix_nano for p in found], dtype="uint64"),
        "flags": np.array([p.flags for p in found], dtype="uint64"),
        "client": np.array([_interned(_text(p.attributes, client_attribute)) for p in found]
                           + [None], dtype=object)[:-1],
        "identity": _joined([_identity(p.attributes) for p in found]),
    }  # fmt: skip
    if kind in ("sum", "gauge"):
        which = [p.WhichOneof("value") for p in found]
        columns.update(
            double=np.array([p.as_double for p in found], dtype="float64"),
            double_set=np.array([w == "as_double" for w in which], dtype=bool),
            int=np.array([p.as_int for p in found], dtype="int64"),
            int_set=np.array([w == "as_int" for w in which], dtype=bool),
        )
    elif kind in ("histogram", "exponential_histogram"):
        columns.update(
            count=np.array([p.count for p in found], dtype="uint64"),
            sum=np.array([p.sum for p in found], dtype="float64"),
            sum_set=np.array([p.HasField("sum") for p in found], dtype=bool),
        )
    return columns


def _joined(identities: list[bytes]) -> tuple[bytes, list[int], list[int]]:
    """Identities as the wire reading gives them: their bytes, each one's start and end."""
    ends = np.cumsum([len(i) for i in identities], dtype=np.int64)
    sizes = np.array([len(i) for i in identities], dtype=np.int64)
    return b"".join(identities), (ends - sizes).tolist(), ends.tolist()


def _interned(text: str | None) -> str | None:
    """One string object per client id, not one per point (100,000 points, few clients)."""
    return None if text is None else sys.intern(text)


def _levels(columns: dict[str, Any]) -> tuple[np.ndarray, list[tuple[np.ndarray, str]]]:
    """Gauge points' levels as exact decimal text (``""`` where refused), and the problems
    found (masks with their reasons): ``as_int`` exactly; ``as_double`` through its shortest
    repr, written as a plain decimal (``1e-05`` is ``"0.00001"``)."""
    integer, ints = columns["int_set"], columns["int"]
    double, doubles = columns["double_set"] & ~integer, columns["double"]
    count = len(ints)
    missing = ~integer & (~double | ~np.isfinite(doubles))
    negative = (integer & (ints < 0)) | (double & (doubles < 0))
    over = (integer & (ints > MAX_LEVEL)) | (double & ~missing & (doubles > MAX_LEVEL))
    text = np.full(count, "", dtype=object)
    fine = ~missing & ~negative & ~over
    text[integer & fine] = ints[integer & fine].astype(str).astype(object)
    places = np.zeros(count, dtype=bool)
    at = np.flatnonzero(double & fine)
    if len(at):
        distinct, back = np.unique(doubles[at], return_inverse=True)
        written = [_decimal(float(v)) for v in distinct]
        too_fine = np.array([w is None for w in written], dtype=bool)[back]
        text[at] = np.array([w or "" for w in written], dtype=object)[back]
        places[at] = too_fine
    return text, [
        (missing, "the point's value is missing or not finite"),
        (negative, "a negative level (a gauge's level is at least 0)"),
        (over, f"a level over {MAX_LEVEL:g} (the largest level held exactly)"),
        (places, f"a level with more than {LEVEL_PLACES} decimal places (its shortest repr)"),
    ]


def _decimal(value: float) -> str | None:
    """A finite double >= 0 as the plain decimal of its shortest repr, or None past
    :data:`LEVEL_PLACES` decimal places."""
    from decimal import Decimal

    exact = Decimal(repr(value))
    exponent = exact.as_tuple().exponent
    assert isinstance(exponent, int)
    if -exponent > LEVEL_PLACES:
        return None
    written = format(exact, "f")
    return "0" if written in ("0", "0.0", "-0.0", "-0") else written


def _values(columns: dict[str, Any], kind: str, value: ValueKind) -> np.ndarray:
    if kind == "sum":  # a oneof: as_double if set and not 0, else as_int (0 if not set)
        double = columns["double"]
        ints = np.where(columns["int_set"], columns["int"], 0).astype("float64")
        return np.where(columns["double_set"] & (double != 0), double, ints)
    if value is ValueKind.COUNT:
        return columns["count"].astype("float64")
    return np.where(columns["sum_set"], columns["sum"], np.nan)


def _empty_points() -> pd.DataFrame:
    return pd.DataFrame({
        "point": pd.Series([], dtype="int64"), "key": pd.Series([], dtype=object),
        "column": pd.Series([], dtype=object), "service": pd.Series([], dtype=object),
        "client": pd.Series([], dtype=object), "start": pd.Series([], dtype="uint64"),
        "time": pd.Series([], dtype="uint64"), "value": pd.Series([], dtype="float64"),
        "cumulative": pd.Series([], dtype=bool), "flags": pd.Series([], dtype="uint32"),
    })  # fmt: skip


def _empty_samples() -> pd.DataFrame:
    return pd.DataFrame({
        "point": pd.Series([], dtype="int64"), "metric": pd.Series([], dtype=object),
        "service": pd.Series([], dtype=object), "client": pd.Series([], dtype=object),
        "t_us": pd.Series([], dtype="int64"), "value": pd.Series([], dtype=object),
    })  # fmt: skip


def _clients(
    rows: pd.DataFrame, levels: pd.DataFrame | None, attribute: str
) -> tuple[pd.DataFrame, pd.DataFrame | None, tuple[str, ...]]:
    """Points without the client attribute, and points whose client id the store refuses
    (:mod:`tenantcost.client_id`), are counted without a client: one hostile or careless
    exporter costs no other client its usage, and the usage is reported unattributed. The
    gauges' ``levels`` likewise (a level without a client is unattributed)."""
    if levels is None:
        rows, notes = _clients_of(rows, attribute)
        return rows, None, notes
    both = pd.concat([rows[["point", "client"]], levels[["point", "client"]]],
                     ignore_index=True)  # fmt: skip
    both, notes = _clients_of(both, attribute)
    clients = both["client"].to_numpy(dtype=object)
    rows["client"] = pd.Series(clients[: len(rows)], index=rows.index, dtype=object)
    levels["client"] = pd.Series(clients[len(rows) :], index=levels.index, dtype=object)
    return rows, levels, notes


def _clients_of(rows: pd.DataFrame, attribute: str) -> tuple[pd.DataFrame, tuple[str, ...]]:
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
    rows["client"] = pd.Series(usable[codes], index=rows.index, dtype=object)
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
    seen: np.ndarray
    """Every series key of the request, once (their ``seen_at`` is refreshed)."""


def plan(rows: pd.DataFrame, state: pd.DataFrame, columns: Sequence[str]) -> Plan:
    """Step 3 of the module docstring. ``state`` is the kept last point of (some of) the
    series, indexed by key (:data:`STATE_COLUMNS` but the key); ``columns`` every usage
    column of the batches (the mapped ones and the store's). The rows are ordered by series,
    time and point once, and read as numpy columns from then on: an export of 100,000 points
    makes no copy of its frame (each cost about 10 MB)."""
    codes, distinct = pd.factorize(rows["key"].to_numpy(dtype=object))  # codes per row
    keys = np.asarray(distinct, dtype=object)  # the one Python str per series
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
    return Plan(parts, refused, len(received_points), keys)


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
    names = _Cells.of(rows, order, columns)
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
        usage = names.usage(col["time"][mine], added[mine], mine)
        parts.append(MonthPart(str(this), usage, np.unique(col["point"][mine]), state))
    return parts


@dataclass(frozen=True)
class _Cells:
    """The rows' service, client and usage column as integer codes (in ``order``), for
    summing increments per cell without grouping text."""

    service: np.ndarray
    services: np.ndarray
    client: np.ndarray
    clients: np.ndarray
    column: np.ndarray
    columns: list[str]

    @staticmethod
    def of(rows: pd.DataFrame, order: np.ndarray, columns: Sequence[str]) -> _Cells:
        service, services = pd.factorize(rows["service"].to_numpy(dtype=object)[order],
                                          sort=True)  # fmt: skip
        client, clients = pd.factorize(rows["client"].to_numpy(dtype=object)[order], sort=True)
        column = pd.Index(list(columns)).get_indexer(rows["column"].to_numpy(dtype=object)[order])
        return _Cells(service, np.asarray(services, dtype=object), client,
                      np.asarray(clients, dtype=object), column, list(columns))  # fmt: skip

    def usage(self, time: np.ndarray, increment: np.ndarray, at: np.ndarray) -> pd.DataFrame:
        """Increments summed per (hour, service, client, column), one column per usage
        column, the cells in order of hour, service and client (``at``: the rows')."""
        if not len(at):
            return pd.DataFrame(columns=["window_start", "window_end", "service", "client",
                                         *self.columns])  # fmt: skip
        hour, service, client = time // HOUR_NS, self.service[at], self.client[at]
        by = np.lexsort((client, service, hour))
        new = np.ones(len(at), dtype=bool)
        new[1:] = ((hour[by][1:] != hour[by][:-1]) | (service[by][1:] != service[by][:-1])
                   | (client[by][1:] != client[by][:-1]))  # fmt: skip
        cell = np.empty(len(at), dtype=np.int64)
        cell[by] = np.cumsum(new) - 1
        first = by[new]
        width = len(self.columns)
        # pandas' grouped sum (compensated, in row order), as the cells' sums always were
        summed = pd.Series(increment).groupby(cell * width + self.column[at]).sum()
        values = np.zeros((len(first), width), dtype="float64")
        slots = summed.index.to_numpy()
        values[slots // width, slots % width] = summed.to_numpy()
        start = pd.to_datetime(hour[first] * HOUR_NS, utc=True)
        frame = pd.DataFrame({
            "window_start": start, "window_end": start + pd.Timedelta(hours=1),
            "service": self.services[service[first]], "client": self.clients[client[first]],
        })  # fmt: skip
        for number, name in enumerate(self.columns):
            frame[name] = values[:, number]
        return frame
