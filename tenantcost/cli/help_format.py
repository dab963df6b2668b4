"""How ``--help`` reads: paragraphs, the names users know for values, commands in work order.

Why a module of its own: typer renders help from what each command declares, and three of
its defaults read badly in a terminal. It keeps a docstring's line breaks, so sentences
break mid-line at the width of the source file, not of the terminal; it names values by
their Python type (``<bool>``, ``<list[Path]>``); and it lists commands in the order the
modules happen to register them. Fixing each at its declaration would spread one rule of
presentation over every command module and drift with the next command, so the rule is
here and applied once to the whole app (:func:`format_help`), with a test
(tests/test_help_format.py) that walks every command's help:

* **paragraphs**: every command's and group's help is reflowed (:func:`reflow`): the line
  breaks inside a paragraph become spaces, the blank lines between paragraphs stay, and the
  terminal wraps the result at its own width;
* **value names** (:func:`value_name`): an option's value is named as its help and the docs
  name it (``PATH``, ``MONTH``, ``URL``, ``TIME``, ``N``...), never by a Python type; a flag
  shows none;
* **work order** (:data:`PANELS`): commands are listed in named groups, in the order of the
  work: analysis from files, then the store and the monthly cycle, then the service. A
  command missing from :data:`PANELS` is listed last, under "Other commands" (the test fails
  on it, so a new command gets its place).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, get_args, get_origin

from typer import Typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import CommandInfo, DefaultPlaceholder, TyperInfo

ANALYSIS = "Analysis from files"
STORE = "The store and the monthly cycle"
SERVICE = "The service"
OTHER = "Other commands"

# The panels of `tenantcost --help`, in the order of the work, each with its commands in order.
PANELS: dict[str, tuple[str, ...]] = {
    ANALYSIS: (
        "allocate", "compare", "reconcile", "explain", "report", "unit-economics", "export",
        "podcost", "collect", "check-config", "schema",
    ),
    STORE: (
        "db", "rules", "catalog", "fx", "ingest", "batch", "run", "status", "close", "reopen",
        "history", "budget", "watch",
    ),
    SERVICE: ("serve", "token"),
}  # fmt: skip
ORDER: tuple[str, ...] = tuple(name for names in PANELS.values() for name in names)

# An option's value, named as its help names it. Options not listed are named by type.
VALUE_NAMES: dict[str, str] = {
    "--month": "MONTH",
    "--vs": "MONTH",
    "--from": "TIME",
    "--to": "TIME",
    "--as-of": "TIME",
    "--now": "TIME",
    "--generated-at": "TIME",
    "--opencost-url": "URL",
    "--db": "URL",
    "--data": "PATH|URL",
    "--scheduler": "URL",
    "--costs": "PATH",
    "--usage": "PATH",
    "--billing": "PATH",
    "--host": "HOST",
    "--port": "PORT",
    "--format": "FORMAT",
    "--key": "KEY",
    "--keys": "KEYS",
    "--client": "CLIENT",
    "--name": "NAME",
    "--role": "ROLE",
    "--run": "RUN",
    "--engine": "ENGINE",
    "--against": "SOURCE",
    "--by": "plan|segment",
    "--mode": "MODE",
    "--grain": "day|hour",
    "--focus-version": "VERSION",
    "--step": "DURATION",
    "--expires": "DURATION",
    "--chunk": "auto|DURATION",
    "--wait": "SECONDS",
    "--max-body": "BYTES",
    "--growth": "RATES",
    "--target-margin": "FRACTION",
}
TYPE_NAMES: dict[Any, str] = {Path: "PATH", str: "TEXT", int: "N", float: "NUMBER"}


def reflow(text: str) -> str:
    """Paragraphs as single lines: line breaks inside a paragraph become spaces; the blank
    lines between paragraphs stay. The terminal then wraps each at its own width."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def _value_type(annotation: Any) -> Any:
    """The type of one value: ``list[Path]`` (a repeatable option) names one ``Path``."""
    return get_args(annotation)[0] if get_origin(annotation) is list else annotation


def value_name(param: TyperOption | TyperArgument) -> str:
    """What the help shows for a parameter's value: its name in :data:`VALUE_NAMES`, else its
    type's (``PATH``, ``TEXT``, ``N``, ``NUMBER``); nothing for a flag."""
    if isinstance(param, TyperOption) and param.is_flag:
        return ""
    for opt in param.opts:
        if opt in VALUE_NAMES:
            return VALUE_NAMES[opt]
    return TYPE_NAMES.get(_value_type(param.type_descriptor.annotation), "TEXT")


class _NamedArgument(TyperArgument):
    """An argument whose type column shows :func:`value_name` (typer shows ``<path>``)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return value_name(self)


def _name_values(params: list[Any]) -> list[Any]:
    """Give every option its value name and every argument an upper-case name and a value
    name; once per parameter (a parameter is built once per command)."""
    for param in params:
        if type(param) is TyperOption and param.metavar is None:
            param.metavar = value_name(param)
        elif type(param) is TyperArgument:
            if param.metavar is None:
                param.metavar = (param.name or "").upper()
            param.__class__ = _NamedArgument
    return params


class PlainCommand(TyperCommand):
    """A command whose help names values as users know them (:func:`value_name`)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _name_values(super().get_params(ctx))


class PlainGroup(TyperGroup):
    """A group listed in work order (:data:`ORDER`), its values named as users know them."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _name_values(super().get_params(ctx))

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(ORDER)}
        return sorted(names, key=lambda name: rank.get(name, len(ORDER)))


def panel_of(name: str) -> str:
    """The panel a top-level command is listed under."""
    return next((panel for panel, names in PANELS.items() if name in names), OTHER)


def _help_of(info: CommandInfo | TyperInfo, fallback: object) -> str | None:
    help_text = info.help
    if isinstance(help_text, DefaultPlaceholder) or help_text is None:
        help_text = fallback if isinstance(fallback, str) else None
    return help_text if isinstance(help_text, str) else None


def _format_commands(app: Typer, top: bool) -> None:
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):
            command.cls = PlainCommand
        callback_doc = command.callback.__doc__ if command.callback else None
        help_text = _help_of(command, callback_doc)
        if help_text is not None:
            command.help = reflow(help_text)
        if top:
            name = command.name or (command.callback.__name__ if command.callback else "")
            command.rich_help_panel = panel_of(name)
    for group in app.registered_groups:
        sub = group.typer_instance
        if sub is None:
            continue
        sub.info.cls = PlainGroup
        help_text = _help_of(sub.info, None)
        if help_text is not None:
            sub.info.help = reflow(help_text)
        name = next((n for n in (group.name, sub.info.name) if isinstance(n, str)), "")
        if top:
            group.rich_help_panel = panel_of(name)
        _format_commands(sub, top=False)


def format_help(app: Typer) -> None:
    """Apply the module's rules to the app: reflowed help, value names, panels, work order."""
    app.info.cls = PlainGroup
    if isinstance(app.info.help, str):
        app.info.help = reflow(app.info.help)
    _format_commands(app, top=True)
