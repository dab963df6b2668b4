"""``report --jobs N``: PDFs written by N worker processes are the serial path's, byte for byte.

Real runs of the command on the bundled example (three clients: four PDFs), with the
generation time pinned so the two packs can be compared file by file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.report.pdf import default_jobs

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "saas-three-clients"
runner = CliRunner()


def _report(out: Path, *extra: str) -> list[str]:
    result = runner.invoke(
        app,
        [
            "report",
            "--config",
            str(EXAMPLE / "rules.yaml"),
            "--generated-at",
            "2026-12-01T00:00:00Z",
            "--out",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return sorted(str(p.relative_to(out)) for p in out.rglob("*.*"))


def test_pdfs_in_two_processes_equal_the_serial_ones(tmp_path: Path) -> None:
    out = tmp_path / "out"  # one folder for both: the pages name it (a PDF compresses it)
    names = _report(out, "--format", "pdf,html", "--jobs", "1")
    serial = {name: (out / name).read_bytes() for name in names}
    shutil.rmtree(out)
    assert _report(out, "--format", "pdf,html", "--jobs", "2") == names
    pdfs = [n for n in names if n.endswith(".pdf")]
    assert pdfs == [
        "clients/client-a.pdf",
        "clients/client-b.pdf",
        "clients/client-c.pdf",
        "finance-summary.pdf",
    ]
    for name in names:
        assert (out / name).read_bytes() == serial[name], name
    assert serial[pdfs[0]].startswith(b"%PDF-")


def test_jobs_must_be_positive(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "report",
            "--config",
            str(EXAMPLE / "rules.yaml"),
            "--out",
            str(tmp_path / "x"),
            "--jobs",
            "0",
        ],
    )
    assert result.exit_code == 2
    assert "--jobs" in result.output
    assert not (tmp_path / "x").exists()


def test_default_jobs_is_the_cores_this_process_may_use() -> None:
    import os

    assert default_jobs() == len(os.sched_getaffinity(0)) >= 1
