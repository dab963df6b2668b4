"""The ``Content-Disposition`` header of every download: one function, so no route puts a
client id into a header by hand.

HTTP header values are Latin-1 at best (ASGI servers encode them so; a client id like
``客户`` made the sheet routes answer 500), and a ``"`` or ``\\`` in a quoted ``filename``
would end it early. :func:`content_disposition` therefore writes both forms RFC 6266
defines: ``filename*=UTF-8''...``, the name percent-encoded as UTF-8 (RFC 8187), which every
current browser prefers, and a plain ASCII ``filename="..."`` fallback for the rest. In
both, characters a file name cannot hold (``/``, ``\\``, control characters, and
``<>:"|?*`` that Windows refuses) become ``_``; the fallback also turns every non-ASCII
character into ``_``. The name carries only the downloading client's own id.
"""

from __future__ import annotations

import re
from enum import StrEnum
from urllib.parse import quote

_NOT_IN_FILE_NAMES = re.compile(r'[\x00-\x1f\x7f-\x9f/\\<>:"|?*]')
_NOT_IN_FALLBACK = re.compile(r"[^A-Za-z0-9._-]")
_ATTR_CHARS = "!#$&+-.^_`|~"
"""RFC 8187 ``attr-char`` punctuation: kept as is in ``filename*`` (letters, digits too)."""
MAX_NAME = 120
"""Characters of a file name at most (before encoding)."""


class Disposition(StrEnum):
    INLINE = "inline"
    """Shown in the browser (the HTML sheet)."""
    ATTACHMENT = "attachment"
    """Saved as a file (PDF, Markdown)."""


def file_name(name: str) -> str:
    """``name`` with the characters no file name may hold as ``_`` (at most
    :data:`MAX_NAME` characters, the extension kept)."""
    safe = _NOT_IN_FILE_NAMES.sub("_", name)
    if len(safe) <= MAX_NAME:
        return safe
    stem, dot, ext = safe.rpartition(".")
    if not dot or len(ext) > 8:
        return safe[:MAX_NAME]
    return stem[: MAX_NAME - len(ext) - 1] + "." + ext


def content_disposition(disposition: Disposition, name: str) -> str:
    """The header value: ``attachment; filename="2026-11-__.pdf";
    filename*=UTF-8''2026-11-%E5%AE%A2%E6%88%B7.pdf`` (ASCII only, whatever ``name`` holds)."""
    safe = file_name(name)
    fallback = _NOT_IN_FALLBACK.sub("_", safe)
    value = f'{disposition}; filename="{fallback}"'
    if fallback == safe:
        return value
    encoded = quote(safe, safe=_ATTR_CHARS, errors="replace")
    return f"{value}; filename*=UTF-8''{encoded}"
