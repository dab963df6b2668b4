"""The security headers of every response, decided here alone by the kind of route.

Every answer carries ``X-Content-Type-Options: nosniff`` (a sheet or a JSON error is never
run as a script or a page), ``Referrer-Policy`` (a client's URL, which names the client,
never leaves in a ``Referer``) and a Content-Security-Policy written for what that kind of
route serves. Anything that may carry a figure (API JSON, the pages, the sheets, the docs,
which embed the OpenAPI schema) is ``Cache-Control: no-store``, so no shared or browser cache
keeps one after logout; only Swagger UI's own files may be cached.

* **API** (``/api/...`` JSON, the sheet's PDF and Markdown, ``/healthz``, ``/readyz``,
  ``/openapi.json``, OTLP's ``/v1/metrics``; also the 413 of
  :mod:`~tenantcost.service.body_limit`): nothing to run or show, so
  ``default-src 'none'; frame-ancestors 'none'``.
* **Sheet** (``.../sheet.html``): the report pack's self-contained HTML: inline CSS and SVG,
  no script at all; framed by the client page (``frame-ancestors 'self'``).
* **Page** (every other path: the HTML pages, their redirects, the 404 page): inline CSS
  (``service.css`` is included in the page) and one ``style`` attribute, no script; frames
  only this origin's sheets; forms post only here; framed by nobody else (the close and
  reopen buttons cannot be clickjacked).
* **Docs** (``/docs``): Swagger UI's script and CSS from this origin, and its one inline
  script allowed by its sha256 (:func:`script_hash`), not by ``'unsafe-inline'``; it fetches
  ``/openapi.json`` and, with "Try it out", the API (``connect-src 'self'``).
* **Asset** (Swagger UI's files under :data:`ASSETS_PREFIX`): static, the same for everyone,
  cacheable; a missing one is answered as a page (the 404 page, not cached).

:class:`SecurityHeaders` is pure ASGI middleware: it sets these on ``http.response.start``,
replacing any a route set, so no route decides them itself.
"""

from __future__ import annotations

import base64
import hashlib
from enum import StrEnum

from starlette.types import ASGIApp, Message, Receive, Scope, Send

DOCS_PATH = "/docs"
ASSETS_PREFIX = "/docs-assets/"
API_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/v1/metrics"})
NO_STORE = "no-store"
ASSET_CACHE = "public, max-age=86400"


class RouteKind(StrEnum):
    API = "api"
    SHEET = "sheet"
    PAGE = "page"
    DOCS = "docs"
    ASSET = "asset"


def route_kind(path: str) -> RouteKind:
    """The kind of route a request path is (by path alone: the same for every answer)."""
    if path.startswith("/api/"):
        return RouteKind.SHEET if path.endswith("/sheet.html") else RouteKind.API
    if path in API_PATHS:
        return RouteKind.API
    if path == DOCS_PATH:
        return RouteKind.DOCS
    if path.startswith(ASSETS_PREFIX):
        return RouteKind.ASSET
    return RouteKind.PAGE


def script_hash(script: str) -> str:
    """A CSP source allowing exactly this inline script: ``'sha256-...'`` of its UTF-8 text."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


STRICT = "default-src 'none'; frame-ancestors 'none'"
_SHEET_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
)
_PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'; "
    "form-action 'self'; frame-ancestors 'self'; base-uri 'none'"
)


def content_security_policy(kind: RouteKind, docs_scripts: tuple[str, ...] = ()) -> str:
    """The CSP of ``kind``; ``docs_scripts``: the :func:`script_hash` sources of the docs
    page's inline scripts."""
    if kind is RouteKind.SHEET:
        return _SHEET_CSP
    if kind is RouteKind.PAGE:
        return _PAGE_CSP
    if kind is RouteKind.DOCS:
        scripts = " ".join(("'self'", *docs_scripts))
        return (
            f"default-src 'none'; script-src {scripts}; style-src 'self'; "
            "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
            "base-uri 'none'; form-action 'none'"
        )
    return STRICT


def security_headers(kind: RouteKind, docs_scripts: tuple[str, ...] = ()) -> dict[str, str]:
    """Every security header of an answer on a route of ``kind``."""
    framed = kind in (RouteKind.PAGE, RouteKind.SHEET)
    return {
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": ASSET_CACHE if kind is RouteKind.ASSET else NO_STORE,
        "Content-Security-Policy": content_security_policy(kind, docs_scripts),
        "X-Frame-Options": "SAMEORIGIN" if framed else "DENY",
        "Referrer-Policy": "no-referrer",
    }


class SecurityHeaders:
    """ASGI middleware: :func:`security_headers` on every HTTP answer."""

    def __init__(self, app: ASGIApp, docs_scripts: tuple[str, ...] = ()) -> None:
        self.app = app
        self._by_kind = {
            kind: [(k.lower().encode(), v.encode()) for k, v in headers.items()]
            for kind in RouteKind
            for headers in [security_headers(kind, docs_scripts)]
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        kind = route_kind(scope["path"])

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                ours = self._by_kind[_answered_as(kind, message["status"])]
                names = {name for name, _ in ours}
                kept = [(n, v) for n, v in message.get("headers", []) if n.lower() not in names]
                message = {**message, "headers": [*kept, *ours]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _answered_as(kind: RouteKind, status: int) -> RouteKind:
    """A missing asset is the 404 page (which names who is signed in): a page, never cached."""
    return RouteKind.PAGE if kind is RouteKind.ASSET and status >= 400 else kind
