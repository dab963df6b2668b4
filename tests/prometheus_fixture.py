"""A real Prometheus for tests: generated counter history, backfilled, served on loopback.

The history is generated per scrape (every 15 s for 12 hours from 2024-03-04 00:00 UTC) as
*usage increments*: ``usage[i]`` is what happened between scrape ``i - 1`` and scrape ``i``. The
counter values written to OpenMetrics are derived from the increments (a restart sets the counter
back to the increment since the restart), so tests can compute the expected usage per window
from ``usage`` alone, without Prometheus' algorithm.

Every scrape time is a multiple of 15 s and every window boundary is a scrape time, so
``increase(x[1h])`` evaluated at a window end sees samples exactly at both edges of the range
and does not extrapolate: the result is exactly ``sum(usage)`` over the window (see
docs/prometheus.md). Values are integers (requests) and multiples of 0.25 (CPU seconds), so every
sum is exact in float64.

The scenario:

- service ``api``: client ``a`` on pods ``p1`` and ``p2`` (``p2`` restarts at 04:20, a counter
  reset in both metrics), client ``b`` on ``p1`` (``app_requests_total`` not scraped from 01:00
  to 03:00: the hours ending 02:00 and 03:00 have no requests sample), and a series without a
  client label on ``p1``;
- service ``import``: client ``b`` on ``w1`` and client ``c`` on ``w1`` (both metrics not scraped
  from 06:00 to 09:00: three hours without any sample).

:func:`running_prometheus` backfills with ``promtool tsdb create-blocks-from openmetrics`` and
starts ``prometheus`` on a free loopback port; tests wrap it in a session-scoped fixture.
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

T0 = pd.Timestamp("2024-03-04T00:00:00Z")
"""First scrape of the generated history (and start of the first window)."""
HOURS = 12
SCRAPE_SECONDS = 15
PER_HOUR = 3600 // SCRAPE_SECONDS
SLOTS = HOURS * PER_HOUR + 1  # scrapes at T0, T0 + 15 s, ..., T0 + 12 h inclusive

METRICS = {"requests": "app_requests", "cpu_seconds": "app_cpu_seconds"}
"""Usage column -> OpenMetrics counter family (samples are ``<family>_total``)."""

INSTALL_HINT = (
    "run the README's test command, `bash scripts/test.sh`, which installs the Debian package "
    "'prometheus' (it provides prometheus and promtool)"
)


@dataclass(frozen=True)
class Series:
    """One generated counter series: its labels, per-scrape usage and which scrapes exist."""

    family: str
    labels: dict[str, str]
    usage: np.ndarray  # usage[i] = increment between scrape i - 1 and scrape i (usage[0] unused)
    scraped: np.ndarray  # bool per scrape slot
    restarts: tuple[int, ...] = ()
    initial: float = 0.0

    @property
    def values(self) -> np.ndarray:
        """Counter values at each scrape, derived from the increments and restarts."""
        values = np.empty(SLOTS, dtype="float64")
        current = self.initial
        for i in range(SLOTS):
            if i in self.restarts:
                current = 0.0
            if i > 0:
                current += float(self.usage[i])
            values[i] = current
        return values

    @property
    def times(self) -> np.ndarray:
        """Unix seconds of every scrape slot."""
        return int(T0.timestamp()) + SCRAPE_SECONDS * np.arange(SLOTS, dtype=np.int64)


@dataclass(frozen=True)
class History:
    """The generated scenario."""

    series: list[Series] = field(default_factory=list)

    def openmetrics(self) -> str:
        """The whole history as OpenMetrics text (families grouped, samples in time order)."""
        lines: list[str] = []
        for family in METRICS.values():
            lines.append(f"# TYPE {family} counter")
            lines.append(f"# HELP {family} Generated test counter.")
            for s in (s for s in self.series if s.family == family):
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                name = f"{family}_total{{{labels}}}"
                lines.extend(
                    f"{name} {value!r} {t}"
                    for value, t, ok in zip(
                        s.values.tolist(), s.times.tolist(), s.scraped.tolist(), strict=True
                    )
                    if ok
                )
        lines.append("# EOF")
        return "\n".join(lines) + "\n"


def _slot(hours: float) -> int:
    return round(hours * PER_HOUR)


def generate_history(seed: int = 20240304) -> History:
    """The scenario described in the module docstring (deterministic)."""
    rng = np.random.default_rng(seed)
    restart = _slot(4 + 20 / 60)
    requests_gap = (_slot(1), _slot(3))  # scrapes strictly inside are missing
    import_gap = (_slot(6), _slot(9))
    layout = [
        # (service, client or None, pod, requests per scrape, CPU quarter-seconds per scrape)
        ("api", "a", "p1", 20.0, 6),
        ("api", "a", "p2", 15.0, 5),
        ("api", "b", "p1", 1.0, 3),
        ("api", None, "p1", 2.0, 2),
        ("import", "b", "w1", 0.5, 40),
        ("import", "c", "w1", 0.1, 8),
    ]
    series: list[Series] = []
    for service, client, pod, request_rate, cpu_quarters in layout:
        labels = {"service": service, "pod": pod}
        if client is not None:
            labels["client"] = client
        for column, family in METRICS.items():
            if column == "requests":
                usage = rng.poisson(request_rate, SLOTS).astype("float64")
            else:
                usage = rng.integers(0, cpu_quarters + 1, SLOTS).astype("float64") * 0.25
            scraped = np.ones(SLOTS, dtype=bool)
            gap = None
            if (service, client) == ("import", "c"):
                gap = import_gap
            elif (service, client, column) == ("api", "b", "requests"):
                gap = requests_gap
            if gap is not None:
                scraped[gap[0] + 1 : gap[1]] = False
            restarts = (restart,) if pod == "p2" else ()
            initial = float(rng.integers(1_000, 5_000))
            s = Series(family, labels, usage, scraped, restarts, initial)
            if restarts:
                values = s.values
                assert values[restart] < values[restart - 1], "the restart must look like a reset"
            series.append(s)
    return History(series)


# --------------------------------------------------------------------------- server


@dataclass(frozen=True)
class PrometheusServer:
    """A running Prometheus: where it listens and the history it serves."""

    url: str
    history: History
    command: list[str]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_binary(name: str) -> str:
    """The path of ``name``; FAIL the test session (not skip) when it is missing."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"'{name}' is not on PATH: {INSTALL_HINT}", pytrace=False)
    return path


def backfill(history: History, workdir: Path) -> Path:
    """Write the history as OpenMetrics and turn it into TSDB blocks; returns the data dir."""
    promtool = require_binary("promtool")
    source = workdir / "history.om.txt"
    source.write_text(history.openmetrics(), encoding="utf-8")
    data = workdir / "data"
    data.mkdir()
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"promtool backfill failed: {done.stderr.strip()[-2000:]}", pytrace=False)
    return data


@contextmanager
def serve(
    data: Path,
    workdir: Path,
    *,
    web_config: str | None = None,
    probe_auth: tuple[str, str] | None = None,
    scrape: list[str] | None = None,
) -> Iterator[tuple[str, list[str]]]:
    """Run ``prometheus`` on ``data`` until the block exits; yields (url, command line).
    ``scrape``: ``host:port`` targets whose ``/metrics`` it scrapes every second."""
    prometheus = require_binary("prometheus")
    config = workdir / "prometheus.yml"
    if scrape:
        targets = ", ".join(f'"{t}"' for t in scrape)
        job = f"  - job_name: tenantcost\n    static_configs: [{{targets: [{targets}]}}]\n"
        text = f"global:\n  scrape_interval: 1s\nscrape_configs:\n{job}"
        config.write_text(text, encoding="utf-8")
    else:
        config.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n", encoding="utf-8")
    port = free_port()
    command = [
        prometheus,
        f"--config.file={config}",
        f"--storage.tsdb.path={data}",
        "--storage.tsdb.retention.time=100y",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    if web_config is not None:
        web = workdir / "web.yml"
        web.write_text(web_config, encoding="utf-8")
        command.append(f"--web.config.file={web}")
    log_path = workdir / "prometheus.log"
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(url, process, log_path, probe_auth)
        yield url, command
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _wait_ready(
    url: str,
    process: subprocess.Popen[bytes],
    log_path: Path,
    auth: tuple[str, str] | None,
    timeout: float = 30.0,
) -> None:
    request = urllib.request.Request(f"{url}/-/ready")
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            pytest.fail(f"prometheus exited with code {process.returncode}: {log}", pytrace=False)
        try:
            with urllib.request.urlopen(request, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.05)
    process.terminate()
    log = log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
    pytest.fail(f"prometheus not ready after {timeout:g} s: {log}", pytrace=False)


@contextmanager
def running_prometheus(workdir: Path, history: History | None = None) -> Iterator[PrometheusServer]:
    """Backfill ``history`` (default: :func:`generate_history`) and serve it."""
    history = history if history is not None else generate_history()
    data = backfill(history, workdir)
    with serve(data, workdir) as (url, command):
        yield PrometheusServer(url, history, command)
