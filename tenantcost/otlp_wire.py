"""A protobuf export decoded metric by metric, its data points a chunk at a time.

Why: ``ExportMetricsServiceRequest.ParseFromString`` materialises the whole export at once
(about 290 bytes a data point in upb, 29 MiB for 100,000 points of two attributes), and the
Python objects :func:`tenantcost.otlp.points` reads from it come on top: an accepted export
at the default ``--max-records`` grew the server by about 150 MiB. So the body is split on
the wire format instead, and each piece is decoded by protobuf itself when it is read:

* the request, each ``ResourceMetrics``, each ``ScopeMetrics`` and each ``Metric`` are
  decoded without their repeated children (those fields are cut out of their bytes), which
  gives the resource, the scope and the metric's name, kind, temporality and monotonicity;
* a metric's data points are decoded :data:`CHUNK_POINTS` at a time, as the ``data_points``
  of their kind's message (``Sum``, ``Histogram``...), and released before the next chunk.

Every byte of the body is decoded by protobuf exactly once, in the order of the body, so what
the parser refuses (a truncated field, a string that is no UTF-8) is refused as before, and
what it reads is what a whole decoding reads: repeated fields in wire order, a message field
seen twice merged, and the ``Metric.data`` oneof's rule (a field of another kind clears the
points gathered so far; two fields of the same kind add up). The body's structure was walked
already (:mod:`tenantcost.otlp_count`), within the limits, so this walk meets no surprise it
must bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tenantcost.otlp import DecodeError, Encoding, MetricPart

CHUNK_POINTS = 8_192
"""Data points decoded at once (about 2.5 MB of upb for points of a few attributes)."""
DATA_FIELDS = {5: "Gauge", 7: "Sum", 9: "Histogram", 10: "ExponentialHistogram", 11: "Summary"}
"""``Metric.data``: field number -> its message, whose field 1 is ``data_points``."""
Span = tuple[int, int]


def _problem(exc: Exception) -> DecodeError:
    return DecodeError(f"not an OTLP ExportMetricsServiceRequest ({Encoding.PROTOBUF}): {exc}")


@dataclass(frozen=True)
class WireExport:
    """A protobuf body, iterated as :class:`~tenantcost.otlp.MetricPart` (what
    :func:`tenantcost.otlp.points` reads); raises :class:`~tenantcost.otlp.DecodeError`
    where protobuf refuses a piece."""

    body: bytes | bytearray

    def __iter__(self) -> Iterator[MetricPart]:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )
        from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb

        view = memoryview(self.body)
        rest, resources = _cut(view, 0, len(view), 1)
        _decode(ExportMetricsServiceRequest, rest)
        for start, end in resources:
            rest, scopes = _cut(view, start, end, 2)
            resource = _decode(pb.ResourceMetrics, rest).resource
            for start, end in scopes:
                rest, metrics = _cut(view, start, end, 2)
                scope = _decode(pb.ScopeMetrics, rest).scope
                for start, end in metrics:
                    yield _metric(view, start, end, resource, scope)


def _metric(view: memoryview, start: int, end: int, resource: Any, scope: Any) -> MetricPart:
    """A metric decoded without its points, and its points' chunks (the oneof's rule)."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb

    stripped: list[bytes] = []
    kind, spans = 0, list[Span]()
    for number, wire, field_start, content_start, content_end in _fields(view, start, end):
        if wire != 2 or number not in DATA_FIELDS:
            stripped.append(bytes(view[field_start:content_end]))
            continue
        rest, entries = _cut(view, content_start, content_end, 1, whole=True)
        stripped.append(_field(number, rest))
        if number != kind:  # another kind of data: the oneof drops the points so far
            kind, spans = number, []
        spans.extend(entries)
    metric = _decode(pb.Metric, b"".join(stripped))
    container = getattr(pb, DATA_FIELDS[kind]) if kind else None
    return MetricPart(resource, scope, metric, _Chunks(view, container, spans))


@dataclass(frozen=True)
class _Chunks:
    """A metric's data points, decoded :data:`CHUNK_POINTS` at a time when iterated."""

    view: memoryview
    container: Any
    spans: list[Span]

    def __len__(self) -> int:
        return len(self.spans)

    def __iter__(self) -> Iterator[Any]:
        for first in range(0, len(self.spans), CHUNK_POINTS):
            chunk = self.spans[first : first + CHUNK_POINTS]
            joined = b"".join([self.view[s:e] for s, e in _merged(chunk)])
            yield _decode(self.container, joined).data_points


def _merged(spans: list[Span]) -> list[Span]:
    """Adjacent spans as one (a metric's points are usually one run of bytes)."""
    merged: list[Span] = []
    for start, end in spans:
        if merged and merged[-1][1] == start:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _decode(message_type: Any, data: bytes) -> Any:
    from google.protobuf.message import DecodeError as ProtobufError

    message = message_type()
    try:
        message.ParseFromString(data)
    except (ProtobufError, RecursionError) as exc:
        raise _problem(exc) from None
    return message


def _cut(
    view: memoryview, start: int, end: int, number: int, *, whole: bool = False
) -> tuple[bytes, list[Span]]:
    """The bytes of a message's fields but field ``number`` (length-delimited), and that
    field's spans: their contents, or (``whole``) the entire fields, tag included."""
    rest: list[bytes] = []
    spans: list[Span] = []
    for found, wire, field_start, content_start, content_end in _fields(view, start, end):
        if found == number and wire == 2:
            spans.append((field_start, content_end) if whole else (content_start, content_end))
        else:
            rest.append(bytes(view[field_start:content_end]))
    return b"".join(rest), spans


def _fields(view: memoryview, at: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each field of a message: number, wire type, start, content start and content end."""
    try:
        while at < end:
            field_start = at
            key, at = _varint(view, at)
            wire = key & 7
            if wire == 0:
                _, content_end = _varint(view, at)
            elif wire == 1:
                content_end = at + 8
            elif wire == 5:
                content_end = at + 4
            elif wire == 2:
                length, at = _varint(view, at)
                content_end = at + length
            else:
                raise _problem(ValueError(f"wire type {wire}"))
            if content_end > end:
                raise IndexError(content_end)
            yield key >> 3, wire, field_start, at, content_end
            at = content_end
    except IndexError:
        raise _problem(ValueError("truncated")) from None


def _varint(view: memoryview, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = view[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise _problem(ValueError("a varint is too long"))


def _field(number: int, content: bytes) -> bytes:
    """A length-delimited field's bytes (tag, length, content)."""
    return _varint_bytes(number << 3 | 2) + _varint_bytes(len(content)) + content


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
