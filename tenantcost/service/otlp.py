"""``POST /v1/metrics``: OpenTelemetry exporters post usage here (OTLP/HTTP, metrics).

The body is an ``ExportMetricsServiceRequest``, protobuf (``application/x-protobuf``) or the
OTLP JSON mapping (``application/json``), optionally gzip-compressed (``Content-Encoding:
gzip``, which exporters may use). It is decoded by :mod:`tenantcost.otlp` with the settings
file's ``otlp:`` section, and stored by :mod:`tenantcost.store.otlp_series`: one ``sum`` batch
per calendar month, through the same usage path and checks as ``ingest usage``, and the
Gauge points of the columns the store declares gauges as one sample batch per month.

The answers follow the OTLP/HTTP specification, in the request's encoding:

* **200** with an ``ExportMetricsServiceResponse``; its ``partial_success`` counts the data
  points refused (``rejected_data_points``) and says why (``error_message``: each reason with
  its count; also the notes on points counted without a client, or received already);
* **400** with a ``google.rpc.Status`` for a body that is no such request (not retried);
* **401/403** (the usage API's bearer tokens: the ``ingest`` role may post), **413** over the
  body limit (``serve --max-body``, also for a gzip body once inflated, every member of it) or
  over the limit of data points (``serve --max-records``, counted before the body is decoded:
  :mod:`tenantcost.otlp_count`), **415** for another content type or encoding;
* **503** with ``Retry-After`` when the store stays locked (retryable, as only 429, 502, 503
  and 504 are).
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tenantcost.service.auth import CurrentPrincipal, Denied, authorize
from tenantcost.service.permissions import Action, Principal

router = APIRouter(tags=["usage"])
log = logging.getLogger("tenantcost.service.otlp")
RETRY_AFTER = "5"
_ONE_AT_A_TIME = threading.Lock()
"""A process stores one export at a time (``serve --workers N`` for N at once): its threads
share one interpreter lock, and two exports interleaved took longer than one after the other
(SQLite and DuckDB release the lock for each statement and wait to take it back)."""
MAX_REASONS = 10
"""Reasons listed in ``error_message`` (the rest are counted)."""
INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, UNAVAILABLE = 3, 16, 7, 14
"""``google.rpc.Code`` values of the error bodies."""


class _Failure(Exception):
    """An answer other than 200: its HTTP status, a ``google.rpc.Code`` and the message."""

    def __init__(self, status: int, code: int, message: str, **headers: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


@router.post(
    "/v1/metrics",
    summary="OTLP/HTTP metrics export (usage from OpenTelemetry)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                "application/json": {"schema": {"type": "object"}},
            },
        }
    },
)
async def post_metrics(request: Request, principal: CurrentPrincipal) -> Response:
    """An ``ExportMetricsServiceRequest``; the answer an ``ExportMetricsServiceResponse``."""
    from starlette.concurrency import run_in_threadpool

    from tenantcost.otlp import Encoding

    protobuf = _media_type(request) == Encoding.PROTOBUF.value
    encoding = Encoding.PROTOBUF if protobuf else Encoding.JSON  # errors readable by curl
    try:
        allowed = _allowed(request, principal)
        encoding = _encoding(request)
        received = time.time_ns()
        body = await request.body()  # under the byte limit (BodyLimit)
        # off the event loop: inflating, counting and decoding take CPU while reads wait
        return await run_in_threadpool(_export, request, allowed, body, encoding, received)
    except _Failure as failure:
        return _status_response(failure, encoding)


def _allowed(request: Request, principal: Any) -> Principal:
    """The usage API's rule (the ingest role may post), answered as a ``google.rpc.Status``.
    Only a bearer token counts here: a browser session does not export metrics (and a
    cross-site form could otherwise post with its cookie)."""
    if "authorization" not in request.headers:
        principal = None
    try:
        return authorize(request, principal, Action.INGEST_USAGE)
    except Denied as denied:
        code = UNAUTHENTICATED if denied.status_code == 401 else PERMISSION_DENIED
        raise _Failure(denied.status_code, code, str(denied.detail),
                       **(denied.headers or {})) from None  # fmt: skip


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _encoding(request: Request) -> Any:
    from tenantcost.otlp import Encoding

    media = _media_type(request)
    for encoding in Encoding:
        if media == encoding.value:
            return encoding
    raise _Failure(415, INVALID_ARGUMENT, f"unsupported content type '{media}': OTLP/HTTP "
                   "bodies are application/x-protobuf or application/json")  # fmt: skip


def _inflate(request: Request, body: bytes | bytearray) -> bytes | bytearray:
    """The body, gunzipped if it says so, never inflated beyond the service's byte limit.
    Every gzip member is inflated, one after the other (``gzip -c a; gzip -c b`` is one
    stream, as HTTP's gzip coding allows); what follows a member and is no member is 400."""
    coding = request.headers.get("content-encoding", "identity").strip().lower()
    if coding in ("", "identity"):
        return body
    if coding != "gzip":
        raise _Failure(415, INVALID_ARGUMENT, f"unsupported Content-Encoding '{coding}' "
                       "(gzip or none)")  # fmt: skip
    limit = request.app.state.settings.max_body
    inflated = bytearray()
    rest = body
    while rest:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            inflated += inflater.decompress(rest, limit + 1 - len(inflated))
        except zlib.error as exc:
            raise _Failure(400, INVALID_ARGUMENT, f"the gzip body does not inflate (member "
                           f"at byte {len(body) - len(rest)}): {exc}") from None  # fmt: skip
        if len(inflated) > limit:
            raise _Failure(413, INVALID_ARGUMENT, f"the inflated body is over this service's "
                           f"limit of {limit} bytes (tenantcost serve --max-body)")  # fmt: skip
        if not inflater.eof:
            raise _Failure(400, INVALID_ARGUMENT, "the gzip body is truncated (its last "
                           "member does not end)")  # fmt: skip
        rest = inflater.unused_data
    return inflated  # not copied into bytes: an export's points are read from it


def _export(
    request: Request,
    principal: Principal,
    body: bytes | bytearray,
    encoding: Any,
    received: int,
) -> Response:
    store = request.app.state.store
    if store is None:
        raise _Failure(503, UNAVAILABLE, "the service has no data directory: start it with "
                       "--data DIR", **{"Retry-After": "60"})  # fmt: skip
    with _ONE_AT_A_TIME:
        return _store_export(request, principal, _inflate(request, body), encoding, received)


def _store_export(
    request: Request,
    principal: Principal,
    body: bytes | bytearray,
    encoding: Any,
    received: int,
) -> Response:
    from datetime import timedelta

    from tenantcost.otlp import DecodeError, points
    from tenantcost.otlp_count import TooLarge, decode
    from tenantcost.store.lock import StoreLocked
    from tenantcost.store.otlp_series import ingest_points
    from tenantcost.store.usage_metrics import stored_gauges

    settings, store = request.app.state.settings, request.app.state.store
    with store.engine.connect() as conn:
        gauges = stored_gauges(conn)  # the columns that take a Gauge's levels
    try:
        export = decode(body, encoding, settings.max_records)
        del body  # a protobuf export holds it until its points are read; JSON is decoded
        found = points(export, settings.store.otlp, received=received, gauges=gauges)
    except DecodeError as exc:
        raise _Failure(400, INVALID_ARGUMENT, str(exc)) from None
    except TooLarge as exc:
        raise _Failure(413, INVALID_ARGUMENT, str(exc)) from None
    del export  # its points are read: free it before the batch
    try:
        outcome = ingest_points(
            store,
            found,
            settings.store.otlp.counter_columns,
            actor=principal.actor,
            origin=f"POST /v1/metrics ({principal.actor})",
            wait=settings.ingest_wait,
            expiry=timedelta(hours=settings.store.otlp.series_expiry_hours),
        )
    except StoreLocked as exc:
        raise _Failure(503, UNAVAILABLE, str(exc), **{"Retry-After": RETRY_AFTER}) from None
    return _response(outcome, found.notes, encoding)


def _response(outcome: Any, notes: tuple[str, ...], encoding: Any) -> Response:
    """200 with the ``ExportMetricsServiceResponse`` (``partial_success`` when a point was
    refused, or there is something to say)."""
    import pandas as pd
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceResponse,
    )

    from tenantcost.store.otlp_series import rejected_points

    rejected = rejected_points(outcome)
    refused = pd.concat(outcome.refused, ignore_index=True).drop_duplicates()
    counts = refused.groupby("reason", sort=False)["point"].nunique()
    lines = [f"{_points(n)} refused: {reason}" for reason, n in counts.items()]
    if len(lines) > MAX_REASONS:
        lines = [*lines[:MAX_REASONS], f"and {len(lines) - MAX_REASONS} other reasons"]
    if outcome.received:
        lines.append(f"{_points(outcome.received)} received already: not added again")
    lines += [*notes, *outcome.warnings]
    answer = ExportMetricsServiceResponse()
    if len(rejected) or lines:
        answer.partial_success.rejected_data_points = len(rejected)
        answer.partial_success.error_message = "; ".join(lines)
    if len(rejected):
        log.warning("POST /v1/metrics: %d data points refused: %s", len(rejected), "; ".join(lines))
    return _encoded(answer, 200, encoding)


def _points(count: int) -> str:
    return f"{count} data point" if count == 1 else f"{count} data points"


def _status_response(failure: _Failure, encoding: Any) -> Response:
    from google.rpc.status_pb2 import Status

    return _encoded(Status(code=failure.code, message=failure.message), failure.status,
                    encoding, failure.headers)  # fmt: skip


def _encoded(
    message: Any, status: int, encoding: Any, headers: dict[str, str] | None = None
) -> Response:
    from google.protobuf import json_format

    from tenantcost.otlp import Encoding

    if encoding is Encoding.JSON:
        body = json_format.MessageToJson(message, indent=None).encode()
    else:
        body = message.SerializeToString()
    return Response(body, status_code=status, media_type=encoding.value, headers=headers)
