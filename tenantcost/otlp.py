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
  not seen for 48 hours: its kept point has expired);
* a negative increment (a delta below 0; a cumulative value below the previous one without
  a new start) is refused, and still becomes the series' last point, as does a point refused
  later for a closed month: the next point then adds only what is new, in its own month.

Each increment goes to the UTC hour of its point's time: what a cumulative series counted
since its previous point lands in that hour, so usage near an hour boundary can be counted
in the next hour, by at most one export interval.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from tenantcost.client_id import bad_client_ids, client_id_problem
from tenantcost.config.otlp import OtlpSettings, ValueKind
from tenantcost.limits import MAX_USAGE_VALUE

HOUR_NS = 3_600_000_000_000
MAX_TIME_NS = 2**63 - 1
"""Times are kept as int64 nanoseconds (to the year 2262); a later one is refused."""
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


def points(request: Any, settings: OtlpSettings) -> Points:
    """Flatten a decoded request (see the module docstring, step 2)."""
    builder = _Builder(settings)
    for resource_metrics in request.resource_metrics:
        resource = resource_metrics.resource
        service = _text(resource.attributes, settings.service_attribute)
        identity = resource.SerializeToString(deterministic=True)
        for scope_metrics in resource_metrics.scope_metrics:
            prefix = identity + b"\x00" + scope_metrics.scope.SerializeToString(deterministic=True)
            for metric in scope_metrics.metrics:
                builder.add(prefix, service, metric)
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
    count: int = 0
    blocks: list[pd.DataFrame] = field(default_factory=list)
    refused: list[pd.DataFrame] = field(default_factory=list)

    def refuse(self, ids: np.ndarray, reason: str) -> None:
        if len(ids):
            self.refused.append(pd.DataFrame({"point": ids, "reason": reason}))

    def add(self, prefix: bytes, service: str | None, metric: Any) -> None:
        kind = metric.WhichOneof("data")
        data = getattr(metric, kind) if kind is not None else None
        found = list(data.data_points) if data is not None else []
        ids = np.arange(self.count, self.count + len(found), dtype="int64")
        self.count += len(found)
        columns = self.settings.columns_of(metric.name)
        reason = _metric_refusal(metric.name, kind, data, bool(columns))
        if reason is None:
            reason = _service_refusal(service, self.settings.service_attribute)
        if reason is not None:
            self.refuse(ids, reason)
            return
        assert data is not None
        common = _common(found, self.settings.client_attribute)
        common["cumulative"] = data.aggregation_temporality == CUMULATIVE
        common["service"] = service
        for column, value in columns:
            self.column(ids, prefix + metric.name.encode(), kind or "", found, common,
                        column, value)  # fmt: skip

    def column(self, ids: np.ndarray, prefix: bytes, kind: str, found: list[Any],
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
            (block["time"] > MAX_TIME_NS, "time_unix_nano is after the year 2262"),
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


def _common(found: list[Any], client_attribute: str) -> dict[str, Any]:
    """The columns every usage column of a metric shares, read from its points."""
    return {
        "start": np.array([p.start_time_unix_nano for p in found], dtype="uint64"),
        "time": np.array([p.time_unix_nano for p in found], dtype="uint64"),
        "flags": np.array([p.flags for p in found], dtype="uint32"),
        "client": [_text(p.attributes, client_attribute) for p in found],
        "identity": [_identity(p.attributes) for p in found],
    }


def _values(found: list[Any], kind: str, value: ValueKind) -> np.ndarray:
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
    client = rows["client"]
    missing = client.isna().to_numpy()
    if missing.any():
        points = rows["point"].to_numpy()[missing]
        notes.append(f"data points without a '{attribute}' attribute: {len(np.unique(points))}, "
                     "counted as usage without a client")  # fmt: skip
    filled = client.where(~missing, "").astype(object)
    bad = bad_client_ids(filled).to_numpy()
    if bad.any():
        first = client_id_problem(str(filled[bad].iloc[0])) or "refused"
        points = rows["point"].to_numpy()[bad]
        notes.append(f"data points whose '{attribute}' the store refuses as a client id "
                     f"({first}): {len(np.unique(points))}, counted without a client")  # fmt: skip
    rows = rows.assign(client=filled.where(~bad, "").astype(str))
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
    column of the batches (the mapped ones and the store's)."""
    ordered = rows.sort_values(["key", "time", "point"], kind="mergesort")
    joined = ordered.assign(**_kept_points(ordered["key"], state))
    has_state = joined["s_has"].to_numpy()
    s_time = joined["s_time"].to_numpy()
    times = joined["time"].to_numpy()
    same_key = (joined["key"] == joined["key"].shift(1)).to_numpy()
    earlier = np.where(same_key, np.roll(times, 1), -1)
    received = (times <= s_time) | (same_key & (times == earlier))
    kept = joined[~received]
    increment = _increments(kept, has_state[~received])
    negative = increment < 0
    over = increment > MAX_USAGE_VALUE
    refused = pd.concat([
        pd.DataFrame({"point": kept["point"].to_numpy()[negative],
                      "reason": "a negative increment (a delta below 0, or a cumulative value "
                                "below the previous one without a new start_time_unix_nano)"}),
        pd.DataFrame({"point": kept["point"].to_numpy()[over],
                      "reason": f"an increment over {MAX_USAGE_VALUE:g} (a corrupt counter?)"}),
    ], ignore_index=True)  # fmt: skip
    usable = kept.assign(increment=increment)[~negative & ~over]
    parts = _months(kept, usable, columns)
    received_points = np.setdiff1d(joined["point"].to_numpy()[received], kept["point"].to_numpy())
    return Plan(parts, refused, len(received_points), sorted(set(rows["key"])))


def _kept_points(keys: pd.Series, state: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each row's series' kept point (``s_start``, ``s_time``, ``s_value``; -1 and 0 without
    one, ``s_has`` False), by position: a join would turn the int64 nanoseconds into floats
    wherever a series has none, and 2**53 ns is only 104 days."""
    at = state.index.get_indexer(keys.to_numpy())
    has = at >= 0
    safe = np.where(has, at, 0)

    def column(name: str, dtype: str, missing: float) -> np.ndarray:
        values = state[name].to_numpy(dtype=dtype)
        return np.where(has, values[safe] if len(values) else missing, missing).astype(dtype)

    return {
        "s_has": has,
        "s_start": column("start", "int64", -1),
        "s_time": column("time", "int64", -1),
        "s_value": column("value", "float64", 0.0),
    }


def _increments(kept: pd.DataFrame, has_state: np.ndarray) -> np.ndarray:
    """Each kept point's increment: deltas their value; cumulative points their difference
    from the previous kept point of their series (or the stored one) with the same start,
    else (a reset, a new series) their value."""
    values = kept["value"].to_numpy()
    starts = kept["start"].to_numpy()
    keys = kept["key"].to_numpy()
    follows = np.zeros(len(kept), dtype=bool)
    follows[1:] = keys[1:] == keys[:-1]
    prev_value = np.where(follows, np.roll(values, 1), kept["s_value"].to_numpy())
    prev_start = np.where(follows, np.roll(starts, 1), kept["s_start"].to_numpy())
    baseline = (follows | has_state) & (prev_start == starts)
    cumulative = kept["cumulative"].to_numpy(dtype=bool)
    return np.where(cumulative & baseline, values - np.nan_to_num(prev_value), values)


def _months(kept: pd.DataFrame, usable: pd.DataFrame, columns: Sequence[str]) -> list[MonthPart]:
    """Split the kept points by the calendar month of their time (numpy months: no text)."""
    month_kept = kept["time"].to_numpy().astype("datetime64[ns]").astype("datetime64[M]")
    month_usable = usable["time"].to_numpy().astype("datetime64[ns]").astype("datetime64[M]")
    parts = []
    for month in np.unique(month_kept):  # one iteration per month
        in_month = kept[month_kept == month]
        last = in_month.drop_duplicates("key", keep="last")[STATE_COLUMNS]
        mine = month_usable == month
        usage = _usage(usable[mine], columns)
        parts.append(MonthPart(str(month), usage, np.unique(usable["point"].to_numpy()[mine]),
                               last.reset_index(drop=True)))  # fmt: skip
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
