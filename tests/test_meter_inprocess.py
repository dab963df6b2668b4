"""The meter's rules, in process: the client-id rule equals the store's, refused tenant ids
are counted without a client and logged safely, a request belongs to the hour it completes,
ASGI steps of interleaved requests stay apart (child tasks and late CPU included), WSGI
bodies are counted at close, ``record()`` sync and async, and the import stays light.

Nothing is posted here: the meters point at a closed port and the tests read the cells they
drain (tests/test_meter_servers.py delivers to a real ``tenantcost serve``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tenantcost_meter import Meter, _meter
from tenantcost_meter._client_id import client_id_problem as meter_problem

from tenantcost.client_id import client_id_problem

from .meter_apps import burn

CLOSED = "http://127.0.0.1:9"  # nothing listens: nothing is delivered from these tests


@pytest.fixture
def meter(tmp_path: Path) -> Iterator[Meter]:
    m = Meter("api", CLOSED, "tc_test", flush_seconds=3600, spool_dir=tmp_path / "spool",
              bytes_out=True)  # fmt: skip
    yield m
    m._cells.drain()
    m.close(timeout=0.1)


def cells(meter: Meter) -> dict[str, dict[str, Any]]:
    records = meter._cells.drain()
    assert records is not None
    return {r["client"]: r for r in records}


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.text(max_size=40),
    # control characters and lone surrogates
    st.text(alphabet=st.characters(codec=None, categories=None, min_codepoint=0,
                                   max_codepoint=0xDFFF), max_size=20),
    # around the length limit (256 code points)
    st.builds(lambda part, n: (part * n)[: 250 + n % 12], st.text(min_size=1, max_size=3),
              st.integers(250, 262)),
))  # fmt: skip
def test_the_client_id_rule_is_the_stores(value: str) -> None:
    assert meter_problem(value) == client_id_problem(value)


async def _request(app: Any, tenant: bytes | None, ms: float, steps: int = 4) -> None:
    headers = [(b"x-burn", str(ms).encode())]
    if tenant is not None:
        headers.append((b"x-tenant-id", tenant))
    scope = {"type": "http", "headers": headers}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        return None

    await app(scope, receive, send)


def _stepping_app(steps: int = 4, child: bool = False) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        ms = float(dict(scope["headers"])[b"x-burn"])
        for _ in range(steps):
            burn(ms / 1000 / steps)
            await asyncio.sleep(0)  # another request's step runs here
        if child:  # a task created by the request: its steps are the request's
            await asyncio.create_task(asyncio.to_thread(lambda: None))
            await asyncio.create_task(_burning(ms / 1000))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"12345"})

    return app


async def _burning(seconds: float) -> None:
    burn(seconds)


@pytest.mark.parametrize("child", [False, True])
def test_interleaved_asgi_requests_are_counted_apart(meter: Meter, child: bool) -> None:
    app = meter.asgi(_stepping_app(child=child), tenant_header="X-Tenant-Id")

    async def main() -> None:
        await asyncio.gather(*[_request(app, b"heavy", 40) for _ in range(4)],
                             *[_request(app, b"light", 4) for _ in range(4)])  # fmt: skip

    asyncio.run(main())
    got = cells(meter)
    factor = 2 if child else 1
    assert got["heavy"]["requests"] == 4 and got["light"]["requests"] == 4
    assert got["heavy"]["cpu_seconds"] == pytest.approx(0.160 * factor, rel=0.1)
    assert got["light"]["cpu_seconds"] == pytest.approx(0.016 * factor, rel=0.1)
    assert got["light"]["bytes_out"] == 20


def test_cpu_after_the_request_goes_to_its_tenant(meter: Meter) -> None:
    """A task the request started and did not wait for: its CPU is the tenant's, with no
    request, in the hour it arrives."""
    tasks: list[asyncio.Task[None]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        tasks.append(asyncio.create_task(_late()))
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def _late() -> None:
        await asyncio.sleep(0.01)
        burn(0.05)

    async def main() -> None:
        await _request(meter.asgi(app), b"client-a", 0)
        assert cells(meter)["client-a"]["cpu_seconds"] < 0.01
        await asyncio.gather(*tasks)

    asyncio.run(main())
    late = cells(meter)["client-a"]
    assert late["requests"] == 0 and late["cpu_seconds"] == pytest.approx(0.05, rel=0.1)


@pytest.mark.parametrize("raw", [b"evil\x1b[31m", b"\xff\xfe", b"x" * 257, b"a\x00b"])
def test_a_refused_tenant_id_counts_without_a_client_and_is_logged_safely(
    meter: Meter, raw: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    app = meter.asgi(_stepping_app(steps=1), tenant_header="x-tenant-id")

    async def main() -> None:
        await _request(app, raw, 1)
        await _request(app, raw, 1)  # a second refusal within the minute: not logged again
        await _request(app, b"client-b", 1)
        await _request(app, None, 1)  # no tenant at all: the empty client too

    with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
        asyncio.run(main())
    got = cells(meter)
    assert got[""]["requests"] == 3 and got["client-b"]["requests"] == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "tenantcost_meter"]
    assert len(lines) == 1 and "counted without a client" in lines[0], lines
    assert all(c.isprintable() for c in lines[0]) and "evil" not in lines[0]


def test_a_tenant_function_decides_and_its_failure_counts_without_a_client(
    meter: Meter,
) -> None:
    def tenant(scope: dict[str, Any]) -> str | None:
        value = dict(scope["headers"]).get(b"x-tenant-id")
        if value == b"boom":
            raise KeyError("boom")
        return None if value is None else "t-" + value.decode()

    app = meter.asgi(_stepping_app(steps=1), tenant=tenant)

    async def main() -> None:
        for raw in (b"one", b"boom", None):
            await _request(app, raw, 1)

    asyncio.run(main())
    got = cells(meter)
    assert got["t-one"]["requests"] == 1 and got[""]["requests"] == 2


def test_a_request_belongs_to_the_hour_it_completes(
    meter: Meter, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = {"now": 1_796_169_599.5}  # 2026-12-01T23:59:59.5Z
    monkeypatch.setattr(_meter.time, "time", lambda: clock["now"])

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        clock["now"] += 1.0  # the response ends after midnight
        return [b"ok"]

    wsgi = meter.wsgi(app, tenant_header="X-Tenant-Id")
    body = wsgi({"HTTP_X_TENANT_ID": "client-a"}, lambda *a: None)
    assert b"".join(body) == b"ok"
    body.close()
    (record,) = meter._cells.drain() or []
    assert record["window_start"] == "2026-12-02T00:00:00Z"
    assert record["window_end"] == "2026-12-02T01:00:00Z"


def test_wsgi_counts_the_body_and_errors(meter: Meter) -> None:
    def app(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == "/fail":
            raise RuntimeError("app failure")
        start_response("200 OK", [])

        def body() -> Iterator[bytes]:
            burn(0.02)
            yield b"abc"
            burn(0.02)
            yield b"de"

        return body()

    wsgi = meter.wsgi(app, tenant_header="X-Tenant-Id")
    # a UTF-8 id arrives decoded as latin-1 (PEP 3333): the meter reads it back as UTF-8
    environ = {"HTTP_X_TENANT_ID": "clïent".encode().decode("latin-1")}
    body = wsgi(environ, lambda *a: None)
    assert list(body) == [b"abc", b"de"]
    body.close()
    with pytest.raises(RuntimeError):
        wsgi({"PATH_INFO": "/fail", "HTTP_X_TENANT_ID": "client-b"}, lambda *a: None)
    got = cells(meter)
    assert got["clïent"]["requests"] == 1 and got["clïent"]["bytes_out"] == 5
    assert got["clïent"]["cpu_seconds"] == pytest.approx(0.04, rel=0.1)
    assert got["client-b"]["requests"] == 1


def test_record_counts_a_block_sync_and_async(meter: Meter) -> None:
    with meter.record(tenant="client-b", service="import-worker"):
        burn(0.03)
    with pytest.raises(ValueError), meter.record(tenant="client-b", service="import-worker"):
        raise ValueError("the job failed: still one request")

    async def job() -> None:
        async with meter.record(tenant="client-c"):
            burn(0.02)
            await asyncio.sleep(0)
            await asyncio.to_thread(burn, 0.01)  # plain asyncio's pool: not anyio's, so not

    asyncio.run(job())
    records = {(r["service"], r["client"]): r for r in meter._cells.drain() or []}
    worker = records[("import-worker", "client-b")]
    assert worker["requests"] == 2 and worker["cpu_seconds"] == pytest.approx(0.03, rel=0.1)
    api = records[("api", "client-c")]
    assert api["requests"] == 1 and api["cpu_seconds"] == pytest.approx(0.02, rel=0.1)


def test_the_records_carry_every_metric_column(meter: Meter) -> None:
    meter._add("api", "client-a", 1, 0.0, 0)
    meter._add("api", "client-b", 0, 0.1234567, 0)
    records = meter._cells.drain() or []
    assert [sorted(r) for r in records] == [sorted(["window_start", "window_end", "service",
                                                    "client", "requests", "cpu_seconds",
                                                    "bytes_out"])] * 2  # fmt: skip
    assert records[1]["cpu_seconds"] == 0.123457 and isinstance(records[0]["requests"], int)


def test_the_api_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="service"):
        Meter("", CLOSED, "tc_x", spool_dir=tmp_path)
    with pytest.raises(ValueError, match="flush_seconds"):
        Meter("api", CLOSED, "tc_x", flush_seconds=0, spool_dir=tmp_path)
    meter = Meter("api", CLOSED, "tc_x", spool_dir=tmp_path)
    try:
        with pytest.raises(TypeError, match="not both"):
            meter.asgi(lambda *a: None, tenant_header="x", tenant=lambda s: None)
    finally:
        meter.close(timeout=0.1)


def test_import_is_light_and_pulls_no_heavy_library(tmp_path: Path) -> None:
    """``import tenantcost_meter`` under 50 ms, and neither the import nor a Meter with a
    WSGI app imports pandas, DuckDB, FastAPI or anyio. The import is timed in CPU time of
    fresh interpreters (the best of 3): the machine is shared, and wall time measures the
    other processes' load (docs/meter.md gives wall figures on a quiet machine)."""
    code = (
        "import time, sys, json\n"
        "t = time.process_time()\n"
        "import tenantcost_meter\n"
        "took = time.process_time() - t\n"
        f"m = tenantcost_meter.Meter('api', {CLOSED!r}, 'tc_x', spool_dir={str(tmp_path)!r})\n"
        "m.wsgi(lambda e, s: [b''], tenant_header='X-Tenant-Id')\n"
        "heavy = [n for n in ('pandas', 'duckdb', 'fastapi', 'starlette', 'anyio', 'numpy')"
        " if n in sys.modules]\n"
        "m.close(timeout=0.1)\n"
        "print(json.dumps([took, heavy]))\n"
    )
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                      text=True, check=True).stdout)
            for _ in range(3)]  # fmt: skip
    assert min(took for took, _ in runs) < 0.050, runs
    assert all(heavy == [] for _, heavy in runs), runs


def test_a_flush_spools_the_cells_before_any_post(tmp_path: Path) -> None:
    """tenantcost is unreachable: the cells are in the spool, as one batch of records."""
    meter = Meter("api", CLOSED, "tc_x", flush_seconds=3600, spool_dir=tmp_path)
    try:
        with meter.record(tenant="client-a"):
            pass
        assert meter.flush(timeout=1.0) is False
        spooled = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
        assert [r["client"] for batch in spooled for r in batch["body"]["records"]] == [
            "client-a"]
        assert spooled[0]["body"]["mode"] == "sum"
    finally:
        meter.close(timeout=0.1)


def test_repeated_wsgi_tenant_headers_count_the_first(meter: Meter) -> None:
    """waitress joins a header sent twice with ", " in one environ entry: the first counts,
    as on ASGI (an id holding ", " needs a tenant function, docs/meter.md)."""
    wsgi = meter.wsgi(lambda environ, start: [b"ok"], tenant_header="X-Tenant-Id")
    for value in ("hdr-one, hdr-two", "hdr-one", "a,b"):
        wsgi({"HTTP_X_TENANT_ID": value}, lambda *a: None).close()
    assert {c: r["requests"] for c, r in cells(meter).items()} == {"hdr-one": 2, "a,b": 1}


def test_cells_put_back_merge_and_the_cap_drops_the_oldest_hours_whole() -> None:
    from tenantcost_meter._cells import Cells

    cells_ = Cells(max_cells=3)
    for hour, client in [(10, "a"), (10, "b"), (11, "a")]:
        assert cells_.add(hour, "api", client, 1, 0.5) is None
    taken = cells_.take()
    assert taken is not None and len(cells_) == 0
    cells_.add(11, "api", "a", 2, 0.25)  # counted while the spool refused the taken cells
    cells_.add(12, "api", "a", 1, 0.25)
    dropped = cells_.put_back(taken)  # four cells: hour 10 goes, whole
    assert dropped is not None and (dropped.cells, dropped.requests) == (2, 2)
    assert dropped.describe() == ("2 cells (2 requests, 1.000000 CPU seconds) of the hours "
                                  "1970-01-01T10:00:00Z")  # fmt: skip
    assert cells_.add(13, "api", "b", 1, 0.0) is None
    assert cells_.add(14, "api", "b", 1, 0.0) is not None  # four again: hour 11 goes
    records = cells_.records(cells_.take() or {})[0]
    assert [(r["window_start"][11:13], r["requests"]) for r in records] == [
        ("12", 1), ("13", 1), ("14", 1)]  # fmt: skip
    assert cells_.dropped_cells == 3


def test_a_spool_that_cannot_be_written_keeps_the_cells_up_to_max_cells(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool folder removed: flush() is False, the cells stay in memory (merged with the
    new ones), a warning says so once; past max_cells the oldest hours are dropped and
    logged at ERROR with the count; the folder back, one flush spools every cell kept."""
    spool = tmp_path / "spool"
    meter = Meter("api", CLOSED, "tc_x", flush_seconds=3600, spool_dir=spool, max_cells=3)
    now = time.time

    def request_at(hour: int | None, client: str) -> None:
        monkeypatch.setattr(_meter.time, "time", now if hour is None else lambda: hour * 3600.0)
        meter._add("api", client, 1, 0.0, 0)
        monkeypatch.setattr(_meter.time, "time", now)

    try:
        shutil.rmtree(spool)
        with caplog.at_level(logging.WARNING, logger="tenantcost_meter"):
            request_at(1, "old")  # an hour of 1970: the oldest
            request_at(None, "client-a")
            assert meter.flush(timeout=1.0) is False
            request_at(2, "old")
            assert meter.flush(timeout=1.0) is False
            request_at(None, "client-a")
            request_at(3, "old")  # a fourth cell: hour 1 is dropped
            assert meter.flush(timeout=1.0) is False
        kept = [r for r in caplog.records if "could not be spooled" in r.getMessage()]
        assert len(kept) == 1 and kept[0].levelname == "WARNING", kept
        (error,) = [r for r in caplog.records if r.levelname == "ERROR"]
        assert "dropped 1 cells (1 requests" in error.getMessage()
        assert "1 cells dropped in all" in error.getMessage()
        spool.mkdir()
        assert meter.flush(timeout=1.0) is False  # spooled; tenantcost is not reachable
        records = [r for p in spool.glob("*.json")
                   for r in json.loads(p.read_text())["body"]["records"]]  # fmt: skip
        assert sorted((r["window_start"][:13], r["client"], r["requests"]) for r in records) == [
            ("1970-01-01T02", "old", 1), ("1970-01-01T03", "old", 1),
            (max(r["window_start"][:13] for r in records), "client-a", 2)]  # fmt: skip
    finally:
        meter.close(timeout=0.1)
    with pytest.raises(ValueError, match="max_cells"):
        Meter("api", CLOSED, "tc_x", spool_dir=tmp_path, max_cells=0)
