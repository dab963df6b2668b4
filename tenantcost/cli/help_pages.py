"""Which page of the documentation site documents each command: the end of its ``--help``.

``--help`` stays short (what the command does and its options); the reference, with examples
whose outputs the tests check, is one page of ``docs/`` per concept. Each command's help ends
with ``Docs: docs/<page>.md`` so a reader goes from the terminal to the right page in one
step. The table is here, in one place, rather than in each command's decorator: the commands
are spread over several modules, and a test (tests/test_help_pages.py) checks that every
registered command has a page and that the page exists.
"""

from __future__ import annotations

from typer import Typer
from typer.models import CommandInfo, TyperInfo

ROOT_PAGE = "index.md"

# A command's path ("ingest usage") or its group's first word ("ingest") -> its page in docs/.
PAGES: dict[str, str] = {
    "allocate": "method.md",
    "compare": "method.md",
    "reconcile": "method.md",
    "check-config": "rules.md",
    "schema": "rules.md",
    "report": "report.md",
    "export": "focus.md",
    "collect": "live-sources.md",
    "podcost": "live-sources.md",
    "unit-economics": "economics.md",
    "explain": "economics.md",
    "catalog": "economics.md",
    "fx": "currency.md",
    "db": "store.md",
    "rules": "store.md",
    "ingest": "store.md",
    "run": "store.md",
    "status": "store.md",
    "close": "store.md",
    "reopen": "store.md",
    "history": "store.md",
    "batch": "store.md",
    "serve": "service.md",
    "token": "service.md",
    # the budgets and watch commands document themselves on their own pages
    "budget": "budgets.md",
    "watch": "watch.md",
}


def docs_line(page: str) -> str:
    """The last line of a command's help."""
    return f"Docs: docs/{page}"


def page_of(path: str) -> str | None:
    """The page of a command path ("ingest usage"): its own entry, else its group's."""
    return PAGES.get(path) or PAGES.get(path.split(" ", 1)[0])


def _name(value: object) -> str | None:
    """A name typer was given, or None where it holds its own default."""
    return value if isinstance(value, str) else None


def commands(app: Typer, prefix: str = "") -> list[tuple[str, CommandInfo | TyperInfo]]:
    """Every registered command and group as (path, its typer info), a group before its own."""
    found: list[tuple[str, CommandInfo | TyperInfo]] = []
    for command in app.registered_commands:
        name = command.name or (command.callback.__name__ if command.callback else "")
        found.append((f"{prefix}{name.replace('_', '-')}", command))
    for group in app.registered_groups:
        sub = group.typer_instance
        if sub is None:
            continue
        name = _name(group.name) or _name(sub.info.name) or ""
        found.append((f"{prefix}{name}", group))
        found += commands(sub, f"{prefix}{name} ")
    return found


def point_help_to_docs(app: Typer) -> None:
    """End the help of the app, of every group and of every command with its docs page."""
    app.info.epilog = docs_line(ROOT_PAGE)
    for path, info in commands(app):
        page = page_of(path)
        if page is not None:
            info.epilog = docs_line(page)
