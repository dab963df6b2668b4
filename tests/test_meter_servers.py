"""The meter in real applications under real servers, delivering to a real ``tenantcost
serve``: uvicorn running a bare ASGI app, Starlette (with a ``BaseHTTPMiddleware``, whose
child task must be counted) and FastAPI, async and sync endpoints; waitress running Flask.

Concurrent clients of three tenants call endpoints that burn a known CPU time. What the store
holds must equal what was sent: ``requests`` exactly per tenant and hour, ``cpu_seconds``
within 10 % of what was burned per tenant, which also shows that the other tenants'
interleaved steps (tenants burn 20 to 45 ms a request) did not leak into a tenant's figure.
Then the app is killed with SIGTERM in the middle of a request: the usage of every request
still arrives.

waitress is the WSGI server: a production server with a thread pool in one process, so
requests of several tenants run in parallel threads of one process (what thread_time must
keep apart); gunicorn's default sync worker serves one request at a time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pandas as pd
import pytest
from sqlalchemy import select

from tenantcost.store.engine import open_engine
from tenantcost.store.models import Batch, BatchFile, table
from tenantcost.store.settings import resolve_settings

from .postgres_fixture import free_port
from .service_server import Service, create_token, running_service, tenantcost

REPO = Path(__file__).resolve().parents[1]
TENANTS = {"client-a": 45.0, "client-b": 20.0, "client-c": 28.0}
"""Milliseconds of CPU each tenant's requests burn (a framework's own work, about 1 ms a
request here, is counted too: the burns are large enough for the 10 % tolerance)."""
REQUESTS = 8
"""Requests per tenant and endpoint."""
WARM = ("/", "/async", "/sync")
"""Paths start_app calls once without a tenant, after its readiness probe."""
PROBES = 1 + len(WARM)
"""Requests without a tenant each app counts (counted with the empty client)."""


@dataclass(frozen=True)
class Store:
    db: str
    data: Path
    token: str
    service: Service

    def usage(self) -> pd.DataFrame:
        """Every usage row the store holds (the files of its committed usage batches)."""
        engine = open_engine(resolve_settings(db=self.db, environ={}))
        try:
            with engine.connect() as conn:
                f, b = table(BatchFile).c, table(Batch).c
                paths = conn.execute(select(f.path).join_from(table(BatchFile), table(Batch),
                                                              b.id == f.batch_id)
                                     .where(b.kind == "usage")).scalars().all()  # fmt: skip
        finally:
            engine.dispose()
        frames = [pd.read_parquet(self.data / p) for p in paths]
        return (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame(
                columns=["window_start", "service", "client", "requests", "cpu_seconds"]
            )
        )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp = tmp_path_factory.mktemp("meter-store")
    db, data = f"sqlite:///{tmp / 'store.db'}", tmp / "data"
    tenantcost("db", "upgrade", "--db", db, "--data", str(data))
    token = create_token(db, "ingest", "meter")
    with running_service(db, str(data), tmp / "serve.log") as service:
        yield Store(db, data, token, service)


@dataclass
class App:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    service: str


def start_app(store: Store, tmp: Path, app: str, service: str, server: str = "uvicorn",
              flush: float = 1.0, args: tuple[str, ...] = (), **extra: str) -> App:  # fmt: skip
    """The app served by a real server in its own process, metered as ``service``."""
    port = free_port()
    env = dict(os.environ, TC_METER_URL=store.service.url, TC_METER_TOKEN=store.token,
               TC_METER_SPOOL=str(tmp / f"spool-{service}"), TC_METER_FLUSH=str(flush),
               TC_METER_SERVICE=service, **extra)  # fmt: skip
    target = f"tests.meter_apps:{app}"
    if server == "uvicorn":
        command = [sys.executable, "-m", "uvicorn", target, "--host", "127.0.0.1",
                   "--port", str(port), "--log-level", "warning", *args]  # fmt: skip
    else:
        command = [sys.executable, "-m", "waitress", "--host=127.0.0.1", f"--port={port}",
                   "--threads=4", target]  # fmt: skip
    log = tmp / f"{service}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=sink,
                                   stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{server} exited {process.returncode}: {log.read_text()}")
        try:  # one probe reaches the app (PROBES counts it): only a refused connection is
            # tried again; a slow first answer is waited for, since a read timed out on our
            # side was still counted by the meter (a loaded CI machine counted 5 more)
            httpx.get(f"{url}/nothing", timeout=httpx.Timeout(30.0, connect=1.0))
        except (httpx.ConnectError, httpx.ConnectTimeout):  # never reached the app
            time.sleep(0.1)
            continue
        for path in WARM:  # first calls build the framework's caches: no tenant pays that
            httpx.get(f"{url}{path}?ms=0", timeout=10.0)
        return App(url, process, log, service)
    process.kill()
    raise RuntimeError(f"{server} did not answer: {log.read_text()}")


def stop(app: App) -> None:
    app.process.terminate()
    try:
        app.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        app.process.kill()
        app.process.wait(timeout=30)


def drive(app: App, paths: list[str]) -> dict[str, float]:
    """REQUESTS requests per tenant and path from 6 concurrent clients, interleaved; the
    seconds of CPU each tenant asked for (every request answered 200)."""
    calls = [(tenant, path, ms) for _ in range(REQUESTS) for path in paths
             for tenant, ms in TENANTS.items()]  # fmt: skip
    local = threading.local()

    def call(item: tuple[str, str, float]) -> None:
        tenant, path, ms = item
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=60)
        answer = local.client.get(f"{app.url}{path}?ms={ms}", headers={"X-Tenant-Id": tenant})
        assert answer.status_code == 200, answer.text

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(call, calls))
    burned = {tenant: 0.0 for tenant in TENANTS}
    for tenant, _, ms in calls:
        burned[tenant] += ms / 1000
    return burned


def stored(store: Store, service: str, expected: int, wait: float = 60) -> pd.DataFrame:
    """The store's usage of ``service`` once ``expected`` requests arrived (or the wait ran
    out), per tenant and hour."""
    deadline = time.monotonic() + wait
    while True:
        rows = store.usage()
        rows = rows[rows["service"] == service]
        if rows["requests"].sum() >= expected or time.monotonic() > deadline:
            return rows.groupby(["client", "window_start"], as_index=False)[
                ["requests", "cpu_seconds"]].sum()  # fmt: skip
        time.sleep(0.3)


def check(rows: pd.DataFrame, burned: dict[str, float], per_tenant: int, hours: set[str],
          more: dict[str, int] | None = None) -> None:  # fmt: skip
    """``more``: requests a tenant made besides ``per_tenant`` (burning nothing)."""
    per_client = rows.groupby("client")[["requests", "cpu_seconds"]].sum()
    # no stranger; "" holds the probes start_app sent without a tenant header
    assert sorted(per_client.index) == ["", *sorted(TENANTS)], per_client
    assert per_client.loc["", "requests"] == PROBES, per_client
    for tenant, seconds in burned.items():
        extra = (more or {}).get(tenant, 0)
        assert per_client.loc[tenant, "requests"] == per_tenant + extra, per_client
        cpu = per_client.loc[tenant, "cpu_seconds"]
        assert abs(cpu - seconds) <= 0.1 * seconds, (tenant, cpu, seconds, per_client)
    # each request is in the UTC hour it completed: one of the hours the traffic spanned
    assert {pd.Timestamp(t).strftime("%Y-%m-%dT%H") for t in rows["window_start"]} <= hours


def hours_now(start: float) -> set[str]:
    return {time.strftime("%Y-%m-%dT%H", time.gmtime(t)) for t in (start, time.time())}


@pytest.mark.parametrize(("app", "paths"), [
    ("plain_app", ["/"]),
    ("starlette_app", ["/async", "/sync"]),
    ("fastapi_app", ["/async", "/sync"]),
])  # fmt: skip
def test_asgi_apps_under_uvicorn_count_each_tenant(
    store: Store, tmp_path: Path, app: str, paths: list[str]
) -> None:
    served = start_app(store, tmp_path, app, service=app.removesuffix("_app"))
    try:
        start = time.time()
        burned = drive(served, paths)
        rows = stored(store, served.service, REQUESTS * len(paths) * len(TENANTS) + PROBES)
    finally:
        stop(served)
    check(rows, burned, REQUESTS * len(paths), hours_now(start))


def test_flask_under_waitress_counts_each_tenant(store: Store, tmp_path: Path) -> None:
    """Also a request with two X-Tenant-Id headers, which waitress joins into one environ
    value ("client-a, client-b"): the first counts, as on ASGI."""
    served = start_app(store, tmp_path, "flask_app", service="flask", server="waitress")
    try:
        start = time.time()
        burned = drive(served, ["/sync"])
        twice = [("X-Tenant-Id", "client-a"), ("X-Tenant-Id", "client-b")]
        assert httpx.get(f"{served.url}/sync?ms=0", headers=twice, timeout=60).status_code == 200
        rows = stored(store, "flask", REQUESTS * len(TENANTS) + PROBES + 1)
    finally:
        stop(served)
    check(rows, burned, REQUESTS, hours_now(start), more={"client-a": 1})


@pytest.mark.parametrize("case", ["starlette", "workers-no-lifespan", "waitress"])
def test_sigterm_delivers_every_request(store: Store, tmp_path: Path, case: str) -> None:
    """No periodic flush: the usage arrives because of SIGTERM, with a request in flight.

    * uvicorn, one process: it imports the app first, then installs its handler; on SIGTERM
      it shuts down gracefully, restores the meter's handler and raises SIGTERM again.
    * uvicorn --workers 2, an app without lifespan: each worker imports the app after
      installing its handler, so the meter's handler chains to uvicorn's; the request in
      flight completes after it and is delivered at once (there is no shutdown event and
      the worker ends without atexit). Each worker posts its own sums.
    * waitress has no handler: the meter flushes and the process dies of SIGTERM as it
      would have. The last request is answered before its body is closed (a slow Flask
      close hook): the client has its answer when the signal comes, and it is counted, because
      the meter lets begun responses close before it flushes."""
    server = "waitress" if case == "waitress" else "uvicorn"
    app, path = {"starlette": ("starlette_app", "/async"), "waitress": ("flask_app", "/sync"),
                 "workers-no-lifespan": ("plain_app", "/")}[case]  # fmt: skip
    workers = case == "workers-no-lifespan"
    extra = {"TC_METER_NO_LIFESPAN": "1"} if workers else {}
    service = f"sigterm-{case}"
    served = start_app(store, tmp_path, app, service=service, server=server, flush=3600,
                       args=("--workers", "2") if workers else (), **extra)  # fmt: skip
    try:
        drive(served, [path])
        if server == "uvicorn":
            with httpx.Client(timeout=60) as client, ThreadPoolExecutor(1) as pool:
                slow = pool.submit(client.get, f"{served.url}{path}?ms=600",
                                   headers={"X-Tenant-Id": "client-c"})  # fmt: skip
                time.sleep(0.25)  # the slow request is running when the signal comes
                served.process.send_signal(signal.SIGTERM)
                assert slow.result().status_code == 200  # graceful: answered
        else:
            answer = httpx.get(f"{served.url}{path}?close_ms=400", timeout=60,
                               headers={"X-Tenant-Id": "client-c"})  # fmt: skip
            assert answer.status_code == 200  # answered; its body closes 400 ms later
            served.process.send_signal(signal.SIGTERM)
        code = served.process.wait(timeout=30)
    finally:
        if served.process.poll() is None:
            served.process.kill()
    # dies of SIGTERM, as before (uvicorn's supervisor of --workers exits normally)
    assert code == (0 if workers else -signal.SIGTERM), served.log.read_text()
    total = REQUESTS * len(TENANTS) + PROBES
    total += 1  # the request in flight, or answered and not yet closed, is counted
    rows = stored(store, service, total, wait=10)
    per_client = rows.groupby("client")["requests"].sum()
    assert per_client.sum() == total, (per_client, served.log.read_text())
    assert per_client["client-c"] == REQUESTS + 1
