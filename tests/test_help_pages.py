"""Every command's ``--help`` ends with the docs page of its command, and that page exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.cli.help_pages import ROOT_PAGE, commands, page_of

ROOT = Path(__file__).resolve().parents[1]
PATHS = [path for path, _ in commands(app)]


def _last_line(args: list[str]) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return [line.strip() for line in result.stdout.splitlines() if line.strip()][-1]


@pytest.mark.parametrize("path", PATHS)
def test_help_ends_with_the_page_of_the_command(path):
    page = page_of(path)
    assert page is not None, f"{path!r} has no page in tenantcost/cli/help_pages.py"
    assert (ROOT / "docs" / page).is_file(), f"{path!r}: docs/{page} does not exist"
    assert _last_line(path.split()) == f"Docs: docs/{page}"


def test_top_level_help_points_to_the_site_home():
    assert (ROOT / "docs" / ROOT_PAGE).is_file()
    assert _last_line([]) == f"Docs: docs/{ROOT_PAGE}"


def test_every_command_is_listed():
    """The walk finds the commands users type (groups and their subcommands included)."""
    assert {"allocate", "report", "ingest", "ingest usage", "export focus", "token create",
            "catalog load", "batch withdraw", "db upgrade"} <= set(PATHS)
