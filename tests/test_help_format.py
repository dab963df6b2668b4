"""Every ``--help`` reads as paragraphs, names values as users know them and lists the commands
in the order of the work (tenantcost/cli/help_format.py)."""

from __future__ import annotations

import inspect
import re

from typer.testing import CliRunner

from tenantcost.cli import app
from tenantcost.cli.help_pages import commands

# The panels of `tenantcost --help` as issue 35 lists them, in order.
PANELS = {
    "Analysis from files": ["allocate", "compare", "reconcile", "explain", "report",
                            "unit-economics", "export", "podcost", "collect", "check-config",
                            "schema"],
    "The store and the monthly cycle": ["db", "rules", "catalog", "fx", "ingest", "batch", "run",
                                        "status", "close", "reopen", "history", "budget",
                                        "watch"],
    "The service": ["serve", "token"],
}  # fmt: skip
PYTHON_TYPE = re.compile(r"<(bool|str|int|float|path|text|list\[[^\]]*\]|[a-z]+ range)>", re.I)


def _help(args: list[str]) -> list[str]:
    """The help's lines, stripped of the panels' borders, on a terminal too wide to wrap."""
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "3000"})
    assert result.exit_code == 0, result.output
    return [" ".join(line.strip(" │╭╮╰╯─").split()) for line in result.stdout.splitlines()]


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in inspect.cleandoc(text).split("\n\n") if p.strip()]


def test_every_help_reads_as_paragraphs_with_value_names_users_know():
    for path, info in [("", app.info), *commands(app)]:
        args = path.split()
        lines = _help(args)
        text = "\n".join(lines)
        assert not PYTHON_TYPE.search(text), f"{path or 'tenantcost'}: {PYTHON_TYPE.search(text)}"
        help_text = getattr(info, "help", None)
        if not isinstance(help_text, str):
            sub = getattr(info, "typer_instance", None)
            help_text = sub.info.help if sub else None
        if not isinstance(help_text, str):
            callback = getattr(info, "callback", None)
            help_text = inspect.getdoc(callback) if callback else None
        assert isinstance(help_text, str), f"{path}: no help"
        for paragraph in _paragraphs(help_text):  # each on one line: no sentence broken
            assert paragraph in lines, f"{path or 'tenantcost'}: not one line: {paragraph!r}"
    status = "\n".join(_help(["status"]))
    assert re.search(r"^--month MONTH ", status, re.M) and re.search(r"^--usage Instead", status,
                                                                       re.M)  # a flag: no value
    assert re.search(r"^--opencost-url URL ", "\n".join(_help(["allocate"])), re.M)
    assert re.search(r"^\* CONFIG PATH ", "\n".join(_help(["check-config"])), re.M)
    serve = "\n".join(_help(["serve"]))  # --demo prints one token per person who reads it
    assert "print a token per person who reads it (admin, finance, product, an account manager" \
        " of several clients and one of a single client)" in serve
    assert re.search(r"^--seed N ", serve, re.M), serve


def test_the_commands_are_listed_in_named_groups_in_the_order_of_the_work():
    panels: dict[str, list[str]] = {}
    current = None
    for line in CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).stdout.splitlines():
        title = re.match(r"╭─ (.+?) ─", line)
        if title:
            current = title.group(1)
            panels[current] = []
        elif current and (name := re.match(r"│ ([a-z][a-z-]*)\s", line)):
            panels[current].append(name.group(1))
    panels.pop("Options")
    assert panels == PANELS
    top = {path for path, _ in commands(app) if " " not in path}
    assert top == {name for names in PANELS.values() for name in names}  # none left out
