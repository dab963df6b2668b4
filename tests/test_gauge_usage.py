"""A pool keyed by a gauge (``metrics: {storage_bytes: {kind: gauge}}``): split by each
client's byte-hours, from sample files (``allocate``) and from the store (``ingest`` then
``run``); counters given as samples and gauges given as windows are refused."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "saas-three-clients"
runner = CliRunner()
GIB = 2**30
SAMPLES = (
    "time,service,client,storage_bytes\n"
    f"2026-11-03T09:30:00Z,db,client-a,{GIB}\n"
    f"2026-11-03T09:00:00Z,db,client-b,{3 * GIB}\n"
    "2026-11-03T10:30:00Z,db,client-b,0\n"
    "2026-11-03T10:00:00.000001Z,db,client-c,536870912.5\n"
)
# byte-hours in 10:00-11:00: a 1 GiB all hour, b 3 GiB half an hour, c 0.5 GiB from 1 µs in
MEASURES = {"client-a": GIB, "client-b": 1.5 * GIB, "client-c": (GIB / 2 + 0.5) * (1 - 1 / 3.6e9)}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copy(EXAMPLE / "costs.json", tmp_path)
    usage = (EXAMPLE / "usage.csv").read_text().splitlines(keepends=True)
    (tmp_path / "usage.csv").write_text("".join(r for r in usage if "import-worker" not in r))
    (tmp_path / "storage.csv").write_text(SAMPLES)
    rules = yaml.safe_load((EXAMPLE / "rules.yaml").read_text())
    rules["metrics"] = {"storage_bytes": {"kind": "gauge", "unit": "byte", "stale_after": "6h"}}
    rules["sources"] = {"costs": ["costs.json"], "usage": ["usage.csv", "storage.csv"]}
    worker = rules["rules"][0]["workloads"][1]
    worker.update(service="db", key="storage_bytes")
    rules["rules"][0]["external"][0]["services"] = ["api"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    return tmp_path


def db_lines(document: dict) -> dict[str, tuple[float, int]]:
    return {
        c["client"]: (line["measure"], line["amount"])
        for c in document["clients"]
        for line in c["lines"]
        if line["source"] == "db"
    }


def test_allocate_splits_a_gauge_pool_by_byte_hours(folder: Path) -> None:
    done = runner.invoke(app, ["allocate", "--config", str(folder / "rules.yaml"),
                               "--format", "json"])  # fmt: skip
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    lines = db_lines(document)
    assert {c: m for c, (m, _) in lines.items()} == pytest.approx(MEASURES, abs=1e-6)
    pool = sum(a for _, a in lines.values())
    total = sum(MEASURES.values())
    for client, (_, amount) in lines.items():  # largest remainder of the exact shares
        assert abs(amount - pool * MEASURES[client] / total) < 1
    assert document["gap"] == 0


def test_a_counter_as_samples_and_a_gauge_as_windows_are_refused(folder: Path) -> None:
    (folder / "storage.csv").write_text(SAMPLES.replace("storage_bytes", "requests"))
    refused = runner.invoke(app, ["allocate", "--config", str(folder / "rules.yaml")])
    assert refused.exit_code == 2
    assert "storage.csv, header, column 'requests': 'requests' is given as samples" in (
        refused.stderr
    )
    checked = runner.invoke(app, ["check-config", str(folder / "rules.yaml"), "--usage",
                                  str(folder / "usage.csv"), "--usage",
                                  str(folder / "storage.csv")])  # fmt: skip
    assert checked.exit_code == 2 and "'requests' is given as samples" in checked.stderr
    usage = (folder / "usage.csv").read_text().splitlines()
    with_gauge = [usage[0] + ",storage_bytes", *(r + ",5" for r in usage[1:])]
    (folder / "usage.csv").write_text("\n".join(with_gauge) + "\n")
    (folder / "storage.csv").unlink()
    rules = yaml.safe_load((folder / "rules.yaml").read_text())
    rules["sources"]["usage"] = ["usage.csv"]
    (folder / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    refused = runner.invoke(app, ["allocate", "--config", str(folder / "rules.yaml")])
    assert refused.exit_code == 2
    assert "'storage_bytes' is declared a gauge (metrics:) but given as window usage" in (
        refused.stderr
    )
    assert "Traceback" not in refused.output
    checked = runner.invoke(app, ["check-config", str(folder / "rules.yaml"), "--usage",
                                  str(folder / "usage.csv")])  # fmt: skip
    assert checked.exit_code == 2 and "declared a gauge (metrics:) but given as window" in (
        checked.stderr
    )


def test_the_store_integrates_samples_across_batches(
    folder: Path, store_url: str, tmp_path: Path
) -> None:
    """`ingest usage` of a sample file is a usage batch of samples; `run` splits the gauge
    pool as `allocate` does; a later batch re-sending an instant replaces its level, and
    withdrawing it restores the first; a kind may not change, and a closed month refuses
    samples that reach it."""
    where = ["--db", store_url, "--data", str(tmp_path / "data")]

    def cli(*args: str):
        done = runner.invoke(app, [*args, *where])
        return done

    def run_lines() -> dict[str, tuple[float, int]]:
        done = cli("run", "--month", "2026-11", "--format", "json")
        assert done.exit_code == 0, done.output
        return db_lines(json.loads(done.stdout))

    for args in (("db", "upgrade"), ("rules", "load", str(folder / "rules.yaml")),
                 ("ingest", "costs", "--costs", str(folder / "costs.json")),
                 ("ingest", "usage", "--usage", str(folder / "usage.csv")),
                 ("ingest", "usage", "--usage", str(folder / "storage.csv"))):  # fmt: skip
        done = cli(*args)
        assert done.exit_code == 0, done.output
    assert "4 rows, 0 (window, service) cells, 0 file(s)" in done.stdout
    first = run_lines()
    status = cli("status", "--usage", "--month", "2026-11")
    assert status.exit_code == 0, status.output
    assert "storage_bytes (GiB-hours)" in status.stdout  # byte-hours, shown in GiB-hours
    assert re.search(r"db\s+client-b\s+0\s+0\.0\s+4\.50*\n", status.stdout), status.stdout
    assert {c: m for c, (m, _) in first.items()} == pytest.approx(MEASURES, abs=1e-6)
    allocated = runner.invoke(app, ["allocate", "--config", str(folder / "rules.yaml"),
                                    "--format", "json"])  # fmt: skip
    assert {c: a for c, (_, a) in first.items()} == {
        c: a for c, (_, a) in db_lines(json.loads(allocated.stdout)).items()
    }

    resent = folder / "resent.csv"  # client-b's 09:00 level measured again: 1 GiB
    resent.write_text(
        f"time,service,client,storage_bytes\n2026-11-03T09:00:00Z,db,client-b,{GIB}\n"
    )
    later = cli("ingest", "usage", "--usage", str(resent))
    assert later.exit_code == 0, later.output
    second = run_lines()
    assert second["client-b"][0] == pytest.approx(0.5 * GIB)
    uid = json.loads(cli("batch", "list", "--format", "json").stdout)[-1]["uid"]
    assert cli("batch", "withdraw", uid, "--reason", "wrong level").exit_code == 0
    assert run_lines() == first

    as_windows = folder / "windows.csv"
    as_windows.write_text("window_start,window_end,service,client,storage_bytes\n"
                          "2026-11-03T10:00:00Z,2026-11-03T11:00:00Z,db,client-a,5\n")  # fmt: skip
    refused = cli("ingest", "usage", "--usage", str(as_windows), "--mode", "sum")
    assert refused.exit_code == 2
    assert "'storage_bytes' is declared a gauge (metrics:) but given as window usage" in (
        refused.stderr
    )
    counter = folder / "rules-counter.yaml"
    rules = yaml.safe_load((folder / "rules.yaml").read_text())
    rules["metrics"]["storage_bytes"] = {"kind": "counter"}
    counter.write_text(yaml.safe_dump(rules, sort_keys=False))
    refused = cli("rules", "load", str(counter))
    assert refused.exit_code == 2
    assert "metrics.storage_bytes.kind: the store holds 'storage_bytes' as a gauge" in (
        refused.stderr
    )

    closing = cli("close", "--month", "2026-11", "--allow-incomplete")
    assert closing.exit_code == 0, closing.output
    closed = cli("ingest", "usage", "--usage", str(resent))
    assert closed.exit_code == 2 and "closed" in closed.stderr
    assert "Traceback" not in closed.output
