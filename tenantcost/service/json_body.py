"""Reading a JSON request body: what no route should have to think about.

FastAPI parses a route's JSON body with :func:`json.loads` and answers what that raises in
its own ways: ``'[' * 100000`` raised :class:`RecursionError` (a 500 where the service read the
body itself), and a string holding ``"\\ud800"`` (a lone surrogate, legal JSON, not text) or
``"\\u0000"`` went on to the store, where SQLite or PostgreSQL failed with a 500. Bodies are
therefore read here, once, by :func:`loads` (bytes to a document) and, for the routes FastAPI
parses, :func:`check_document` (what the document may hold). Each refusal is a 422
``{"detail": "<path>: <what is wrong>", "field": "<path>"}``, the path written like the usage
errors' (``clients[0]``, ``records[3].client``; ``body`` for the body as a whole):

* not UTF-8 (JSON is UTF-8, RFC 8259): the offset of the first bad byte;
* not JSON: the parser's message, line and column; a number of over 4,300 digits;
* nested deeper than the parser's limit, or than :data:`MAX_DEPTH` levels for the routes
  FastAPI parses (their bodies are flat objects; a deep one would also be echoed back in
  FastAPI's validation error, whose encoder recurses);
* a string (a value or a key) holding NUL or a lone surrogate: no backend can store either
  (:func:`text_problem`, also used for form fields);
* for the routes FastAPI parses, a body without a JSON ``Content-Type``: 415.

:class:`JSONBodyRoute` puts this under every route of a router (``APIRouter(route_class=...)``):
FastAPI then reads bodies through :class:`JSONBodyRequest`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from tenantcost.service.problems import Problem

MAX_DEPTH = 32
"""Levels of arrays and objects a body of a FastAPI-parsed route may nest."""
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why no store could keep ``value`` (NUL, a lone surrogate), as the end of a one-line
    error; None if it can."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    char = found.group(0)
    what = "NUL (U+0000)" if char == "\x00" else f"a lone surrogate U+{ord(char):04X}"
    return f"holds {what} at character {found.start() + 1}, which no stored text may hold"


def _refused(path: str, what: str) -> Problem:
    return Problem(422, f"{path}: {what}", field=path)


def loads(raw: bytes) -> Any:
    """The JSON document ``raw`` holds, or a 422 :class:`Problem` saying why it is none."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        what = f"not UTF-8: byte 0x{raw[exc.start]:02X} at offset {exc.start} (JSON is UTF-8)"
        raise _refused("body", what) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _refused(
            "body", f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except ValueError as exc:  # a number past Python's 4,300-digit conversion limit
        raise _refused("body", f"not readable: {str(exc).split(':')[0]}") from None
    except RecursionError:
        # The parser's own limit (about 1,000 levels), reached before any of ours could be.
        raise _refused("body", "JSON nested too deeply to read") from None


def _place(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path or 'body'}[{key}]"
    return f"{path}.{key}" if path else key


def check_document(document: Any) -> None:
    """422 for a document nested deeper than :data:`MAX_DEPTH` or with a string no store can
    keep; walked without recursion, stopping at the first fault."""
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            problem = text_problem(value)
            if problem is not None:
                raise _refused(path or "body", problem)
            continue
        if not isinstance(value, dict | list):
            continue
        if depth >= MAX_DEPTH:
            raise _refused(path or "body", f"nested deeper than {MAX_DEPTH} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in reversed(list(items)):  # reversed: the first fault is named first
            if isinstance(key, str):
                problem = text_problem(key)
                if problem is not None:
                    raise _refused(path or "body", f"a key {problem}")
            stack.append((item, _place(path, key), depth + 1))


class JSONBodyRequest(Request):
    """A request whose :meth:`json` is :func:`loads` then :func:`check_document`."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            document = loads(await self.body())
            check_document(document)
            self._json = document
        return self._json


def is_json(content_type: str | None) -> bool:
    """``application/json`` or ``application/<something>+json`` (parameters aside)."""
    main, _, sub = (content_type or "").split(";", 1)[0].strip().lower().partition("/")
    return main == "application" and (sub == "json" or sub.endswith("+json"))


class JSONBodyRoute(APIRoute):
    """A route whose JSON body is read by :class:`JSONBodyRequest`.

    A body sent without a JSON ``Content-Type`` is a 415 here: FastAPI would hand its raw
    bytes to the model, and echo them in its validation error through an encoder that
    decodes bytes as UTF-8 (``b"\\x80"`` was a 500)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            strict = JSONBodyRequest(request.scope, request.receive)
            takes_body = getattr(self, "body_field", None) is not None
            typed = is_json(strict.headers.get("content-type"))
            if takes_body and not typed and await strict.body():
                raise Problem(415, "body: send JSON (Content-Type: application/json)", field="body")
            return await handler(strict)

        return route_handler
