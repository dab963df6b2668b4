"""The README's example outputs are the real outputs of the commands it shows."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks() -> list[tuple[str, str]]:
    """(command, expected output) for README code blocks that start with ``$ tenantcost``."""
    out = []
    for block in re.findall(r"```\n(\$ tenantcost .*?)```", README, flags=re.S):
        first, _, rest = block.partition("\n")
        out.append((first.removeprefix("$ "), rest))
    return out


def test_readme_shows_two_setup_commands():
    setup = README.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)\n```", setup, flags=re.S)
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
        "tenantcost allocate --config examples/saas-three-clients/rules.yaml",
        "bash scripts/test.sh",
    ]
    steps = commands[0].split(" && ")  # a venv first: Debian's Python refuses a global pip
    assert steps[:3] == ["python3 -m venv .venv", ". .venv/bin/activate", "pip install -e ."]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci


def test_main_command_output_matches_readme():
    shown = README.split("## What the first command shows", 1)[1].split("```\n", 2)[1]
    result = CliRunner().invoke(
        app, ["allocate", "--config", str(ROOT / "examples/saas-three-clients/rules.yaml")]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == shown


@pytest.mark.parametrize(("command", "expected"), _blocks())
def test_readme_command_blocks_are_true(command, expected, monkeypatch):
    monkeypatch.chdir(ROOT)
    args = shlex.split(command)[1:]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == expected
