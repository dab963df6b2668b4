"""A real HTTP server on 127.0.0.1 that answers like OpenCost's ``/allocation/compute``.

It runs :class:`http.server.ThreadingHTTPServer` on a free loopback port in a thread (see
:func:`running`) and builds every answer from the request's ``window`` and ``step``: one result
set per step, ``[t, t + step)``, in OpenCost's envelope ``{"code": 200, "status": "success",
"data": [...]}``, serialised compactly like Go's encoder. What a step contains comes from a
*scenario*:

- :class:`FileScenario`: the allocations of real saved responses (OpenCost's published samples,
  the bundled examples), served for the step whose window they carry; other steps are ``{}``.
- :class:`GeneratedScenario`: a few workloads and ``__idle__`` for every step, with costs that
  vary by hour (5 decimals, as OpenCost rounds), and optional hours without data.

``aggregate`` is recorded but not applied (scenarios are already aggregated by cluster,
namespace, controller kind and controller); ``idleByNode=true`` splits the generated idle row
per node, as OpenCost names it (``<cluster>/<node>/__idle__``).

Failure modes (:data:`MODES`) are taken one per request from :meth:`OpenCostServer.queue`, then
from :attr:`OpenCostServer.mode` (default ``ok``). Every request is recorded (path, parameters,
headers) and every 200 body kept, so tests can assert what the client sent and compare saved
files byte for byte.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import pandas as pd

RFC3339 = "%Y-%m-%dT%H:%M:%SZ"
HOUR = pd.Timedelta(hours=1)

MODES: dict[str, str] = {
    "ok": "the scenario's data",
    "extra_fields": "the data plus fields OpenCost does not have (yet) at every level",
    "null_total": "the data with the first allocation's totalCost null (NaN in OpenCost)",
    "shifted": "the data with its first non-empty step after step 0 moved by 30 minutes",
    "missing_step": "the data without its last step",
    "envelope": "HTTP 200 with OpenCost's error envelope, code 500",
    "http500": "HTTP 500 with OpenCost's error envelope (what OpenCost sends on failure)",
    "http400": "HTTP 400 with OpenCost's error envelope (a bad parameter)",
    "http503": "HTTP 503 from a proxy, with Retry-After when retry_after is set",
    "html": "HTTP 200 with an HTML page (a login page or the UI)",
    "garbage": "HTTP 200 with plain text",
    "truncated": "HTTP 200 with the first half of the JSON (Content-Length matches)",
    "dropped": "Content-Length of the whole JSON, half of it sent, connection closed",
    "slow": "the data after slow_seconds",
}

_DURATION = re.compile(r"^([1-9][0-9]*)(s|m|h|d)$")
_UNITS = {"s": "s", "m": "min", "h": "h", "d": "D"}


class Scenario(Protocol):
    def step(
        self, start: pd.Timestamp, end: pd.Timestamp, params: dict[str, str]
    ) -> dict[str, Any]:
        """The allocations of one step, by name (``{}`` when there is no data)."""
        ...


def rfc3339(value: pd.Timestamp) -> str:
    return value.tz_convert("UTC").strftime(RFC3339)


def allocation(
    name: str,
    start: pd.Timestamp,
    end: pd.Timestamp,
    properties: dict[str, Any],
    *,
    cpu_cost: float,
    ram_cost: float,
    cpu_cores: float = 0.0,
    ram_bytes: float = 0.0,
) -> dict[str, Any]:
    """An allocation object with the fields OpenCost writes (numbers rounded to 5 decimals)."""
    hours = (end - start) / HOUR
    cpu_cost, ram_cost = round(cpu_cost, 5), round(ram_cost, 5)
    return {
        "name": name,
        "properties": properties,
        "window": {"start": rfc3339(start), "end": rfc3339(end)},
        "start": rfc3339(start),
        "end": rfc3339(end),
        "minutes": hours * 60,
        "cpuCores": cpu_cores,
        "cpuCoreRequestAverage": cpu_cores,
        "cpuCoreUsageAverage": round(cpu_cores * 0.4, 5),
        "cpuCoreHours": round(cpu_cores * hours, 5),
        "cpuCost": cpu_cost,
        "cpuCostAdjustment": 0,
        "cpuEfficiency": 0.4,
        "gpuCount": 0,
        "gpuHours": 0,
        "gpuCost": 0,
        "gpuCostAdjustment": 0,
        "networkTransferBytes": 0,
        "networkReceiveBytes": 0,
        "networkCost": 0,
        "networkCrossZoneCost": 0,
        "networkCrossRegionCost": 0,
        "networkInternetCost": 0,
        "networkCostAdjustment": 0,
        "loadBalancerCost": 0,
        "loadBalancerCostAdjustment": 0,
        "pvBytes": 0,
        "pvByteHours": 0,
        "pvCost": 0,
        "pvs": None,
        "pvCostAdjustment": 0,
        "ramBytes": ram_bytes,
        "ramByteRequestAverage": ram_bytes,
        "ramByteUsageAverage": round(ram_bytes * 0.6, 5),
        "ramByteHours": round(ram_bytes * hours, 5),
        "ramCost": ram_cost,
        "ramCostAdjustment": 0,
        "ramEfficiency": 0.6,
        "externalCost": 0,
        "sharedCost": 0,
        "totalCost": round(cpu_cost + ram_cost, 5),
        "totalEfficiency": 0.45,
        "proportionalAssetResourceCosts": {},
        "lbAllocations": None,
        "sharedCostBreakdown": {},
    }


@dataclass
class FileScenario:
    """Allocations of saved responses, keyed by their window."""

    by_window: dict[tuple[pd.Timestamp, pd.Timestamp], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_payloads(cls, *payloads: Any) -> FileScenario:
        scenario = cls()
        for payload in payloads:
            steps = payload["data"] if isinstance(payload, dict) else payload
            for step in steps:
                for name, item in (step or {}).items():
                    window = item["window"]
                    key = (pd.Timestamp(window["start"]), pd.Timestamp(window["end"]))
                    scenario.by_window.setdefault(key, {})[name] = item
        return scenario

    @classmethod
    def from_files(cls, *paths: Path) -> FileScenario:
        return cls.from_payloads(*(json.loads(p.read_text(encoding="utf-8")) for p in paths))

    def step(
        self, start: pd.Timestamp, end: pd.Timestamp, params: dict[str, str]
    ) -> dict[str, Any]:
        return copy.deepcopy(self.by_window.get((start, end), {}))


GENERATED_WORKLOADS: tuple[tuple[str, str, str, str, float], ...] = (
    ("cluster-one", "saas", "deployment", "api", 0.0504),
    ("cluster-one", "saas", "deployment", "import-worker", 0.0336),
    ("cluster-one", "monitoring", "statefulset", "prometheus", 0.0168),
)
"""(cluster, namespace, controller kind, controller, CPU cost per hour)."""
GENERATED_NODES = ("node-1", "node-2")


@dataclass
class GeneratedScenario:
    """Three workloads and idle in every step; costs change with the hour of the step."""

    empty: set[pd.Timestamp] = field(default_factory=set)
    """Step starts for which the server answers ``{}`` (no data)."""

    def step(
        self, start: pd.Timestamp, end: pd.Timestamp, params: dict[str, str]
    ) -> dict[str, Any]:
        if start in self.empty:
            return {}
        hours = (end - start) / HOUR
        factor = 1 + (int(start.timestamp() // 3600) % 7) / 10
        out: dict[str, Any] = {}
        for cluster, namespace, kind, controller, rate in GENERATED_WORKLOADS:
            name = f"{cluster}/{namespace}/{kind}:{controller}"
            out[name] = allocation(
                name,
                start,
                end,
                {
                    "cluster": cluster,
                    "namespace": namespace,
                    "controllerKind": kind,
                    "controller": controller,
                },
                cpu_cost=rate * hours * factor,
                ram_cost=rate / 6 * hours * factor,
                cpu_cores=1.5,
                ram_bytes=1610612736.0,
            )
        if params.get("idleByNode") == "true":
            for node in GENERATED_NODES:
                name = f"cluster-one/{node}/__idle__"
                out[name] = allocation(
                    name,
                    start,
                    end,
                    {"cluster": "cluster-one", "node": node},
                    cpu_cost=0.05 * hours,
                    ram_cost=0.01 * hours,
                )
        else:
            out["__idle__"] = allocation(
                "__idle__",
                start,
                end,
                {"cluster": "cluster-one"},
                cpu_cost=0.1 * hours,
                ram_cost=0.02 * hours,
            )
        return out


def expected_total(
    scenario: Scenario, start: pd.Timestamp, end: pd.Timestamp, step: pd.Timedelta = HOUR
) -> float:
    """Sum of totalCost over the steps of ``[start, end)``: what a client must read."""
    total = 0.0
    t = start
    while t < end:
        total += sum(a["totalCost"] for a in scenario.step(t, t + step, {}).values())
        t += step
    return total


@dataclass(frozen=True)
class Recorded:
    """One request as the server saw it."""

    path: str
    params: dict[str, str]
    headers: dict[str, str]


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def do_GET(self) -> None:
        self.server.opencost.handle(self)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests assert on recorded requests instead."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    opencost: OpenCostServer


class OpenCostServer:
    """The fake OpenCost; start it with :func:`running`."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.mode = "ok"
        self.retry_after: str | None = None
        self.slow_seconds = 2.0
        self.requests: list[Recorded] = []
        self.bodies: list[bytes] = []
        self._queue: deque[str] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.opencost = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def queue(self, *modes: str) -> None:
        """Failure modes for the next requests, in order; then :attr:`mode` again."""
        for mode in modes:
            assert mode in MODES, mode
        with self._lock:
            self._queue.extend(modes)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------------ answering

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        split = urlsplit(request.path)
        params = {k: v[0] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        with self._lock:
            self.requests.append(Recorded(split.path, params, dict(request.headers.items())))
            mode = self._queue.popleft() if self._queue else self.mode
        assert mode in MODES, mode
        if split.path != "/allocation/compute":
            self._send(request, 404, "text/plain; charset=utf-8", b"404 page not found\n")
            return
        if mode in ("envelope", "http500", "http400"):
            status = {"envelope": 200, "http500": 500, "http400": 400}[mode]
            message = (
                "Invalid 'aggregate' parameter: unknown aggregation property 'namespac'"
                if mode == "http400"
                else "Error: error computing allocations for "
                f"{params.get('window', '')}: Prometheus query failed: context deadline exceeded"
            )
            error = json.dumps({"code": 500 if status == 200 else status, "message": message})
            self._send(request, status, "application/json", error.encode())
            return
        if mode == "http503":
            extra = {"Retry-After": self.retry_after} if self.retry_after else {}
            self._send(request, 503, "text/plain", b"upstream connect error or disconnect", extra)
            return
        if mode == "html":
            page = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body></body></html>"
            self._send(request, 200, "text/html; charset=utf-8", page)
            return
        if mode == "garbage":
            self._send(request, 200, "text/plain", b"OpenCost is starting up, try again")
            return
        try:
            payload = self.payload(params, mode)
        except ValueError as exc:
            error = json.dumps({"code": 400, "message": f"Invalid window parameter: {exc}"})
            self._send(request, 400, "application/json", error.encode())
            return
        body = json.dumps(payload, separators=(",", ":")).encode()
        if mode == "slow" and self._stopping.wait(self.slow_seconds):
            return
        if mode == "truncated":
            self._send(request, 200, "application/json", body[: len(body) // 2])
            return
        if mode == "dropped":
            self._send(request, 200, "application/json", body[: len(body) // 2], length=len(body))
            return
        with self._lock:
            self.bodies.append(body)
        self._send(request, 200, "application/json", body)

    def payload(self, params: dict[str, str], mode: str) -> dict[str, Any]:
        """The envelope for ``window`` and ``step`` (``ValueError`` when they are bad)."""
        start_text, _, end_text = params.get("window", "").partition(",")
        start = pd.Timestamp(start_text).tz_convert("UTC")
        end = pd.Timestamp(end_text).tz_convert("UTC")
        match = _DURATION.match(params.get("step", ""))
        step = pd.Timedelta(int(match.group(1)), unit=_UNITS[match.group(2)]) if match else None
        if step is None:
            step = end - start
        steps: list[dict[str, Any]] = []
        t = start
        while t < end:
            steps.append(self.scenario.step(t, t + step, params))
            t += step
        if mode == "missing_step":
            steps = steps[:-1]
        if mode == "shifted":
            filled = [i for i, s in enumerate(steps) if s]
            index = next((i for i in filled if i >= 1), filled[0])
            for item in steps[index].values():
                for holder in (item["window"], item):
                    for edge in ("start", "end"):
                        moved = pd.Timestamp(holder[edge]) + pd.Timedelta(minutes=30)
                        holder[edge] = rfc3339(moved)
        if mode == "null_total":
            first = next(s for s in steps if s)
            next(iter(first.values()))["totalCost"] = None
        envelope: dict[str, Any] = {"code": 200, "status": "success", "data": steps}
        if mode == "extra_fields":
            envelope["warning"] = "a field from a newer OpenCost"
            for s in steps:
                for item in s.values():
                    item["carbonCost"] = 0.00042
                    item["futureBreakdown"] = {"a": [1, 2, 3], "b": None}
                    item["properties"]["providerID"] = "i-0abc"
        return envelope

    def _send(
        self,
        request: BaseHTTPRequestHandler,
        status: int,
        content_type: str,
        body: bytes,
        headers: dict[str, str] | None = None,
        *,
        length: int | None = None,
    ) -> None:
        try:
            request.send_response(status)
            request.send_header("Content-Type", content_type)
            request.send_header("Content-Length", str(len(body) if length is None else length))
            for name, value in (headers or {}).items():
                request.send_header(name, value)
            request.end_headers()
            request.wfile.write(body)
            request.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)


@contextmanager
def running(scenario: Scenario) -> Iterator[OpenCostServer]:
    """A started server, stopped on exit."""
    server = OpenCostServer(scenario)
    server.start()
    try:
        yield server
    finally:
        server.stop()
