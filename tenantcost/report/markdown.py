"""Markdown escaping for the report pack's ``.md`` files.

Client ids, workload names, rule descriptions and paths come from the rule file and the data,
not from us: a client id ``a|b`` splits a table cell, ``<b>x</b>`` is raw HTML to a Markdown
renderer, ``*`` or ``__idle__`` turn into emphasis, ``[x](y)`` into a link, ``# x`` into a
heading. The Markdown environment escapes every ``{{ value }}`` by default (its ``finalize``
is :func:`escape`), so a template cannot forget one; filters that build Markdown themselves
(:func:`cell`, :func:`code`, :func:`fenced`) return :class:`Markdown`, which passes through.

Escapes are CommonMark backslash escapes (any ASCII punctuation may be escaped), so a renderer
shows the text exactly as given, and a plain-text reader still reads it. Characters that are
harmless where they stand stay as they are, so figures (``-1,234.56``, ``97.0 %``) and ids
such as ``cpu_seconds`` read the same as before.
"""

from __future__ import annotations

import re

_ALWAYS = r"[\\`*~\[\]<>|#]"
"""Escaped wherever they stand: inline syntax, HTML tags, table pipes, headings."""
_UNDERSCORE = r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"
"""``_`` only where it can open or close emphasis: not inside a word (``cpu_seconds``)."""
_ENTITY = r"&(?=#?[A-Za-z0-9]+;)"
"""``&`` only where it would start an entity (``&lt;``)."""
_SPECIAL = re.compile(f"{_ALWAYS}|{_UNDERSCORE}|{_ENTITY}")
_BLOCK_START = re.compile(r"^(?:([-+]|[0-9]{1,9}[.)])(?=\s|$)|(-)(?=-)|(=))")
"""A list marker, rule or setext underline starting a value that may start a line (``- x``,
``1. x``, ``---``, ``===``); a negative figure (``-1.00``) is none of these."""
NO_FIGURE = "-"
"""The placeholder of an empty figure cell: left as it is (in a table cell it is text)."""
_LINE_BREAKS = re.compile(r"[ \t]*(?:\r\n|\r|\n)[ \t]*")
_BACKTICKS = re.compile(r"`+")


class Markdown(str):
    """Text that already is Markdown: the environment's ``finalize`` leaves it as it is."""


def _flat(value: object) -> str:
    """One line: a value never starts a block of its own (a line break inside a table row or
    a list item would end it)."""
    return _LINE_BREAKS.sub(" ", str(value))


def _marker(match: re.Match[str]) -> str:
    marker = match.group(0)
    return f"{marker[:-1]}\\{marker[-1]}"


def escape(value: object) -> Markdown:
    """``value`` as literal text in Markdown, on one line (the md environment's ``finalize``)."""
    if isinstance(value, Markdown):
        return value
    # Outer white space goes: leading spaces could make indented code, two trailing ones a
    # line break; no renderer shows them anyway.
    text = _SPECIAL.sub(lambda m: "\\" + m.group(0), _flat(value).strip())
    if text == NO_FIGURE:
        return Markdown(text)
    return Markdown(_BLOCK_START.sub(_marker, text))


def cell(value: object) -> Markdown:
    """A table cell: escaped, every run of white space made one space."""
    return Markdown(" ".join(escape(value).split()))


def _fence(text: str, minimum: int) -> str:
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(minimum, longest + 1)


def _stripped_by_a_span(text: str) -> bool:
    """CommonMark drops one space at each end of a span that starts and ends with one."""
    return len(text) > 1 and text[0] == text[-1] == " " and bool(text.strip(" "))


def code(value: object, in_cell: bool = False) -> Markdown:
    """An inline code span showing ``value`` verbatim, whatever backticks it holds.

    Backslash escapes do not work inside a code span; a longer backtick fence does. In a table
    cell GitHub splits on ``|`` before it sees the span, so there a pipe is written ``\\|``
    (which GitHub's table parser turns back into ``|``).
    """
    text = _flat(value)
    fence = _fence(text, 1)
    if text.startswith("`") or text.endswith("`") or _stripped_by_a_span(text):
        text = f" {text} "
    if in_cell:
        text = text.replace("|", "\\|")
    return Markdown(f"{fence}{text}{fence}")


def code_cell(value: object) -> Markdown:
    """:func:`code` for a table cell."""
    return code(value, in_cell=True)


def fenced(value: object, info: str = "") -> Markdown:
    """A fenced code block, its fence longer than any backtick run inside (so it cannot close
    early: a shell command quoting a client id with backticks stays one block)."""
    text = str(value)
    fence = _fence(text, 3)
    return Markdown(f"{fence}{info}\n{text}\n{fence}")


FILTERS = {"cell": cell, "code": code, "code_cell": code_cell, "fenced": fenced}
"""The filters the Markdown templates use, by name."""
