"""The service's image: the repository's ``Dockerfile`` built from this checkout and run with
podman as Kubernetes runs it (tests/image_fixture.py: a Debian base built with mmdebstrap,
since no image registry is reachable).

Every container runs with a read-only root, an empty /tmp, uid 10001 and no capabilities,
on the host's network: ``db upgrade`` on a real PostgreSQL 15, ``serve`` detached until
``/readyz`` says ready, then the CronJobs' commands (``rules load``, ``ingest usage``, the
hourly ``ingest --since-last --opencost-url`` against a server replaying OpenCost's answer,
``run --month``) in containers of their own on the same database and data folder, checked
against ``allocate`` on the same files and through the running service's API (a cost sheet's
PDF included: WeasyPrint's libraries and fonts are in the image). The image's metadata and
contents (the package data, nothing of the source tree or of the build) are checked too.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

from .image_fixture import HARDENED, ROOT, Podman, require_tools
from .opencost_server import FileScenario, OpenCostServer, running
from .postgres_fixture import free_port, new_database

pytestmark = pytest.mark.slow

EXAMPLE = ROOT / "examples" / "saas-three-clients"
MONTH = "2026-11"
UID = "10001"
STORE = "/var/lib/tenantcost"
"""The image's volume and working directory: the tests mount a host folder there."""
IN_IMAGE = r"""
import importlib.metadata as md, importlib.resources as r, importlib.util, json, sys, tenantcost
pkg = r.files("tenantcost")
def names(folder, *suffixes):
    return sorted(p.name for p in folder.iterdir() if p.is_file() and p.name.endswith(suffixes))
dist = md.distribution("tenantcost")
print(json.dumps({
    "module": tenantcost.__file__,
    "python": sys.version_info[:2],
    "templates": names(pkg / "templates", ".html", ".md", ".css"),
    "service_templates": names(pkg / "templates" / "service", ".html", ".css"),
    "migrations": names(pkg / "store" / "migrations" / "versions", ".py"),
    "alembic": names(pkg / "store" / "migrations", ".py", ".mako"),
    "defaults": (pkg / "config" / "defaults.yaml").is_file(),
    "demo_data": names(pkg / "service" / "demo_data", ".yaml", ".csv", ".json"),
    "direct_url": json.loads(dist.read_text("direct_url.json") or "{}"),
    "s3fs": importlib.util.find_spec("s3fs") is not None,
}))
"""
"""Where the installed package is and what package data it finds (run in the image)."""
SITE = "/opt/tenantcost/lib/python3*/site-packages"
LEFTOVERS = (
    "for p in /work /src /wheels /root/.cache /opt/tenantcost/bin/pip; do "
    '[ -e "$p" ] && echo "present: $p"; done; '
    # the source tree's files anywhere but in the dependencies and the standard library
    "find / -xdev \\( -path '*/site-packages' -o -path '/usr/lib/python3*' \\) -prune -o "
    "\\( -name pyproject.toml -o -name 'tenantcost-*.whl' -o -name setup.py -o -name .git "
    "-o -name '*.egg-info' -o -name conftest.py -o -name 'test_*.py' \\) -print; "
    f"find {SITE}/tenantcost -name 'test*' -o -name conftest.py; "
    f"ls -d {SITE}/*.egg-info {SITE}/__editable__* {SITE}/pyproject.toml 2>/dev/null; "
    f"grep -l -e /work -e /src {SITE}/*.pth 2>/dev/null; "
    "for c in gcc cc g++ make pip pip3; do command -v $c; done; true"
)
"""What the build may not leave in the final image (printed: the answer must be empty)."""
runner = CliRunner()


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    require_tools()
    return Podman.in_folder(tmp_path_factory.mktemp("podman"))


@pytest.fixture(scope="module")
def image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The image's id, built from this checkout on the Debian base."""
    return podman.build(podman.base_image(), tmp_path_factory.mktemp("image"))


def one_line_error(done, *fragments: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    err = done.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in done.stdout + done.stderr
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


def test_the_image_runs_tenantcost_as_a_non_root_user(podman: Podman, image: str) -> None:
    config = podman.inspect(image)["Config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["tenantcost"]
    assert config["Cmd"] == ["serve", "--host", "0.0.0.0", "--port", "8000"]
    assert set(config["ExposedPorts"]) == {"8000/tcp", "9090/tcp"}
    assert config["WorkingDir"] == STORE and set(config["Volumes"]) == {STORE}
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    assert env["HOME"] == "/tmp" and env["XDG_CACHE_HOME"].startswith("/tmp/")
    assert env["PATH"].startswith("/opt/tenantcost/bin:")
    assert not [name for name in env if name.startswith("PIP_")]
    history = podman("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
    assert "PIP_CERT=" not in history and "pip.conf" not in history  # the build stage's only

    # The image's own user (no --user: what a pod without runAsUser gets), and the default
    # command's program answers.
    shell = ["--entrypoint", "sh"]
    who = podman("run", "--rm", "--read-only", "--network", "none", *shell, image, "-c",
                 "id -u; id -g; tenantcost --version")  # fmt: skip
    assert who.stdout.split("\n")[:2] == [UID, UID]
    assert re.fullmatch(r"tenantcost \d+\.\d+\.\d+\S*", who.stdout.split("\n")[2])
    # Read-only root: writing outside /tmp fails, /tmp works.
    probe = podman.run(image, "-c", "touch /probe; touch /tmp/probe && echo tmp-ok",
                       options=shell)  # fmt: skip
    assert "Read-only file system" in probe.stderr and probe.stdout.strip() == "tmp-ok"


def test_the_image_holds_the_package_data_and_nothing_of_the_build(
    podman: Podman, image: str
) -> None:
    done = podman.run(image, "-c", IN_IMAGE, options=["--entrypoint", "python"])
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    package = ROOT / "tenantcost"
    assert found["module"].startswith("/opt/tenantcost/lib/python3.")
    assert found["module"].endswith("/site-packages/tenantcost/__init__.py")
    assert found["python"] >= [3, 11]
    assert not found["direct_url"].get("dir_info", {}).get("editable")  # installed from the wheel

    def files(folder: Path, *suffixes: str) -> list[str]:
        return sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in suffixes)

    assert found["templates"] == files(package / "templates", ".html", ".md", ".css")
    assert found["service_templates"] == files(package / "templates" / "service", ".html", ".css")
    migrations = package / "store" / "migrations"
    assert found["migrations"] == files(migrations / "versions", ".py") and found["migrations"]
    assert {"env.py", "script.py.mako"} <= set(found["alembic"])
    assert found["defaults"] and found["demo_data"]
    assert found["s3fs"]  # the default EXTRAS: s3:// data directories and billing exports
    # Nothing of the source tree, the wheel, pip, its cache or a compiler (as root, to see all).
    left = podman.run(image, "-c", LEFTOVERS, options=["--entrypoint", "sh", "--user", "0"])
    assert left.returncode == 0 and left.stdout.strip() == "", left.stdout


@dataclass
class Served:
    """The service's container and the store it serves."""

    url: str
    metrics: str
    store: list[str]
    """The options of a container on the same store (its environment and folders)."""
    name: str


@pytest.fixture
def served(podman: Podman, image: str, postgres_admin_url: str, tmp_path: Path) -> Iterator[Served]:
    """``db upgrade`` then ``serve`` (detached) on a fresh PostgreSQL database, as the chart's
    migration Job and Deployment do (two workers, /metrics on a port of its own); the
    container is removed at the end."""
    db = new_database(postgres_admin_url)
    data = tmp_path / "store"  # the claim, mounted at /var/lib/tenantcost
    data.mkdir()
    os.chmod(data, 0o777)  # its files are uid 10001's in the container
    store = ["-e", f"TENANTCOST_DB={db}", "-e", f"TENANTCOST_DATA={STORE}/data",
             "-v", f"{data}:{STORE}", "-v", f"{EXAMPLE}:/examples:ro"]  # fmt: skip
    upgraded = podman.run(image, "db", "upgrade", options=store)
    assert upgraded.returncode == 0, upgraded.stderr
    assert "Traceback" not in upgraded.stderr

    port, metrics_port = free_port(), free_port()
    name = f"tenantcost-test-serve-{os.getpid()}-{secrets.token_hex(4)}"
    secret = ["-e", f"TENANTCOST_SECRET={secrets.token_urlsafe(24)}"]
    try:
        podman("run", "--detach", "--name", name, *HARDENED, *store, *secret, image,
               "serve", "--host", "0.0.0.0", "--port", str(port), "--workers", "2",
               "--metrics-port", str(metrics_port))  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_ready(podman, name, url)
        yield Served(url, f"http://127.0.0.1:{metrics_port}/metrics", store, name)
    finally:
        podman("rm", "--force", "--volumes", "--time", "2", name, check=False)


def wait_ready(podman: Podman, name: str, url: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            answer = httpx.get(f"{url}/readyz", timeout=5)
            if answer.status_code == 200:
                assert answer.json()["status"] == "ready", answer.text
                return
        except httpx.TransportError:
            pass
        state = podman("inspect", "--format", "{{.State.Running}}", name, check=False)
        if state.stdout.strip() != "true" or time.monotonic() > deadline:
            logs = podman("logs", name, check=False)
            pytest.fail(f"serve did not get ready ({state.stdout.strip()}):\n"
                        f"{logs.stdout[-3000:]}{logs.stderr[-3000:]}", pytrace=False)  # fmt: skip
        time.sleep(0.5)


@pytest.fixture
def opencost() -> Iterator[OpenCostServer]:
    """OpenCost's answer for the example's hour, replayed on 127.0.0.1."""
    with running(FileScenario.from_files(EXAMPLE / "costs.json")) as server:
        yield server


def poppler(tool: str, *args: str | Path) -> str:
    """pdffonts or pdftotext (Debian's poppler-utils, part of the test setup)."""
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} not found: install Debian poppler-utils, or run the README test "
                    "command (bash scripts/test.sh), which installs it", pytrace=False)  # fmt: skip
    done = subprocess.run([tool, *map(str, args)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_service_and_cronjobs_on_postgresql(
    podman: Podman, image: str, served: Served, opencost: OpenCostServer, tmp_path: Path
) -> None:
    health = httpx.get(f"{served.url}/healthz", timeout=10)
    assert health.status_code == 200 and health.json() == {"status": "ok"}

    def job(*command: str) -> str:
        done = podman.run(image, *command, options=served.store)
        assert done.returncode == 0, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        return done.stdout

    token = job("token", "create", "--role", "admin", "--name", "image-test").strip()
    assert token.startswith("tc_") and "\n" not in token
    job("rules", "load", "/examples/rules.yaml")
    job("ingest", "usage", "--usage", "/examples/usage.csv")
    # The chart's hourly CronJob, at 11:05 the day of the example's hour: pulls 10:00 to 11:00.
    hourly = ["ingest", "--since-last", "--opencost-url", opencost.url, "--lookback", "1"]
    pulled = job(*hourly, "--now", "2026-11-03T11:05:00Z")
    assert pulled.startswith("costs: batch ")
    assert "windows 2026-11-03T10:00:00Z to 2026-11-03T11:00:00Z" in pulled
    assert [r.params["window"] for r in opencost.requests] == [
        "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z"
    ]
    document = json.loads(job("run", "--month", MONTH, "--format", "json"))
    run_id = document.pop("run_id")

    # The same figures as `allocate` on the example's files, on the host.
    files = runner.invoke(app, ["allocate", "--config", str(EXAMPLE / "rules.yaml"),
                                "--month", MONTH, "--format", "json"])  # fmt: skip
    assert files.exit_code == 0, files.output
    expected = json.loads(files.stdout)
    amounts = {c["client"]: c["amount"] for c in document["clients"]}
    assert amounts == {c["client"]: c["amount"] for c in expected["clients"]}
    assert document["reference_total"] == expected["reference_total"] and document["gap"] == 0

    # ... and what the running service answers from the same database.
    api = httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {token}"},
                       timeout=60)  # fmt: skip
    with api:
        months = api.get("/api/v1/months")
        assert months.status_code == 200, months.text
        [month] = [m for m in months.json() if m["month"] == MONTH]
        assert month["runs"] >= 1, month
        client = next(iter(amounts))
        figure = api.get(f"/api/v1/clients/{client}/months/{MONTH}")
        assert figure.status_code == 200, figure.text
        assert figure.json()["run_id"] == run_id
        assert figure.json()["amount"] == amounts[client]
        pdf = api.get(f"/api/v1/clients/{client}/months/{MONTH}/sheet.pdf")
        assert pdf.status_code == 200, pdf.text[:2000]
        assert pdf.headers["content-type"].startswith("application/pdf")
        assert pdf.content.startswith(b"%PDF-")
        sheet = tmp_path / "sheet.pdf"
        sheet.write_bytes(pdf.content)
        fonts = poppler("pdffonts", sheet)  # the image's fonts, the CSS's first choices
        assert "+Liberation-Sans" in fonts and "+DejaVu-Sans-Mono" in fonts, fonts
        assert client in poppler("pdftotext", sheet, "-")

    # A failing CronJob: OpenCost refuses the next hour's request; one line, exit 2.
    opencost.queue("http400")
    failed = podman.run(image, *hourly, "--now", "2026-11-03T12:05:00Z", options=served.store)
    one_line_error(failed, opencost.url)
    # /metrics: the workers' requests (prometheus_client's multiprocess files, in /tmp) and
    # what the CronJobs did, read from the store.
    metrics = httpx.get(served.metrics, timeout=30)
    assert metrics.status_code == 200, metrics.text[:2000]
    for line in (r"tenantcost_store_up 1(\.0)?", r"tenantcost_http_requests_total\{.*",
                 r'tenantcost_runs_total\{status="succeeded"\} 1(\.0)?'):  # fmt: skip
        assert re.search(f"^{line}$", metrics.text, re.M), (line, metrics.text)
    logs = podman("logs", served.name)
    assert "Traceback" not in logs.stdout + logs.stderr
    assert "Fontconfig error" not in logs.stdout + logs.stderr
