"""``report --generated-at``: the time the pages show, pinned, so two runs are byte-identical.

Real runs of the command on the bundled example; the time takes precedence over
``SOURCE_DATE_EPOCH`` (which itself takes precedence over the clock).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "saas-three-clients"
runner = CliRunner()


def _report(out: Path, *extra: str) -> None:
    result = runner.invoke(
        app,
        [
            "report",
            "--config",
            str(EXAMPLE / "rules.yaml"),
            "--format",
            "html,md",
            "--out",
            str(out),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output


def _files(folder: Path) -> dict[str, bytes]:
    """Every page, with the output folder (named in the reproduce command) normalised."""
    return {
        str(p.relative_to(folder)): p.read_bytes().replace(str(folder).encode(), b"OUT")
        for p in sorted(folder.rglob("*.*"))
    }


def test_two_runs_with_the_same_time_are_byte_identical(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _report(a, "--generated-at", "2026-12-01T08:30:00Z")
    _report(b, "--generated-at", "2026-12-01T08:30:00Z")
    files = _files(a)
    assert files == _files(b)
    assert len(files) == 9  # 3 clients x 2 formats, the summary in 2 formats, the index
    sheet = (a / "clients" / "client-a.md").read_text()
    assert "2026-12-01T08:30:00Z" in sheet


def test_generated_at_takes_precedence_over_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1790000000")  # 2026-09-21
    _report(tmp_path / "pinned", "--generated-at", "2026-12-01T10:00:00+02:00")
    _report(tmp_path / "epoch")
    pinned = (tmp_path / "pinned" / "finance-summary.html").read_text()
    epoch = (tmp_path / "epoch" / "finance-summary.html").read_text()
    assert "2026-12-01T08:00:00Z" in pinned and "2026-09-21T" not in pinned
    assert "2026-09-21T" in epoch


def test_a_bad_time_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "report",
            "--config",
            str(EXAMPLE / "rules.yaml"),
            "--format",
            "md",
            "--out",
            str(tmp_path / "x"),
            "--generated-at",
            "next tuesday",
        ],
    )
    assert result.exit_code == 2
    assert result.output.strip() == "error: --generated-at: not an ISO 8601 time: 'next tuesday'"
    assert not (tmp_path / "x").exists()
