"""``report --engine dask``: the pack's allocations and PDFs on a Dask cluster, same files.

Real runs of the command on the bundled example (three clients: four PDFs) under the serial
path (``--jobs 1``), the local process pool (``--jobs 2``) and a Dask cluster (``--engine
dask --workers 2``, and an existing cluster through ``--scheduler``), with the generation time
pinned: every file is byte for byte the same. The pages name the output folder (the command
that reproduces the pack, the PDFs' links), so every run writes into the same folder.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributed import LocalCluster
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "saas-three-clients"
AT = "2026-12-01T00:00:00Z"
runner = CliRunner()


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A real Dask cluster: scheduler and two worker processes on loopback."""
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as local:
        yield local


def _report(out: Path, *extra: str) -> dict[str, bytes]:
    """Run ``report`` on the example into ``out`` (emptied first); every file's bytes."""
    shutil.rmtree(out, ignore_errors=True)
    result = runner.invoke(
        app,
        ["report", "--config", str(EXAMPLE / "rules.yaml"), "--format", "html,md,pdf",
         "--generated-at", AT, "--out", str(out), *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.*"))}


def test_every_engine_writes_the_same_files(tmp_path: Path) -> None:
    out = tmp_path / "pack"
    serial = _report(out, "--jobs", "1")
    pool = _report(out, "--jobs", "2")
    dask = _report(out, "--engine", "dask", "--workers", "2")
    assert sorted(serial) == [
        "clients/client-a.html", "clients/client-a.md", "clients/client-a.pdf",
        "clients/client-b.html", "clients/client-b.md", "clients/client-b.pdf",
        "clients/client-c.html", "clients/client-c.md", "clients/client-c.pdf",
        "finance-summary.html", "finance-summary.md", "finance-summary.pdf", "index.html",
    ]  # fmt: skip
    for name, data in serial.items():
        assert pool[name] == data, f"--jobs 2: {name}"
        assert dask[name] == data, f"--engine dask: {name}"
    assert serial["finance-summary.pdf"].startswith(b"%PDF-")
    assert b"2026-12-01T00:00:00Z" in serial["clients/client-a.md"]


def test_an_existing_cluster_runs_the_allocations_and_writes_the_pdfs(
    tmp_path: Path, cluster: LocalCluster
) -> None:
    out = tmp_path / "pack"
    local = _report(out, "--jobs", "1")
    remote = _report(out, "--engine", "dask", "--scheduler", cluster.scheduler_address)
    assert remote == local
    ran = set(cluster.scheduler.task_prefixes)  # the kinds of task the scheduler has seen
    # the PDFs, and the main run with its re-runs under every alternative key, ran there
    assert {"pdf_bytes", "tenantcost-chunk"} <= ran


def test_a_pdf_from_the_store_on_the_cluster(tmp_path: Path, cluster: LocalCluster) -> None:
    db = ["--db", f"sqlite:///{tmp_path / 's.db'}", "--data", str(tmp_path / "data")]
    for args in (
        ["db", "upgrade"],
        ["rules", "load", str(EXAMPLE / "rules.yaml")],
        ["ingest", "usage", "--usage", str(EXAMPLE / "usage.csv")],
        ["ingest", "costs", "--costs", str(EXAMPLE / "costs.json")],
        ["close", "--month", "2026-11", "--allow-incomplete"],
    ):
        done = runner.invoke(app, [*args, *db])
        assert done.exit_code == 0, done.output
    render = ["report", "--month", "2026-11", "--from-db", "--format", "pdf", "--generated-at",
              AT, *db, "--out", str(tmp_path / "pdf")]  # fmt: skip
    done = runner.invoke(app, [*render, "--jobs", "1"])
    assert done.exit_code == 0, done.output
    local = {p.name: p.read_bytes() for p in sorted((tmp_path / "pdf").rglob("*.pdf"))}
    shutil.rmtree(tmp_path / "pdf")
    done = runner.invoke(app, [*render, "--engine", "dask", "--scheduler",
                               cluster.scheduler_address])  # fmt: skip
    assert done.exit_code == 0, done.output
    remote = {p.name: p.read_bytes() for p in sorted((tmp_path / "pdf").rglob("*.pdf"))}
    assert sorted(local) == ["client-a.pdf", "client-b.pdf", "client-c.pdf", "finance-summary.pdf"]
    assert remote == local


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--engine", "dask", "--scheduler", "nonsense"], "--scheduler: not a Dask scheduler"),
        (["--engine", "dask", "--scheduler", "foo://host:1"], "unknown scheme 'foo'"),
        (["--engine", "dask", "--workers", "2", "--jobs", "2"], "--jobs sets the local engine"),
        (["--scheduler", "tcp://127.0.0.1:8786"], "--scheduler and --workers need --engine dask"),
        (["--engine", "spark"], "--engine: expected local or dask"),
    ],
)
def test_bad_engine_options_are_one_line(tmp_path: Path, extra: list[str], fragment: str) -> None:
    result = runner.invoke(
        app,
        ["report", "--config", str(EXAMPLE / "rules.yaml"), "--out", str(tmp_path / "x"), *extra],
    )
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert fragment in err and "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


def test_report_help_names_the_engine_options() -> None:
    result = runner.invoke(app, ["report", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for option in ("--engine", "--scheduler", "--workers", "--jobs"):
        assert option in result.output
