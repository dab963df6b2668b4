"""The README and the docs pages show real outputs, commands that work and links that resolve.

Every ``$ tenantcost ...`` block of README.md and docs/*.md is run and its output compared byte
for byte, wherever the block lives, so a worked-example figure in the docs is produced by a
test. The README's links (to the docs site's pages and their sections) must resolve too: the
README is the front door, and ``mkdocs build --strict`` (scripts/test.sh) checks only the pages.
"""

from __future__ import annotations

import json
import re
import shlex
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tenantcost.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = {"README.md": README} | {
    f"docs/{path.name}": path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "docs").glob("*.md"))
}


def _blocks() -> list[tuple[str, str, str]]:
    """(pages, command, expected output) for code blocks that start with ``$ tenantcost``; a
    block shown the same on several pages (the README and a docs page) is run once."""
    found: dict[tuple[str, str], list[str]] = {}
    for page, text in PAGES.items():
        for block in re.findall(r"```\n(\$ tenantcost .*?)```", text, flags=re.S):
            first, _, rest = block.partition("\n")
            found.setdefault((first.removeprefix("$ "), rest), []).append(page)
    return [(", ".join(pages), command, rest) for (command, rest), pages in found.items()]


BLOCKS = _blocks()


def _section(text: str, heading: str) -> str:
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_readme_shows_two_setup_commands():
    setup = _section(README, "Set-up: two commands")
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


def test_readme_stays_a_front_door():
    """A few screens: the reference lives in docs/ pages, which the README's map lists."""
    assert len(README.splitlines()) <= 250
    docs_map = _section(README, "Map of the docs")
    for page in ("inputs", "rules", "method", "report", "store", "service", "economics",
                 "focus", "live-sources", "scale", "development", "architecture"):
        assert f"](docs/{page}.md)" in docs_map, page


@pytest.mark.parametrize(
    ("page", "command", "expected"), BLOCKS, ids=[f"{p}: {c.split()[1]}" for p, c, _ in BLOCKS]
)
def test_command_blocks_are_true(page, command, expected, monkeypatch):
    monkeypatch.chdir(ROOT)
    args = shlex.split(command)[1:]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{page}: {result.output}"
    assert result.stdout == expected, page


def test_some_blocks_live_on_docs_pages():
    """The worked examples moved to docs pages are still checked there."""
    pages = {page for shown_on, _, _ in BLOCKS for page in shown_on.split(", ")}
    assert {"README.md", "docs/method.md", "docs/economics.md"} <= pages


def test_readme_finance_cycle_runs(tmp_path, monkeypatch):
    """The finance tour's commands, as written, close the example month and render its pack
    (in a fresh store in a temporary folder: the commands use the default store)."""
    finance = README.split("**Finance: the monthly close", 1)[1]
    block = re.search(r"```sh\n(.*?)\n```", finance, flags=re.S)
    assert block is not None
    commands = [c for line in block.group(1).splitlines() for c in line.split(" && ")]
    assert commands[0] == "tenantcost db upgrade" and commands[-1].startswith("tenantcost report")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    for var in ("TENANTCOST_DB", "TENANTCOST_DATA", "TENANTCOST_SETTINGS"):
        monkeypatch.delenv(var, raising=False)
    for command in commands:
        result = CliRunner().invoke(app, shlex.split(command)[1:])
        assert result.exit_code == 0, f"{command}: {result.output}"
    issued = json.loads(_run(["history", "--month", "2026-11", "--format", "json"]))
    assert [(s["client"], s["revision"], s["status"], s["amount"]) for s in issued] == [
        ("client-a", 1, "issued", 123_458),
        ("client-b", 1, "issued", 77_173),
        ("client-c", 1, "issued", 1_569),
    ]
    sheets = sorted(p.name for p in (tmp_path / "pack" / "clients").iterdir())
    assert sheets == ["client-a.html", "client-b.html", "client-c.html"]
    assert (tmp_path / "pack" / "index.html").is_file()


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _github_anchor(heading: str) -> str:
    """The anchor GitHub (and MkDocs, for these headings) gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_readme_links_resolve():
    shown = re.sub(r"<!--.*?-->", "", README, flags=re.S)  # rows kept for pages still to come
    links = re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", shown)
    local = [(path, anchor) for path, anchor in links if "://" not in path]
    assert local, "the README links its docs pages"
    for path, anchor in local:
        target = ROOT / path
        assert target.exists(), f"README links {path}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.*)$", target.read_text(encoding="utf-8"), flags=re.M)
            assert anchor in {_github_anchor(h) for h in headings}, f"{path}#{anchor}"


def test_idle_example_figures_are_the_commands_outputs():
    """docs/method.md's sentence on the three idle methods quotes team B's amount under each
    (keep, even, proportional): each is `allocate`'s figure, rounded to the cent."""
    figures = r"Team B pays ([\d.]+),\s+([\d.]+)\s+or\s+([\d.]+) USD"
    said = re.search(figures, PAGES["docs/method.md"])
    assert said is not None
    for method, shown in zip(("keep", "even", "proportional"), said.groups(), strict=True):
        config = ROOT / f"examples/idle-three-teams/rules-{method}.yaml"
        document = json.loads(_run(["allocate", "--config", str(config), "--format", "json"]))
        (team_b,) = [c["amount"] for c in document["clients"] if c["client"] == "team-b"]
        assert str(Decimal(team_b).scaleb(-6).quantize(Decimal("0.01"))) == shown, method
