"""Client for OpenCost's Allocation API: ask ``/allocation/compute``, return a cost table.

One request asks for ``window=<start>,<end>`` (RFC 3339, UTC), one result set per ``step``,
aggregated by ``aggregate``, with ``includeIdle=true`` and ``shareIdle=false`` (tenantcost
shares idle itself, by rule). Periods longer than ``max_window`` are split into several
requests on step boundaries. The decoded bodies go through the same parser as saved response
files (:func:`tenantcost.readers.opencost_json.parse_allocation_response`), so an API answer
and the same answer saved to disk give identical cost tables.

Transport: :mod:`requests` with urllib3's :class:`~urllib3.util.retry.Retry` retries
connection failures, read timeouts and HTTP 429/500/502/503/504 with exponential backoff and
honours ``Retry-After``. A deadline on top (``total_timeout_seconds``) bounds the whole
collection: no retry is started, and no backoff slept, past it. Each request has its own
timeout (``timeout_seconds``), so a request in flight can end at most that long after the
deadline.

Checks on each answer, every failure an :class:`InputError` naming the request URL (its
``window`` parameter is the asked window) and the problem: HTTP errors, non-JSON, HTML or
truncated bodies, OpenCost's error envelope (``code`` other than 200), a number of result sets
other than the number of steps asked for, and allocations whose window is not the step they
belong to. A step without any allocation (OpenCost answers ``{}``) is a warning naming its
hours, not an error. Unknown fields are ignored.

With ``out_dir``, every raw body is saved as ``opencost-<start>-<end>.json`` (exactly the bytes
received) before it is parsed, the cost table's ``origin`` names that file and the JSON path of
the allocation, and ``requests.tsv`` lists which URL each file came from.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlencode, urlsplit, urlunsplit

import numpy as np
import pandas as pd
import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import (
    ConnectTimeoutError,
    InvalidHeader,
    MaxRetryError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    ResponseError,
)
from urllib3.util.retry import Retry

from tenantcost.config.sources import OpenCostSource
from tenantcost.errors import InputError, warn
from tenantcost.money import to_micros
from tenantcost.readers.canonical import conform_costs, validate_costs
from tenantcost.readers.costs import sort_costs
from tenantcost.readers.opencost_json import parse_allocation_response
from tenantcost.tables import empty_costs
from tenantcost.timefmt import iso_compact, iso_z_seconds

if TYPE_CHECKING:
    from types import TracebackType

    from urllib3.connectionpool import ConnectionPool
    from urllib3.response import BaseHTTPResponse

ALLOCATION_PATH = "/allocation/compute"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""Answers worth asking again: rate limiting, OpenCost's 500 (a failed Prometheus query is the
usual cause), and the gateway errors of proxies while OpenCost restarts."""

MANIFEST = "requests.tsv"
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BODY_PREVIEW = 120
_INCOMPLETE = re.compile(r"IncompleteRead\((\d+) bytes read, (\d+) more expected\)")


# --------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class Response:
    """One answered request: what was asked, what came back, and where it was saved."""

    url: str
    start: pd.Timestamp
    end: pd.Timestamp
    steps: int
    empty_steps: int
    rows: int
    total_micros: int
    size: int
    sha256: str
    attempts: int
    file: Path | None


@dataclass(frozen=True)
class Collection:
    """The cost table of a period and the responses it was built from."""

    costs: pd.DataFrame
    responses: list[Response]

    @property
    def steps(self) -> int:
        return sum(r.steps for r in self.responses)

    @property
    def empty_steps(self) -> int:
        return sum(r.empty_steps for r in self.responses)


def fetch_allocations(
    source: OpenCostSource,
    start: pd.Timestamp,
    end: pd.Timestamp,
    out_dir: Path | None = None,
) -> pd.DataFrame:
    """The canonical cost table of ``[start, end)`` from the OpenCost Allocation API.

    ``origin`` of each row is ``GET <request URL>:data[i]['<name>']``, or ``<saved file>:data[i]
    ['<name>']`` when ``out_dir`` is given (the raw responses are saved there).
    """
    return collect_allocations(source, start, end, out_dir).costs


def collect_allocations(
    source: OpenCostSource,
    start: pd.Timestamp,
    end: pd.Timestamp,
    out_dir: Path | None = None,
) -> Collection:
    """Like :func:`fetch_allocations`, with the list of responses (for summaries)."""
    if not source.url:
        raise InputError("no OpenCost URL: give --opencost-url or set sources.opencost.url")
    start, end = _utc(start), _utc(end)
    chunks = plan_requests(source, start, end)
    headers = _headers(source)
    if out_dir is not None:
        _make_folder(out_dir)
    deadline = time.monotonic() + source.total_timeout_seconds
    tracker = _Attempts()
    frames: list[pd.DataFrame] = []
    responses: list[Response] = []
    with _session(source, deadline, tracker) as session:
        for number, (chunk_start, chunk_end) in enumerate(chunks):
            url = request_url(source, chunk_start, chunk_end)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise InputError(
                    f"total time limit of {source.total_timeout_seconds:g} s "
                    f"(total_timeout_seconds) reached after {number} of {len(chunks)} requests",
                    file=_label(url),
                )
            tracker.reset()
            body = _get(session, url, headers, min(source.timeout_seconds, remaining), tracker)
            frame, response = _read_body(source, url, chunk_start, chunk_end, body, out_dir)
            frames.append(frame)
            responses.append(replace(response, attempts=tracker.retries + 1))
    if out_dir is not None:
        _write_manifest(out_dir, responses)
    frames = [f for f in frames if len(f)]
    if not frames:
        return Collection(empty_costs(), responses)
    costs = conform_costs(pd.concat(frames, ignore_index=True)) if len(frames) > 1 else frames[0]
    validate_costs(costs)
    return Collection(sort_costs(costs), responses)


def plan_requests(
    source: OpenCostSource, start: pd.Timestamp, end: pd.Timestamp
) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """The request windows covering ``[start, end)``: at most ``max_window`` each, whole steps.

    The period must be a whole number of steps (OpenCost's last step would otherwise reach past
    the end) on whole seconds (RFC 3339 windows are sent to the second).
    """
    start, end = _utc(start), _utc(end)
    step = source.step_timedelta
    period = (
        f"[{iso_z_seconds(start)}, {iso_z_seconds(end)})"
        if _whole(start, end)
        else f"[{start}, {end})"
    )
    if end <= start:
        raise InputError(f"the period {period} is empty")
    if not _whole(start, end):
        raise InputError(f"the period {period} must start and end on whole seconds")
    if (end - start) % step:
        raise InputError(
            f"the period {period} is not a whole number of {source.step} steps; choose a period "
            "on step boundaries or another step"
        )
    chunk = step * int(source.max_window_timedelta // step)
    edges = [*pd.date_range(start, end, freq=chunk, inclusive="left"), end]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def request_params(
    source: OpenCostSource, start: pd.Timestamp, end: pd.Timestamp
) -> dict[str, str]:
    """The query parameters of one request, in the order they are sent."""
    params = {
        "window": f"{iso_z_seconds(start)},{iso_z_seconds(end)}",
        "step": source.step,
        "aggregate": source.aggregate,
        "includeIdle": "true",
        "shareIdle": "false",
    }
    if source.idle_by_node:
        params["idleByNode"] = "true"
    return params


def request_url(source: OpenCostSource, start: pd.Timestamp, end: pd.Timestamp) -> str:
    """The full, readable request URL (``:`` and ``,`` are left unescaped, as RFC 3986 allows)."""
    query = urlencode(request_params(source, start, end), safe=":,")
    return f"{source.url}{ALLOCATION_PATH}?{query}"


def raw_file_name(start: pd.Timestamp, end: pd.Timestamp) -> str:
    """``opencost-20261103T100000Z-20261103T110000Z.json``: the window, safe on every OS."""
    return f"opencost-{iso_compact(start)}-{iso_compact(end)}.json"


# --------------------------------------------------------------------------- transport


@dataclass
class _Attempts:
    """Shared by all the Retry objects of one request: how it went, for the error message."""

    retries: int = 0
    out_of_time: bool = False
    wait: float = 0.0

    def reset(self) -> None:
        self.retries, self.out_of_time, self.wait = 0, False, 0.0


class _DeadlineRetry(Retry):
    """urllib3's Retry that also stops at a deadline (monotonic clock).

    Before each retry it computes the wait urllib3 would sleep (``Retry-After`` if the answer
    has one, else the backoff) and gives up when the retry would start at or after the
    deadline. Giving up raises :class:`MaxRetryError`, as running out of retries does, so with
    ``raise_on_status=False`` the last error answer (and OpenCost's message in it) is returned.
    """

    def __init__(
        self, *args: Any, deadline: float = math.inf, tracker: _Attempts | None = None, **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        self.deadline = deadline
        self.tracker = tracker or _Attempts()

    def new(self, **kw: Any) -> Self:
        retry = super().new(**kw)
        retry.deadline, retry.tracker = self.deadline, self.tracker
        self.tracker.retries = max(self.tracker.retries, len(retry.history))
        return retry

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        try:
            retry = super().increment(method, url, response, error, _pool, _stacktrace)
        except MaxRetryError:
            self.tracker.retries = len(self.history)  # the attempts are the failed ones
            raise
        wait = retry._planned_wait(response)
        if time.monotonic() + wait >= self.deadline:
            self.tracker.out_of_time, self.tracker.wait = True, wait
            self.tracker.retries = len(self.history)
            reason = error or ResponseError(f"HTTP {response.status if response else '?'}")
            raise MaxRetryError(_pool, url or "", reason)  # type: ignore[arg-type]  # as urllib3
        return retry

    def _planned_wait(self, response: BaseHTTPResponse | None) -> float:
        """What :meth:`sleep` will wait before the next attempt."""
        if response is not None and self.respect_retry_after_header:
            try:
                retry_after = self.get_retry_after(response)
            except InvalidHeader:
                retry_after = None
            if retry_after:
                return retry_after
        return self.get_backoff_time()


def _session(source: OpenCostSource, deadline: float, tracker: _Attempts) -> requests.Session:
    retry = _DeadlineRetry(
        total=source.retries,
        allowed_methods=frozenset({"GET"}),
        status_forcelist=RETRY_STATUSES,
        backoff_factor=source.backoff_seconds,
        respect_retry_after_header=True,
        raise_on_status=False,
        deadline=deadline,
        tracker=tracker,
    )
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _get(
    session: requests.Session,
    url: str,
    headers: dict[str, str],
    timeout: float,
    tracker: _Attempts,
) -> bytes:
    """The body of a 200 answer; anything else is an :class:`InputError`."""
    label = _label(url)
    try:
        answer = session.get(url, headers=headers, timeout=timeout)
    except requests.RequestException as exc:
        raise InputError(
            f"{_transport_problem(exc, timeout)}{_gave_up(tracker)}", file=label
        ) from None
    if answer.status_code != 200:
        problem = f"HTTP {answer.status_code} {answer.reason or ''}".rstrip()
        detail = _error_detail(answer.content)
        raise InputError(
            f"{problem}{detail}{_hint(answer.status_code)}{_gave_up(tracker)}", file=label
        )
    return bytes(answer.content)


def _transport_problem(exc: requests.RequestException, timeout: float) -> str:
    reason: BaseException = exc
    inner = exc.args[0] if exc.args else None
    if isinstance(inner, MaxRetryError) and inner.reason is not None:
        reason = inner.reason
    if isinstance(reason, NewConnectionError):  # before timeouts: urllib3 derives it from one
        return f"cannot connect: {_plain(reason)}"
    if isinstance(reason, ConnectTimeoutError) or isinstance(exc, requests.ConnectTimeout):
        return f"cannot connect within {timeout:g} s (timeout_seconds)"
    if isinstance(exc, requests.Timeout) or isinstance(reason, ReadTimeoutError | TimeoutError):
        return f"no response within {timeout:g} s (timeout_seconds)"
    if isinstance(exc, requests.exceptions.ChunkedEncodingError) or isinstance(
        reason, ProtocolError
    ):
        text = str(reason)
        short = _INCOMPLETE.search(text)
        detail = (
            f"{short.group(1)} bytes of {int(short.group(1)) + int(short.group(2))} received"
            if short
            else _plain(reason)
        )
        return f"the connection broke before the whole response arrived ({detail})"
    return f"request failed: {_plain(reason)}"


def _plain(exc: BaseException) -> str:
    """An exception's text without urllib3's ``<... object at 0x...>:`` prefixes."""
    text = str(exc)
    text = re.sub(r"<[^<>]* object at 0x[0-9a-f]+>:?\s*", "", text)
    text = re.sub(r"\bHTTPS?Connection(Pool)?\(host='[^']*', port=\d+\):\s*", "", text)
    text = re.sub(r"\(Caused by \w+\((.*)\)\)$", r"(\1)", text)
    return " ".join(text.split()).strip("'\" ") or type(exc).__name__


def _attempts(tracker: _Attempts) -> str:
    count = tracker.retries + 1
    return f"{count} attempt{'s' if count != 1 else ''}"


def _gave_up(tracker: _Attempts) -> str:
    if tracker.out_of_time:
        when = f"the next retry (in {tracker.wait:g} s)" if tracker.wait else "a retry"
        return (
            f"; {when} would pass the total time limit (total_timeout_seconds), gave up "
            f"after {_attempts(tracker)}"
        )
    if tracker.retries:
        return f"; gave up after {_attempts(tracker)}"
    return ""


def _hint(status: int) -> str:
    if status == 404:
        return "; is the URL OpenCost's API (port 9003, or the UI's /model path)?"
    if status in (401, 403):
        return "; check the credentials in sources.opencost.headers"
    return ""


def _error_detail(body: bytes) -> str:
    """OpenCost's error message from an error body, or the start of the body."""
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and payload.get("message"):
        return f": {' '.join(str(payload['message']).split())}"
    return f": {_preview(text)}"


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _BODY_PREVIEW else flat[:_BODY_PREVIEW] + "...")


# --------------------------------------------------------------------------- answers


def _read_body(
    source: OpenCostSource,
    url: str,
    start: pd.Timestamp,
    end: pd.Timestamp,
    body: bytes,
    out_dir: Path | None,
) -> tuple[pd.DataFrame, Response]:
    label = _label(url)
    payload = _decode(body, label)
    file: Path | None = None
    if out_dir is not None:
        file = out_dir / raw_file_name(start, end)
        try:
            file.write_bytes(body)
        except OSError as exc:
            raise InputError(f"cannot save the response: {exc.strerror}", file=str(file)) from None
        label = f"{label} (saved as {file})"
    origin = str(file) if file is not None else label
    try:
        frame = parse_allocation_response(payload, origin)
    except InputError as exc:
        raise InputError(exc.message, file=label, where=exc.where, column=exc.column) from None
    steps = _step_maps(payload)
    empty = _check_steps(source, start, end, steps, frame, origin, label)
    response = Response(
        url=url,
        start=start,
        end=end,
        steps=len(steps),
        empty_steps=empty,
        rows=len(frame),
        total_micros=int(to_micros(frame["total_cost"]).sum()),
        size=len(body),
        sha256=hashlib.sha256(body).hexdigest(),
        attempts=1,
        file=file,
    )
    return frame, response


def _decode(body: bytes, label: str) -> object:
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"the response is not UTF-8 text ({exc.reason})", file=label) from None
    stripped = text.strip()
    if not stripped:
        raise InputError("the response body is empty", file=label)
    if stripped.startswith("<"):
        raise InputError(
            f"expected JSON, got HTML or XML ({_preview(stripped)}); is the URL OpenCost's API "
            "(port 9003, or the UI's /model path) and not a login page or the UI?",
            file=label,
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise InputError(
                f"the response stops in the middle of the JSON after {len(body)} bytes "
                f"(truncated by OpenCost, a proxy or the network; {exc.msg} at line "
                f"{exc.lineno}, column {exc.colno})",
                file=label,
            ) from None
        raise InputError(
            f"the response is not valid JSON: {exc.msg} at line {exc.lineno}, column "
            f"{exc.colno} ({_preview(text)})",
            file=label,
        ) from None


def _step_maps(payload: object) -> list[Any]:
    """The ``data`` list (the parser has already checked its shape)."""
    if isinstance(payload, list):
        return payload
    data = payload.get("data") if isinstance(payload, dict) else None
    return data if isinstance(data, list) else []


def _check_steps(
    source: OpenCostSource,
    start: pd.Timestamp,
    end: pd.Timestamp,
    steps: list[Any],
    frame: pd.DataFrame,
    origin: str,
    label: str,
) -> int:
    """Step count and windows as asked; warn about steps without data. Returns their number."""
    step = source.step_timedelta
    expected = int((end - start) // step)
    asked = f"[{iso_z_seconds(start)}, {iso_z_seconds(end)})"
    if len(steps) != expected:
        raise InputError(
            f"asked for {expected} result set(s) of {source.step} for {asked}, got {len(steps)}; "
            "OpenCost answers one per step",
            file=label,
            where="data",
        )
    if len(frame):
        tail = frame["origin"].str.slice(len(origin) + 1)
        index = tail.str.extract(r"^(?:data)?\[(\d+)\]", expand=False).astype("int64")
        want_start = start + step * index
        bad = (frame["window_start"] != want_start) | (frame["window_end"] != want_start + step)
        if bad.any():
            position = int(np.flatnonzero(bad.to_numpy())[0])
            row = frame.iloc[position]
            i = int(index.iloc[position])
            s = start + step * i
            raise InputError(
                f"allocation window [{iso_z_seconds(row.window_start)}, "
                f"{iso_z_seconds(row.window_end)}) is not its step's window "
                f"[{iso_z_seconds(s)}, {iso_z_seconds(s + step)}) (step {i} of "
                f"the asked window {asked}, step {source.step})",
                file=label,
                where=str(tail.iloc[position]),
            )
    empty = [i for i, s in enumerate(steps) if s is None or s == {}]
    for first, last in _runs(empty):
        s, e = start + step * first, start + step * (last + 1)
        count = last - first + 1
        where = f"data[{first}]" if count == 1 else f"data[{first}..{last}]"
        warn(
            f"{label}, {where}: no cost data for [{iso_z_seconds(s)}, {iso_z_seconds(e)})"
            + (f" ({count} steps of {source.step})" if count > 1 else "")
        )
    return len(empty)


def _runs(indexes: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for i in indexes:
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


# --------------------------------------------------------------------------- files


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create folder: {exc.strerror}", file=str(folder)) from None


def _write_manifest(folder: Path, responses: list[Response]) -> None:
    """``requests.tsv``: which request each saved file answers (never the headers)."""
    lines = ["file\turl\tbytes\tsha256\tattempts\trows\tempty_steps"]
    for r in responses:
        name = r.file.name if r.file else ""
        lines.append(
            f"{name}\t{_redact(r.url)}\t{r.size}\t{r.sha256}\t{r.attempts}\t{r.rows}\t"
            f"{r.empty_steps}"
        )
    path = folder / MANIFEST
    try:
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror}", file=str(path)) from None


# --------------------------------------------------------------------------- small helpers


def _headers(source: OpenCostSource) -> dict[str, str]:
    """Configured headers with ``${NAME}`` replaced by the environment variable's value."""
    headers = {"Accept": "application/json"}
    for name, value in source.headers.items():

        def expand(match: re.Match[str], header: str = name) -> str:
            variable = match.group(1)
            if variable not in os.environ:
                raise InputError(
                    f"environment variable {variable} is not set",
                    where=f"sources.opencost.headers.{header}",
                )
            return os.environ[variable]

        headers[name] = _ENV_REFERENCE.sub(expand, value)
    return headers


def _label(url: str) -> str:
    return f"GET {_redact(url)}"


def _redact(url: str) -> str:
    """The URL without a password (``user:secret@host`` becomes ``user:***@host``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _utc(value: pd.Timestamp) -> pd.Timestamp:
    ts = pd.Timestamp(value)
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _whole(*values: pd.Timestamp) -> bool:
    return all(v == v.floor("s") for v in values)


__all__ = [
    "ALLOCATION_PATH",
    "RETRY_STATUSES",
    "Collection",
    "Response",
    "collect_allocations",
    "fetch_allocations",
    "plan_requests",
    "raw_file_name",
    "request_params",
    "request_url",
]
