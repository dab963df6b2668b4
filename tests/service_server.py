"""A real ``tenantcost serve`` (uvicorn) on a free 127.0.0.1 port, for the service tests.

The server is the command users run, in its own process: requests cross a real socket, the
application is built by uvicorn's factory from the exported settings, and its log (denials
included) is a file the tests can read.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from click.testing import Result

from .postgres_fixture import free_port

SECRET = "test-secret-0123456789abcdef"
START_SECONDS = 60.0
STORE_ENV = ("TENANTCOST_DB", "TENANTCOST_DATA", "TENANTCOST_SETTINGS", "TENANTCOST_SECRET",
             "TENANTCOST_MAX_RECORDS", "TENANTCOST_MAX_BODY")  # fmt: skip


@dataclass(frozen=True)
class Service:
    """A running server: its base URL and its log file."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def running_service(
    db: str,
    data: str,
    log: Path,
    *,
    secret: str = SECRET,
    args: tuple[str, ...] = (),
    environ: dict[str, str] | None = None,
) -> Iterator[Service]:
    """``tenantcost serve --db DB --data DATA --port P [args]``, up until the block ends
    (``environ``: variables set for the server on top of the test run's)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in STORE_ENV}
    env["TENANTCOST_SECRET"] = secret
    env.update(environ or {})
    command = [sys.executable, "-m", "tenantcost", "serve", "--db", db, "--data", data,
               "--host", "127.0.0.1", "--port", str(port), *args]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, log)
        yield Service(url, log, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tenantcost serve exited {process.returncode}: {log.read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"tenantcost serve did not answer within {START_SECONDS} s")


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "saas-three-clients"
MONTH = "2026-11"


def tenantcost(*args: str) -> str:
    """Run a ``tenantcost`` command (in this process, as the CLI runs it); its stdout."""
    done = invoke(*args)
    if done.exit_code != 0:
        raise AssertionError(f"tenantcost {' '.join(args)} exited {done.exit_code}: "
                             f"{done.stderr}")  # fmt: skip
    return str(done.stdout)


def invoke(*args: str) -> Result:
    """A ``tenantcost`` command's result (exit code, stdout and stderr apart)."""
    from typer.testing import CliRunner

    from tenantcost.cli import app

    return CliRunner().invoke(app, list(args), env={k: None for k in STORE_ENV})


def example_store(db: str, data: str, *, close: bool = True) -> None:
    """The bundled example ingested and run (and closed, revision 1) in the store ``db``."""
    store = ("--db", db, "--data", data)
    tenantcost("db", "upgrade", *store)
    tenantcost("rules", "load", str(EXAMPLE / "rules.yaml"), *store)
    tenantcost("ingest", "usage", "--usage", str(EXAMPLE / "usage.csv"), *store)
    tenantcost("ingest", "costs", "--costs", str(EXAMPLE / "costs.json"), *store)
    tenantcost("run", "--month", MONTH, *store)
    if close:
        tenantcost("close", "--month", MONTH, "--allow-incomplete", *store)


def create_token(db: str, role: str, name: str, *clients: str, expires: str | None = None) -> str:
    """A new token (``token create`` prints it alone on stdout)."""
    args = ["token", "create", "--role", role, "--name", name, "--db", db]
    for client in clients:
        args += ["--client", client]
    if expires is not None:
        args += ["--expires", expires]
    out = tenantcost(*args)
    assert out.count("\n") == 1 and out.startswith("tc_"), out
    return out.strip()
