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

    def auth(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("limits")
    db, data = f"sqlite:///{tmp / 'store.db'}", str(tmp / "data")
    tokens = build_store(db, data, close=True)
    with service_server.running_service(db, data, tmp / "serve.log") as service:
        yield Served(service.url, service.process.pid, tokens)


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
