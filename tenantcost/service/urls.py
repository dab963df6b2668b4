"""Client ids in URLs: every link the service builds and every ``{client_id}`` it reads.

A client id may hold any character but control characters (:mod:`tenantcost.client_id`),
``/`` included, so it cannot go into a path segment as it is. Percent-encoding alone does not
work: the ASGI server decodes ``%2F`` back to ``/`` *before* routing, so
``/clients/team%2Fa`` reaches the router as ``/clients/team/a`` and matches no route (many
proxies do the same). The service therefore uses **tilde encoding**, the scheme Datasette
uses for table names: in a client's path segment

* ASCII letters, digits, ``-``, ``_`` and ``.`` stay as they are, so ``client-a`` and
  ``acme.eu`` keep the URLs they always had;
* every other ASCII character (``/``, ``~``, ``%``, space, ``?``, ``#``, ``+``...) becomes
  ``~XX``, the hex of its byte: ``team/a`` is ``team~2Fa``, ``a~b`` is ``a~7Eb``. No ``%``
  is left for anyone to decode, so the segment arrives at the route exactly as it was sent;
* characters beyond ASCII are percent-encoded as UTF-8 (``客户`` is ``%E5%AE%A2%E6%88%B7``,
  as before): the server decodes them before routing, which is harmless, since they are
  never ``/``;
* an id that is a dot segment (``.``, ``..``) is written ``~2E`` / ``~2E~2E``: clients
  remove dot segments from paths before sending them.

Decoding (:func:`client_param`, called by the one dependency of every ``/clients/{client_id}``
route, :func:`tenantcost.service.auth.client_access`) turns each run of ``~XX`` back into
UTF-8 bytes (``~E5~AE~A2`` reads ``客``, like Datasette's) and then applies the client-id rule.
A segment that cannot be an id (a ``~`` without two hex digits after it, bytes that are not
UTF-8, a control character, more than 256 characters) is answered 422 naming ``client_id``,
never looked up: PostgreSQL would refuse NUL in a query, and nothing is stored under such an
id anyway.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

from tenantcost.client_id import client_id_problem
from tenantcost.service.problems import Problem

PARAM_DESCRIPTION = (
    "The client id, tilde-encoded: ASCII letters, digits, `-`, `_` and `.` as they are, other "
    "ASCII characters as `~XX` (`/` is `~2F`, `~` is `~7E`), other characters percent-encoded "
    "UTF-8 (`%E5%AE%A2`). The client list's links are written so."
)
API_CLIENTS = "/api/v1/clients"
PAGE_CLIENTS = "/clients"
_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
_ESCAPES = re.compile(r"(?:~[0-9A-Fa-f]{2})+")
_DOT_SEGMENTS = frozenset({".", ".."})


def _encode_char(char: str) -> str:
    if char in _KEPT:
        return char
    if char < "\x80":
        return f"~{ord(char):02X}"
    return quote(char, safe="", errors="surrogatepass")


def encode_segment(value: str) -> str:
    """``value`` as one URL path segment (tilde encoding; see the module's docstring)."""
    if value in _DOT_SEGMENTS:
        return "~2E" * len(value)
    return "".join(_encode_char(c) for c in value)  # one id: a few dozen characters


def decode_segment(segment: str) -> str:
    """The text a (server-decoded) path segment encodes; ``ValueError`` saying why not."""
    stray = _ESCAPES.sub("", segment).find("~")
    if stray >= 0:
        raise ValueError(
            f"'~' at character {stray + 1} is not followed by two hex digits "
            "(in a client URL, '~' is written ~7E and '/' ~2F)"
        )
    try:
        return _ESCAPES.sub(lambda m: bytes.fromhex(m.group(0).replace("~", "")).decode(), segment)
    except UnicodeDecodeError:
        raise ValueError("its ~XX escapes are not UTF-8") from None


def client_param(segment: str) -> str:
    """The client id a route's ``{client_id}`` names, or 422 naming the parameter."""
    try:
        client = decode_segment(segment)
    except ValueError as exc:
        raise Problem(422, f"client_id: {exc}", field="client_id") from None
    problem = client_id_problem(client)
    if problem is not None:
        raise Problem(422, f"client_id: {problem.removeprefix('client id ')}", field="client_id")
    return client


def client_href(client: str, month: str | None = None) -> str:
    """The client page's URL (``?month=`` to open one month)."""
    base = f"{PAGE_CLIENTS}/{encode_segment(client)}"
    return f"{base}?{urlencode({'month': month})}" if month else base


def api_client_path(client: str, *rest: str) -> str:
    """``/api/v1/clients/<id>[/rest...]``: the client's API URLs (months, sheets, history)."""
    return "/".join([API_CLIENTS, encode_segment(client), *rest])
