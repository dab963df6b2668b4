"""Request-body limits and security headers against a real ``tenantcost serve`` (uvicorn).

The server runs with the documented default ``--max-body`` (32 MiB). Bodies are generated
while they are sent (no large file on disk) and every upload is capped in time: the server
answers 413 and closes the connection once a body passes the limit, so the client stops
early. Memory is the server process's own, read from ``/proc/PID/status``: ``VmHWM`` is the
peak RSS, so a spike during an upload counts even if the memory was given back after it.
The docs page is opened in Debian's Chromium to show that Swagger UI runs under its CSP.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tenantcost.service.config import DEFAULT_MAX_BODY

from . import service_server
from .service_web_server import MONTH, build_store
from .test_service_otlp import SETTINGS as OTLP_SETTINGS

pytestmark = pytest.mark.timing
"""Every test here measures time or memory: they run alone, after the parallel part."""

MiB = 1024 * 1024
GIGABYTE = 1024 * MiB
UPLOAD_SECONDS = 20.0
"""An upload of 1 GB refused at 32 MiB must end well inside this (it takes < 1 s here)."""
SHEET = f"/api/v1/clients/client-a/months/{MONTH}/sheet.html"


@dataclass(frozen=True)
class Served:
    url: str
    pid: int
    tokens: dict[str, str]
    db: Path

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("limits")
    db, data = f"sqlite:///{tmp / 'store.db'}", str(tmp / "data")
    tokens = build_store(db, data, close=True)
    (tmp / "settings.yaml").write_text(OTLP_SETTINGS)  # for the OTLP tests; nothing else
    args = ("--settings", str(tmp / "settings.yaml"))
    with service_server.running_service(db, data, tmp / "serve.log", args=args) as service:
        yield Served(service.url, service.process.pid, tokens, tmp / "store.db")


class Body:
    """``size`` bytes made as they are sent, counting how many the client handed over."""

    def __init__(self, size: int, chunk: int = MiB) -> None:
        self.size, self.chunk, self.sent = size, chunk, 0

    def __iter__(self) -> Iterator[bytes]:
        block = b"x" * self.chunk
        while self.sent < self.size:
            piece = block[: self.size - self.sent]
            self.sent += len(piece)
            yield piece


def upload(
    served: Served, path: str, body: Body, *, declared: bool, kind: str = "application/json"
) -> httpx.Response:
    """POST ``body`` chunked, or with its ``Content-Length`` (``declared``); the answer, sent
    within :data:`UPLOAD_SECONDS`."""
    headers = served.auth("admin") | {"Content-Type": kind}
    if declared:
        headers["Content-Length"] = str(body.size)
    start = time.monotonic()
    answer = httpx.post(served.url + path, content=iter(body), headers=headers,
                        timeout=UPLOAD_SECONDS)  # fmt: skip
    assert time.monotonic() - start < UPLOAD_SECONDS
    return answer


POST_ROUTES = {
    "/api/v1/usage": "application/json",
    "/api/v1/usage.parquet": "application/vnd.apache.parquet",
    "/api/v1/tokens": "application/json",
    f"/api/v1/months/{MONTH}/reopen": "application/json",
    "/login": "application/x-www-form-urlencoded",
}


@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "content-length"])
@pytest.mark.parametrize("path", POST_ROUTES)
def test_a_body_over_the_limit_is_413_on_every_post_route(
    served: Served, path: str, declared: bool
) -> None:
    body = Body(DEFAULT_MAX_BODY + 1)
    answer = upload(served, path, body, declared=declared, kind=POST_ROUTES[path])
    assert answer.headers["connection"] == "close" and body.sent < 2 * DEFAULT_MAX_BODY
    if path == "/login" and not declared:  # Starlette's form parser stops a field at 1 MiB
        assert answer.status_code == 400 and "maximum size" in answer.json()["detail"]
        return
    assert answer.status_code == 413, answer.text
    detail = answer.json()["detail"]
    assert f"limit of {DEFAULT_MAX_BODY} bytes" in detail and "--max-body" in detail
    if declared:  # refused from the header alone: the server read none of it
        assert f"({DEFAULT_MAX_BODY + 1} bytes)" in detail
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_body_at_the_limit_is_read(served: Served) -> None:
    """Exactly the limit passes the byte check and reaches the route (here: not JSON)."""
    for declared in (False, True):
        answer = upload(served, "/api/v1/usage", Body(DEFAULT_MAX_BODY), declared=declared)
        assert answer.status_code == 422 and "not JSON" in answer.json()["detail"]


def test_an_answer_before_the_body_is_read_closes_the_connection(served: Served) -> None:
    """A route that answers without reading the body (a form route sent JSON: its CSRF check
    fails) does not make the server read the rest of a 1 GB body."""
    body = Body(GIGABYTE)
    answer = upload(served, "/login", body, declared=False)
    assert answer.status_code == 403 and answer.headers["connection"] == "close"
    assert body.sent < GIGABYTE // 4


def _status(pid: int) -> dict[str, int]:
    """``VmRSS`` (now) and ``VmHWM`` (peak) of process ``pid``, in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024  # "123456 kB"
    return fields


def _reset_peak(pid: int) -> None:
    """Start ``VmHWM`` again from the current RSS (``clear_refs``), so that a peak of an
    earlier test of the module does not count."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def test_server_memory_stays_flat_under_1_gb_uploads(served: Served) -> None:
    for path in ("/api/v1/usage", "/api/v1/usage.parquet"):  # warm both paths up
        assert upload(served, path, Body(DEFAULT_MAX_BODY + MiB), declared=False).status_code == 413
    before = _status(served.pid)["VmRSS"]
    for path in ("/api/v1/usage", "/api/v1/usage.parquet"):
        for declared in (False, True):
            body = Body(GIGABYTE)
            answer = upload(served, path, body, declared=declared)
            assert answer.status_code == 413, answer.text
            assert body.sent < GIGABYTE // 4, (path, declared, body.sent)  # cut off early
    after = _status(served.pid)
    assert after["VmHWM"] - before < 100 * MiB, (before, after)
    assert after["VmRSS"] - before < 100 * MiB, (before, after)
    assert httpx.get(served.url + "/healthz").status_code == 200


def _check_common(answer: httpx.Response, *, cached: bool = False) -> str:
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["cache-control"] == ("public, max-age=86400" if cached else "no-store")
    return answer.headers["content-security-policy"]


def test_security_headers_by_route_kind(served: Served) -> None:
    strict = "default-src 'none'; frame-ancestors 'none'"
    for path in ("/api/v1/months", "/api/v1/no-such-route", "/healthz", "/openapi.json"):
        answer = httpx.get(served.url + path, headers=served.auth("finance"))
        assert _check_common(answer) == strict, path
        assert answer.headers["x-frame-options"] == "DENY"
    months = httpx.get(served.url + "/api/v1/months", headers=served.auth("finance"))
    assert months.status_code == 200 and months.json()  # figures: not stored by caches

    sheet = httpx.get(served.url + SHEET, headers=served.auth("manager"))
    assert sheet.status_code == 200 and "<style>" in sheet.text and "<script" not in sheet.text
    csp = _check_common(sheet)
    assert "default-src 'none'" in csp and "style-src 'unsafe-inline'" in csp
    assert "frame-ancestors 'self'" in csp and "script-src" not in csp
    assert sheet.headers["x-frame-options"] == "SAMEORIGIN"
    pdf = httpx.get(served.url + SHEET.replace(".html", ".pdf"), headers=served.auth("manager"),
                    timeout=120)  # fmt: skip
    assert pdf.status_code == 200 and _check_common(pdf) == strict

    login = httpx.get(served.url + "/login")
    assert login.status_code == 200 and "<script" not in login.text
    csp = _check_common(login)
    assert "default-src 'none'" in csp and "form-action 'self'" in csp
    assert "frame-ancestors 'self'" in csp and "script-src" not in csp
    redirect = httpx.get(served.url + "/clients")  # not logged in: to the login form
    assert redirect.status_code == 303 and _check_common(redirect) == csp

    docs = httpx.get(served.url + "/docs")
    csp = _check_common(docs)
    assert "script-src 'self' 'sha256-" in csp and "'unsafe-inline'" not in csp
    assert "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "cdn." not in docs.text  # Swagger UI comes from this server
    asset = httpx.get(served.url + "/docs-assets/swagger-ui-bundle.js")
    assert asset.status_code == 200 and asset.headers["content-type"].startswith("text/javascript")
    _check_common(asset, cached=True)
    missing = httpx.get(served.url + "/docs-assets/no-such-file.js")  # the 404 page
    assert missing.status_code == 404
    assert _check_common(missing) == login.headers["content-security-policy"]  # not cached


def test_swagger_ui_runs_under_its_csp_in_chromium(browser, served: Served) -> None:
    """The docs render, and "Try it out" reaches the API, with no CSP violation (Chromium
    reports each as a console error)."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(served.url + "/docs")
    page.wait_for_selector(".opblock", timeout=15_000)
    assert page.locator(".opblock").count() >= 15  # every route of the API
    page.locator(".opblock-summary", has_text="/healthz").click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    live = page.locator(".live-responses-table tbody")
    live.wait_for(timeout=10_000)
    assert live.locator(".response-col_status").first.inner_text().strip() == "200"
    assert json.loads(live.locator("pre.microlight").first.inner_text()) == {"status": "ok"}
    assert errors == []
    page.close()


def test_an_otlp_export_of_4_million_points_is_refused_in_flat_memory(served: Served) -> None:
    """4 M empty data points in a few KB of gzip (issue 34: 3,950 MB and a 19.8 s wait):
    413 from the count before decoding, the server's peak RSS grows < 100 MiB, and a read
    sent meanwhile answers within 1 s."""
    import gzip
    import threading

    from .test_service_otlp import _empty_points

    body = gzip.compress(_empty_points(4_000_000))
    headers = served.auth("admin") | {"Content-Type": "application/x-protobuf",
                                      "Content-Encoding": "gzip"}  # fmt: skip
    post = lambda: httpx.post(served.url + "/v1/metrics", content=body, headers=headers,  # noqa: E731
                              timeout=UPLOAD_SECONDS)  # fmt: skip
    assert post().status_code == 413  # warm the route up (protobuf, the walk's descriptors)
    before = _status(served.pid)["VmRSS"]
    answers: list[httpx.Response] = []
    export = threading.Thread(target=lambda: answers.append(post()))
    export.start()
    time.sleep(0.05)
    start = time.monotonic()
    months = httpx.get(served.url + "/api/v1/months", headers=served.auth("finance"))
    waited = time.monotonic() - start
    export.join()
    assert months.status_code == 200 and waited < 1.0, waited
    assert answers[0].status_code == 413 and b"more than 100000 data points" in answers[0].content
    assert len(body) < 100_000
    after = _status(served.pid)
    assert after["VmHWM"] - before < 100 * MiB, (before, after)


def _export(points: int, at: int) -> bytes:
    """A cumulative counter of ``points`` series (two attributes each: 1,000 clients and a
    worker), as the SDK's exporter sends it (protobuf, gzip)."""
    import gzip

    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.metrics.v1 import metrics_pb2 as pb
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    def attribute(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    data = [pb.NumberDataPoint(start_time_unix_nano=at - 3_600 * 10**9, time_unix_nano=at,
                               as_double=2.5, attributes=[attribute("tenant.id", f"big-{i % 1000}"),
                                                          attribute("worker", f"w-{i}")])
            for i in range(points)]  # fmt: skip
    metric = pb.Metric(name="app.cpu.time", sum=pb.Sum(data_points=data, is_monotonic=True,
                                                       aggregation_temporality=2))  # fmt: skip
    resource = Resource(attributes=[attribute("service.name", "api")])
    return gzip.compress(ExportMetricsServiceRequest(resource_metrics=[pb.ResourceMetrics(
        resource=resource, scope_metrics=[pb.ScopeMetrics(metrics=[metric])])])
        .SerializeToString())  # fmt: skip


def test_an_accepted_otlp_export_of_100000_points_is_stored_in_flat_memory(
    served: Served,
) -> None:
    """The largest export the default --max-records accepts (100,000 points of two
    attributes, cumulative, gzip): stored whole, and the server's peak RSS grows < 100 MiB
    (issue 34, section 1: it grew about 150 MiB when the export was decoded whole)."""
    import sqlite3

    import pandas as pd

    now = int(pd.Timestamp.now(tz="UTC").floor("min").value) - 600 * 10**9
    headers = served.auth("admin") | {"Content-Type": "application/x-protobuf",
                                      "Content-Encoding": "gzip"}  # fmt: skip
    post = lambda body: httpx.post(served.url + "/v1/metrics", content=body,  # noqa: E731
                                   headers=headers, timeout=120)  # fmt: skip
    assert post(_export(100, now - 60 * 10**9)).content == b""  # warm the route up
    body = _export(100_000, now)
    assert len(body) < DEFAULT_MAX_BODY
    before = _status(served.pid)["VmRSS"]
    _reset_peak(served.pid)
    answer = post(body)
    after = _status(served.pid)
    assert answer.status_code == 200 and answer.content == b"", answer.content  # no refusal
    assert after["VmHWM"] - before < 100 * MiB, (before, after)
    with sqlite3.connect(served.db) as db:
        rows = db.execute("SELECT rows FROM batch WHERE source LIKE 'POST /v1/metrics%' AND "
                          "status = 'committed' ORDER BY id DESC LIMIT 1").fetchone()  # fmt: skip
        series = db.execute("SELECT count(*) FROM otlp_series").fetchone()
    assert rows == (1_000,)  # an hour of usage for each of the 1,000 clients
    assert series == (100_000,)  # every series' last point kept (the warm-up's 100 among them)
