"""What applications install: the ``tenantcost-meter`` wheel, built as ``pip install ./meter``
builds it (PEP 517, isolated, from a copy of ``meter/``), installed into a plain venv with no
other package (not even pip: the outer pip installs it), meters a WSGI app there and spools
its batch, with the standard library only.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from .test_wheel import _run

METER = Path(__file__).resolve().parents[1] / "meter"

SCRIPT = r"""
import json, sys, time
started = time.perf_counter()
import tenantcost_meter
imported = time.perf_counter() - started
from tenantcost_meter import Meter

meter = Meter(service="api", url="http://127.0.0.1:9", token="tc_x", flush_seconds=3600,
              spool_dir=sys.argv[1])

def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]

wsgi = meter.wsgi(app, tenant_header="X-Tenant-Id")
for tenant in ("client-a", "client-a", "client-b"):
    body = wsgi({"HTTP_X_TENANT_ID": tenant, "REQUEST_METHOD": "GET"}, lambda *a: None)
    b"".join(body)
    body.close()
meter.flush(timeout=0.5)  # nobody listens on port 9: the batch stays spooled
print(json.dumps({"file": tenantcost_meter.__file__, "imported": imported,
                  "modules": sorted(m for m in sys.modules if m.split(".")[0] in
                                    ("pandas", "duckdb", "fastapi", "numpy", "pyarrow"))}))
"""


@pytest.mark.slow  # an isolated PEP 517 build, a venv
def test_the_meter_wheel_runs_alone_in_a_plain_venv(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(METER, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info",
                                                              "build"))  # fmt: skip
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", dist, src], cwd=tmp_path)
    (wheel,) = dist.glob("tenantcost_meter-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path)  # not even pip
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-index",
          wheel], cwd=tmp_path)  # fmt: skip
    spool = tmp_path / "spool"
    done = _run([python, "-c", SCRIPT, spool], cwd=tmp_path)
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert venv.resolve() in Path(shown["file"]).resolve().parents
    assert shown["modules"] == []
    (batch,) = spool.glob("*.json")  # spooled before the (failed) POST, nothing lost
    body = json.loads(batch.read_text())["body"]
    assert body["mode"] == "sum"
    got = {r["client"]: r["requests"] for r in body["records"]}
    assert got == {"client-a": 2, "client-b": 1}
