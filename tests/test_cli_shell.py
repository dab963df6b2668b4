"""The command-line shell: exit 3 for internal errors, one run sequence, a fast start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tenantcost.cli.run as run_module
from tenantcost.cli import app
from tenantcost.errors import InternalError
from tenantcost.reconcile import cascade as real_cascade

ROOT = Path(__file__).resolve().parents[1]
SAAS = ROOT / "examples" / "saas-three-clients"
RULES = SAAS / "rules.yaml"
HEAVY = ("pandas", "numpy", "duckdb", "pyarrow", "weasyprint", "jinja2", "requests")
runner = CliRunner()


def lossy(result):
    """The real cascade of a result that lost one micro-unit on its way."""
    lines = result.lines.copy()
    lines.loc[lines.index[0], "amount"] -= 1
    result.lines = lines
    return real_cascade(result)


def assert_internal_error(result, text: str) -> None:
    assert result.exit_code == 3, result.output
    assert result.stdout == ""  # no figure printed
    assert result.stderr == f"internal error: {text}\n"
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["allocate", "--config", str(RULES)],
        ["allocate", "--config", str(RULES), "--format", "json"],
        ["compare", "--config", str(RULES), "--keys", "requests,cpu_seconds"],
    ],
)
def test_a_cascade_that_does_not_close_is_an_internal_error(monkeypatch, args):
    monkeypatch.setattr(run_module, "cascade", lossy)
    assert_internal_error(runner.invoke(app, args), "the cascade does not close: gap 1 micro-units")


def test_report_writes_nothing_when_the_cascade_does_not_close(monkeypatch, tmp_path):
    monkeypatch.setattr(run_module, "cascade", lossy)
    out = tmp_path / "pack"
    result = runner.invoke(app, ["report", "--config", str(RULES), "--out", str(out)])
    assert_internal_error(result, "the cascade does not close: gap 1 micro-units")
    assert not out.exists()


def test_reconcile_audits_instead_exit_1(monkeypatch):
    monkeypatch.setattr(run_module, "cascade", lossy)
    result = runner.invoke(app, ["reconcile", "--config", str(RULES)])
    assert result.exit_code == 1
    assert "DOES NOT CLOSE" in result.stdout
    assert result.stderr == "error: the cascade does not close: gap 1 micro-units\n"


def test_any_internal_error_is_one_line(monkeypatch):
    def broken(*_, **__):
        raise InternalError("a broken\ninvariant")

    monkeypatch.setattr(run_module, "allocate_stream", broken)
    assert_internal_error(
        runner.invoke(app, ["reconcile", "--config", str(RULES)]), "a broken invariant"
    )


def test_every_allocating_command_shares_the_input_options():
    """One declaration of the shared options: each command shows the same ones."""
    shared = ["--config", "--costs", "--usage", "--from", "--to", "--month", "--opencost-url"]
    for command in ("allocate", "compare", "reconcile", "report"):
        text = runner.invoke(app, [command, "--help"], terminal_width=200).stdout
        assert all(option in text for option in shared), command
        assert all(o in text for o in ("--engine", "--scheduler", "--workers", "--chunk")), command


def test_schema_prints_the_rule_file_json_schema():
    from tenantcost.config.schema import rules_schema

    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0, result.output
    assert result.stdout == json.dumps(rules_schema(), indent=2) + "\n"


@pytest.mark.parametrize("args", [["--help"], ["check-config", str(RULES)]])
def test_help_and_check_config_import_no_heavy_module(args):
    """Start-up stays fast because pandas, DuckDB, WeasyPrint... are imported only by the
    commands that need them (the wall time itself is measured by benchmarks/run.py)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tenantcost", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in proc.stderr.splitlines()}
    assert [m for m in HEAVY if m in imported] == []
