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

:func:`split` cuts the whole body this way before any data point is decoded, counting the
data points as it goes and stopping past a limit (:mod:`tenantcost.otlp_count` refuses the
export then): the points' spans are what it keeps, two integers a point.

Every byte of the body is decoded by protobuf exactly once, in the order of the body, so what
the parser refuses (a truncated field, a string that is no UTF-8) is refused as before, and
what it reads is what a whole decoding reads: repeated fields in wire order, a message field
seen twice merged, and the ``Metric.data`` oneof's rule (a field of another kind clears the
points gathered so far; two fields of the same kind add up). The body's structure was walked
already (:mod:`tenantcost.otlp_count`), within the limits, so this walk meets no surprise it
must bound.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tenantcost.otlp import DecodeError, Encoding, MetricPart

CHUNK_POINTS = 8_192
"""Data points decoded at once (about 2.5 MB of upb for points of a few attributes)."""
DATA_FIELDS = {5: "Gauge", 7: "Sum", 9: "Histogram", 10: "ExponentialHistogram", 11: "Summary"}
"""``Metric.data``: field number -> its message, whose field 1 is ``data_points``."""
NUMBER, HISTOGRAM = "number", "histogram"
LAYOUTS = {5: (NUMBER, 7, 8), 7: (NUMBER, 7, 8), 9: (HISTOGRAM, 9, 10), 10: (HISTOGRAM, 1, 10)}
"""``Metric.data`` field number -> its points' kind (``NumberDataPoint``, or a histogram's
point: ``count`` is field 4 and ``sum`` field 5 in both), their ``attributes`` and their
``flags`` field numbers (fields 2 and 3 are the start and the time in every kind)."""
MAX_STEPS = 64
"""Fields of one point read in lockstep at most (more: the chunk is read point by point)."""
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
        return _parts(memoryview(self.body), _Budget(None))


def split(body: bytes | bytearray, max_points: int) -> tuple[list[MetricPart], int]:
    """Every metric of the body (decoded without its data points) and the number of data
    points, counted in every kind of data; past ``max_points`` it stops and gives no part
    and ``max_points + 1``. Raises :class:`~tenantcost.otlp.DecodeError` where protobuf
    refuses a piece."""
    budget = _Budget(max_points)
    try:
        parts = list(_parts(memoryview(body), budget))
    except _Over:
        return [], max_points + 1
    return parts, budget.count


@dataclass
class _Budget:
    """Data points seen so far, and how many may be (None: no limit)."""

    limit: int | None
    count: int = 0

    def room(self) -> int | None:
        return None if self.limit is None else self.limit - self.count


class _Over(Exception):
    """More data points than the budget's limit."""


def _parts(view: memoryview, budget: _Budget) -> Iterator[MetricPart]:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb

    rest, resources = _cut(view, 0, len(view), 1)
    _decode(ExportMetricsServiceRequest, rest)
    for start, end in resources:
        rest, scopes = _cut(view, start, end, 2)
        resource = _decode(pb.ResourceMetrics, rest).resource
        for start, end in scopes:
            rest, metrics = _cut(view, start, end, 2)
            scope = _decode(pb.ScopeMetrics, rest).scope
            for start, end in metrics:
                yield _metric(view, start, end, resource, scope, budget)


def _metric(view: memoryview, start: int, end: int, resource: Any, scope: Any,
            budget: _Budget) -> MetricPart:  # fmt: skip
    """A metric decoded without its points, and its points' chunks (the oneof's rule)."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb

    stripped: list[bytes] = []
    kind, spans = 0, list[Span]()
    for number, wire, field_start, content_start, content_end in _fields(view, start, end):
        if wire != 2 or number not in DATA_FIELDS:
            stripped.append(bytes(view[field_start:content_end]))
            continue
        rest, entries = _cut(view, content_start, content_end, 1, whole=True,
                             room=budget.room())  # fmt: skip
        budget.count += len(entries)
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

    def __iter__(self) -> Iterator[PointChunk]:
        body = np.frombuffer(self.view, dtype=np.uint8)
        layout = LAYOUTS.get(_kind_number(self.container))
        for first in range(0, len(self.spans), CHUNK_POINTS):
            chunk = self.spans[first : first + CHUNK_POINTS]
            joined = b"".join([self.view[s:e] for s, e in _merged(chunk)])
            decoded = _decode(self.container, joined)
            # canonical: protobuf writes back exactly these bytes, so each attribute's bytes
            # on the wire are its serialization, and the wire's fields are what it read
            canonical = decoded.SerializeToString(deterministic=True) == joined
            yield PointChunk(decoded.data_points, self.view, body,
                             np.array(chunk, dtype=np.int64).reshape(-1, 2),
                             layout if canonical else None)  # fmt: skip


def _kind_number(container: Any) -> int:
    for number, name in DATA_FIELDS.items():
        if container is not None and container.DESCRIPTOR.name == name:
            return number
    return 0


@dataclass(frozen=True)
class PointChunk:
    """Decoded data points (a sequence of protobuf messages, read point by point), and
    their bytes on the wire, which :meth:`columns` reads whole when they are canonical."""

    points: Any
    view: memoryview
    body: np.ndarray
    """The whole body as ``uint8`` (no copy)."""
    spans: np.ndarray
    """``(n, 2)``: each point's entry in the body (tag, length and point)."""
    layout: tuple[str, int, int] | None
    """:data:`LAYOUTS`' entry, or None when the bytes are not canonical (or a Summary)."""

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.points)

    def columns(self, client_key: str) -> dict[str, Any] | None:
        """The points' fields as columns (as :func:`tenantcost.otlp.point_columns` reads
        them from the messages), or None where this reading does not apply."""
        if self.layout is None:
            return None
        return _columns(self.view, self.body, self.spans, self.layout, client_key)


def _columns(view: memoryview, body: np.ndarray, spans: np.ndarray,
             layout: tuple[str, int, int], client_key: str) -> dict[str, Any] | None:  # fmt: skip
    """Read canonical points from the wire in lockstep: each step reads one field of every
    point not at its end yet, with numpy, so no Python object is made per point but the
    attributes' bytes (the series' identity) and the client's text. None (the caller reads
    the messages) for a point of more than :data:`MAX_STEPS` fields or a field this reading
    does not know (a tag of two bytes, a group)."""
    kind, attributes, flags_field = layout
    n = len(spans)
    length, width = _varints(body, spans[:, 0] + 1)  # the entry's tag (1 byte), its length
    if length is None:
        return None
    pos = spans[:, 0] + 1 + width
    end = spans[:, 1]
    fixed = np.zeros((7, n), dtype=np.uint64)  # fixed64 fields 2..6
    present = np.zeros((7, n), dtype=bool)
    flags = np.zeros(n, dtype=np.uint64)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    active = np.flatnonzero(pos < end)
    for _ in range(MAX_STEPS + 1):
        if not len(active):
            break
        at = pos[active]
        tag = body[at].astype(np.int64)
        if (tag >= 0x80).any():
            return None
        field, wire = tag >> 3, tag & 7
        after = np.full(len(at), -1, dtype=np.int64)
        if (one := wire == 1).any():
            value = _fixed64(body, at[one] + 1)
            for number in range(2, 7):
                mine = field[one] == number
                if mine.any():
                    fixed[number, active[one][mine]] = value[mine]
                    present[number, active[one][mine]] = True
            after[one] = at[one] + 9
        five = wire == 5
        after[five] = at[five] + 5
        if (zero := wire == 0).any():
            value, width = _varints(body, at[zero] + 1)
            if value is None:
                return None
            mine = field[zero] == flags_field
            flags[active[zero][mine]] = value[mine]
            after[zero] = at[zero] + 1 + width
        if (two := wire == 2).any():
            size, width = _varints(body, at[two] + 1)
            if size is None:
                return None
            start = at[two] + 1 + width
            stop = start + size.astype(np.int64)
            mine = field[two] == attributes
            found.append((active[two][mine], start[mine], stop[mine]))
            after[two] = stop
        if (after < 0).any() or (after > end[active]).any():
            return None
        pos[active] = after
        active = active[after < end[active]]
    else:
        return None
    owner, start, stop = _in_order(found)
    columns: dict[str, Any] = {
        "start": fixed[2], "time": fixed[3], "flags": flags,
        "identity": _identities(body, owner, start, stop, n),
    }  # fmt: skip
    client = _clients(view, body, owner, start, stop, n, client_key)
    if client is None:
        return None
    columns["client"] = client
    if kind == NUMBER:
        columns.update(double=fixed[4].view(np.float64), double_set=present[4],
                       int=fixed[6].view(np.int64), int_set=present[6])  # fmt: skip
    else:
        columns.update(count=fixed[4], sum=fixed[5].view(np.float64), sum_set=present[5])
    return columns


def _in_order(
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The attributes found step by step, by point, each point's in wire order."""
    if not found:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    owner, start, stop = (np.concatenate([f[i] for f in found]) for i in range(3))
    order = np.argsort(owner, kind="stable")  # steps are in wire order within a point
    return owner[order], start[order], stop[order]


def _identities(body: np.ndarray, owner: np.ndarray, start: np.ndarray, stop: np.ndarray,
                n: int) -> tuple[bytes, list[int], list[int]]:  # fmt: skip
    """Each point's attributes' bytes joined by ``0x1f`` (:func:`tenantcost.otlp._identity`),
    gathered in one copy: the bytes, and each point's start and end in them."""
    first = np.ones(len(owner), dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    size = (stop - start) + ~first  # a separator before every attribute but a point's first
    total = int(size.sum())
    offset = np.cumsum(size) - size
    within = np.arange(total, dtype=np.int64) - np.repeat(offset, size)
    gathered = body[np.repeat(start - ~first, size) + within]
    gathered[offset[~first]] = 0x1F
    sizes = np.bincount(owner, weights=size, minlength=n).astype(np.int64)
    ends = np.cumsum(sizes)
    return gathered.tobytes(), (ends - sizes).tolist(), ends.tolist()


def _clients(view: memoryview, body: np.ndarray, owner: np.ndarray, start: np.ndarray,
             stop: np.ndarray, n: int, client_key: str) -> np.ndarray | None:  # fmt: skip
    """Each point's client: the string value of its first attribute named ``client_key``
    (None without one, or without a value); None (read the messages) for another kind
    of value (an integer, a boolean...)."""
    key = client_key.encode()
    prefix = np.frombuffer(b"\x0a" + _varint_bytes(len(key)) + key, dtype=np.uint8)
    clients = np.full(n, None, dtype=object)
    fits = np.flatnonzero(stop - start >= len(prefix))
    same = (body[start[fits, None] + np.arange(len(prefix))] == prefix).all(axis=1)
    named = fits[same]
    points, first = np.unique(owner[named], return_index=True)  # a point's first such
    named = named[first]
    at, end = start[named] + len(prefix), stop[named]
    valued = at < end
    points, at, end = points[valued], at[valued], end[valued]
    if not len(at):
        return clients
    if (body[at] != 0x12).any():  # the key then a field other than the value
        return None
    size, width = _varints(body, at + 1)
    if size is None:
        return None
    value = at + 1 + width
    if (value + size.astype(np.int64) != end).any():
        return None
    set_ = value < end  # an empty AnyValue holds no value: no client
    points, value, end = points[set_], value[set_], end[set_]
    if not len(value):
        return clients
    if (body[value] != 0x0A).any():  # not a string_value: read the messages
        return None
    size, width = _varints(body, value + 1)
    if size is None:
        return None
    text = value + 1 + width
    if (text + size.astype(np.int64) != end).any():
        return None
    clients[points] = _texts(view, body, text, end)
    return clients


def _texts(view: memoryview, body: np.ndarray, start: np.ndarray, end: np.ndarray) -> Any:
    """The UTF-8 strings at ``[start, end)`` (protobuf checked them), one Python string per
    distinct one (:data:`_CLIENTS`)."""
    return [_text(view, a, b) for a, b in zip(start.tolist(), end.tolist(), strict=True)]


def _text(view: memoryview, start: int, end: int) -> str:
    raw = view[start:end].tobytes()
    got = _CLIENTS.get(raw)
    if got is None:
        if len(_CLIENTS) > 100_000:
            _CLIENTS.clear()
        got = _CLIENTS[raw] = sys.intern(raw.decode("utf-8"))
    return got


_CLIENTS: dict[bytes, str] = {}
"""Client ids read so far, by their UTF-8 bytes (the same clients export every minute)."""


def _fixed64(body: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian 64-bit words at ``at``."""
    return np.ascontiguousarray(body[at[:, None] + np.arange(8)]).view("<u8").ravel()


def _varints(body: np.ndarray, at: np.ndarray) -> tuple[Any, np.ndarray]:
    """The varints at ``at`` and their widths; (None, _) if one does not end within 10
    bytes of the body."""
    first = body[at]
    if (first < 0x80).all():  # most tags, lengths and flags
        return first.astype(np.uint64), np.ones(len(at), dtype=np.int64)
    reach = np.minimum(at[:, None] + np.arange(10), len(body) - 1)
    raw = body[reach]
    ends = raw < 0x80
    width = ends.argmax(axis=1) + 1
    if not ends[np.arange(len(at)), width - 1].all():
        return None, width
    shift = (7 * np.arange(10)).astype(np.uint64)
    part = (raw & 0x7F).astype(np.uint64) << shift
    part[np.arange(10) >= width[:, None]] = 0
    return part.sum(axis=1, dtype=np.uint64), width.astype(np.int64)


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
    view: memoryview,
    start: int,
    end: int,
    number: int,
    *,
    whole: bool = False,
    room: int | None = None,
) -> tuple[bytes, list[Span]]:
    """The bytes of a message's fields but field ``number`` (length-delimited), and that
    field's spans: their contents, or (``whole``) the entire fields, tag included; more
    than ``room`` spans raise :class:`_Over` (the count stops there)."""
    rest: list[bytes] = []
    spans: list[Span] = []
    for found, wire, field_start, content_start, content_end in _fields(view, start, end):
        if found == number and wire == 2:
            spans.append((field_start, content_end) if whole else (content_start, content_end))
            if room is not None and len(spans) > room:
                raise _Over()
        else:
            rest.append(bytes(view[field_start:content_end]))
    return b"".join(rest), spans


def _fields(view: memoryview, at: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each field of a message: number, wire type, start, content start and content end
    (a varint of one byte, most tags and lengths, is read inline)."""
    try:
        while at < end:
            field_start = at
            key = view[at]
            if key < 0x80:
                at += 1
            else:
                key, at = _varint(view, at)
            wire = key & 7
            if wire == 0:
                _, content_end = _varint(view, at)
            elif wire == 1:
                content_end = at + 8
            elif wire == 5:
                content_end = at + 4
            elif wire == 2:
                length = view[at]
                if length < 0x80:
                    at += 1
                else:
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
