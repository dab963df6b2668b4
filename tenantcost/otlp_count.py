"""Count an OTLP export's data points before it is decoded, and refuse it past the limit.

Why: decoding materialises every message of a body at once. An ``ExportMetricsServiceRequest``
holding empty data points costs 2 bytes of protobuf (3 of JSON) per point on the wire and
about 80 bytes (protobuf, upb) or 70 (a Python dict) once decoded, and several hundred more
once :func:`tenantcost.otlp.points` reads them: 16 million points fit in 31 KB of gzip under
``--max-body``, and took the server's memory before any limit applied. So the body is walked
first, counting without building anything, and the walk stops as soon as a limit is passed:

* **data points**: at most ``--max-records`` (the usage API's limit of records per batch:
  an export is one batch per month), counted in every ``gauge``, ``sum``, ``histogram``,
  ``exponential_histogram`` and ``summary`` of every metric;
* **parts**: at most :data:`MAX_PARTS` messages of any kind (protobuf) or values of any kind
  (JSON): resources, scopes, metrics, points, attributes and their values, exemplars... An
  export of few points with millions of empty attributes costs as much memory as millions of
  points.

Passing either is :class:`TooLarge` (413, not retried). A protobuf export within the limits
is then decoded a metric and a chunk of points at a time (:mod:`tenantcost.otlp_wire`),
never whole. The walk reads structure only: a
body it cannot walk is a :class:`~tenantcost.otlp.DecodeError` (400), like one the decoder
refuses; one it can walk may still be refused by the decoder.

**A small protobuf body is not walked.** Every message but the request costs at least two
bytes on the wire (its tag and its length), so a body of at most ``2 x MAX_PARTS`` bytes
(2,000,000) cannot hold more than :data:`MAX_PARTS` messages: the parts limit holds without
counting them. Its data points are then counted by the cut of the body into metrics and
point spans that decoding needs anyway (:func:`tenantcost.otlp_wire.split`, which stops past
the limit, before any point is decoded), and a nesting deeper than protobuf's limit (100) is
refused by the decoder (400). A 20,000-point export of two attributes a point is 1.8 MB: the
walk was about 40 % of its decoding.

**Protobuf** is walked on the wire format with the messages' descriptors: each
length-delimited field that is a message is entered and counted, every other field is skipped
by its length. The walk is Python, about 2 microseconds per message (0.5 to 1 s for a
100,000-point export), and stops at the limits. **JSON** has no such walk at C speed (a
token walk in Python took 6 s for 20 MB), so its values are bounded first by counting commas
and brackets (``bytes.count``: every value but a container's first follows a comma), which
bounds what ``json.loads`` builds; the loaded document's points are then counted per metric
(``len`` of each ``dataPoints`` list) before any protobuf message is made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from tenantcost.otlp import DecodeError, Encoding, parse_document
from tenantcost.otlp_wire import split

MAX_PARTS = {Encoding.PROTOBUF: 1_000_000, Encoding.JSON: 500_000}
"""Largest number of messages (protobuf) or values (JSON) in one export. A decoded empty
message is about 80 bytes (upb), a loaded JSON value up to 72 (an empty dict) and the message
built from it 80 more: 80 MB at worst either way. A protobuf export at the default
``--max-records`` may hold ten messages per data point (a point and four attributes); JSON,
being loaded whole, about 35,000 points of a few attributes: large exports use protobuf,
the exporters' default."""
MAX_DEPTH = 100
"""Deepest nesting walked (protobuf's own decoder refuses deeper messages too)."""
DATA_KINDS = ("gauge", "sum", "histogram", "exponential_histogram", "summary")
"""The ``Metric.data`` oneof: each kind holds its points in ``data_points``."""
_JSON_KINDS = frozenset({*DATA_KINDS, "exponentialHistogram"})
_JSON_POINTS = frozenset({"dataPoints", "data_points"})
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+|"')
"""A string, punctuation, a literal (number, true, false, null), or an unterminated string's
quote: every character but whitespace is in a token."""


class TooLarge(ValueError):
    """An export over a limit (answered 413): the message says which and what to do."""


@dataclass(frozen=True)
class Count:
    """What the walk saw (both at most their limit + 1: the walk stops there)."""

    points: int
    parts: int


def decode(body: bytes | bytearray, encoding: Encoding, max_points: int) -> Any:
    """What :func:`tenantcost.otlp.points` reads of ``body`` once its size is known to be
    within the limits (protobuf: its metrics, whose points are decoded a chunk at a time as
    they are read; JSON: the decoded ``ExportMetricsServiceRequest``); :class:`TooLarge` or
    :class:`~tenantcost.otlp.DecodeError` otherwise."""
    if encoding is Encoding.PROTOBUF:
        if len(body) > 2 * MAX_PARTS[encoding]:  # else it cannot hold more messages
            _check(_ProtobufWalk(body, max_points).run(), encoding, max_points)
        parts, count = split(body, max_points)  # metrics and point spans: no point decoded
        _check(Count(count, 0), encoding, max_points)
        return parts
    _check(Count(0, json_parts(body)), encoding, max_points)
    try:
        document = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"not an OTLP ExportMetricsServiceRequest ({encoding}): {exc}") from None
    _check(Count(json_points(document), 0), encoding, max_points)
    if b"\\u" in body:  # only an escape can carry a lone surrogate past the UTF-8 decode
        _refuse_lone_surrogates(document)
    return parse_document(document)


def _refuse_lone_surrogates(document: Any) -> None:
    """JSON lets ``"\\ud800"`` through as a string holding half a UTF-16 pair, which is no
    Unicode text: protobuf's parser fails on it with an internal error in a field name, so
    the export is refused here, as a decode error (400), before it reaches the parser."""
    try:
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise DecodeError(
            f"not an OTLP ExportMetricsServiceRequest ({Encoding.JSON}): a string holds an "
            "unpaired UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair)"
        ) from None


def _check(count: Count, encoding: Encoding, max_points: int) -> None:
    if count.points > max_points:
        raise TooLarge(
            f"the export holds more than {max_points} data points, over this service's limit "
            f"of {max_points} per export (tenantcost serve --max-records): export more often, "
            "or in smaller batches (a Collector's batch processor: send_batch_max_size)"
        )
    limit = MAX_PARTS[encoding]
    if count.parts > limit:
        raise TooLarge(
            f"the export holds more than {limit} {_PART_NAMES[encoding]}, over this "
            f"service's limit of {limit} per export: export fewer points or attributes "
            "at a time"
        )


_PART_NAMES = {
    Encoding.PROTOBUF: "protobuf messages",
    Encoding.JSON: "JSON values (counted by their commas and brackets)",
}


@dataclass(frozen=True)
class _Shape:
    """A message type as the walk sees it: its message fields' shapes by number, and the
    field numbers whose entries are data points."""

    children: dict[int, _Shape]
    points: frozenset[int]


@cache
def _request_shape() -> _Shape:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    shapes: dict[str, _Shape] = {}
    kinds = {kind.replace("_", "") for kind in DATA_KINDS}

    def shape(descriptor: Any) -> _Shape:
        name = descriptor.full_name
        if name not in shapes:  # recursive types (AnyValue, KeyValueList) share one shape
            points = frozenset(f.number for f in descriptor.fields if f.name == "data_points"
                               and descriptor.name.lower() in kinds)  # fmt: skip
            shapes[name] = _Shape({}, points)
            for f in descriptor.fields:
                if f.message_type is not None:
                    shapes[name].children[f.number] = shape(f.message_type)
        return shapes[name]

    return shape(ExportMetricsServiceRequest.DESCRIPTOR)


class _ProtobufWalk:
    """The wire-format walk (varints read inline: it runs once per field)."""

    def __init__(self, body: bytes | bytearray, max_points: int) -> None:
        self.body = memoryview(body)
        self.max_points = max_points
        self.points = 0
        self.parts = 0

    def run(self) -> Count:
        try:
            self._message(0, len(self.body), _request_shape(), 0)
        except _Stop:
            pass
        except IndexError:
            raise DecodeError("not an OTLP ExportMetricsServiceRequest "
                              "(application/x-protobuf): truncated") from None  # fmt: skip
        return Count(self.points, self.parts)

    def _varint(self, at: int) -> tuple[int, int]:
        body, value, shift = self.body, 0, 0
        while True:
            byte = body[at]
            at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value, at
            shift += 7
            if shift > 63:
                raise DecodeError("not an OTLP ExportMetricsServiceRequest "
                                  "(application/x-protobuf): a varint is too long")  # fmt: skip

    def _message(self, at: int, end: int, shape: _Shape, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise DecodeError(f"not an OTLP ExportMetricsServiceRequest: nested deeper than "
                              f"{MAX_DEPTH} messages")  # fmt: skip
        children, points = shape.children, shape.points
        while at < end:
            key, at = self._varint(at)
            number, wire = key >> 3, key & 7
            if wire == 0:
                _, at = self._varint(at)
            elif wire == 1:
                at += 8
            elif wire == 5:
                at += 4
            elif wire == 2:
                length, at = self._varint(at)
                child = children.get(number)
                if child is not None:
                    self.parts += 1
                    if number in points:
                        self.points += 1
                        if self.points > self.max_points:
                            raise _Stop()
                    if self.parts > MAX_PARTS[Encoding.PROTOBUF]:
                        raise _Stop()
                    self._message(at, at + length, child, depth + 1)
                at += length
            else:  # groups (3, 4) are not in OTLP; 6 and 7 do not exist
                raise DecodeError(f"not an OTLP ExportMetricsServiceRequest "
                                  f"(application/x-protobuf): wire type {wire}")  # fmt: skip
            if at > end:
                raise IndexError(at)


class _Stop(Exception):
    """A limit is passed: the walk stops there."""


def json_parts(body: bytes | bytearray) -> int:
    """An upper bound of the values of a JSON body, at C speed: every value but the first
    of a container follows a comma, and there is a first value per container and one for
    the document (a comma or bracket inside a string is counted too: a bound, not a count)."""
    return body.count(b",") + body.count(b"{") + body.count(b"[") + 1


def json_points(document: Any) -> int:
    """The data points of a JSON export once loaded (a walk per metric, not per point;
    lowerCamelCase and original field names, as the decoder reads them)."""
    count = 0
    for resource in _items(document, "resourceMetrics", "resource_metrics"):
        for scope in _items(resource, "scopeMetrics", "scope_metrics"):
            for metric in _items(scope, "metrics", "metrics"):
                if not isinstance(metric, dict):
                    continue
                for kind in _JSON_KINDS:
                    count += len(_items(metric.get(kind), "dataPoints", "data_points"))
    return count


def _items(container: Any, camel: str, snake: str) -> list[Any]:
    if not isinstance(container, dict):
        return []
    found = [container.get(camel), container.get(snake) if snake != camel else None]
    return [item for part in found if isinstance(part, list) for item in part]
