"""The API documentation at ``/docs``: Swagger UI served by the service itself.

FastAPI's default ``/docs`` loads Swagger UI from a CDN: on a machine without internet the
page stays blank, and a CSP would have to allow a foreign origin's scripts. Here Swagger UI's
files come from the ``swagger-ui-bundle-v2`` package (Swagger UI 5, which reads OpenAPI 3.1)
under :data:`~tenantcost.service.headers.ASSETS_PREFIX`, and the page's one inline script
(FastAPI's ``SwaggerUIBundle({...})`` call) is allowed by its sha256 in the docs CSP
(:mod:`tenantcost.service.headers`). The page never changes while the process runs, so the
hash is computed once from the very text served. ReDoc (FastAPI's ``/redoc``, CDN only) is
not served.
"""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from tenantcost.service.headers import ASSETS_PREFIX, DOCS_PATH, script_hash

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_html(openapi_url: str, title: str) -> str:
    """The ``/docs`` page, loading Swagger UI from this service."""
    response = get_swagger_ui_html(
        openapi_url=openapi_url,
        title=f"{title} API",
        swagger_js_url=f"{ASSETS_PREFIX}swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_PREFIX}swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_PREFIX}favicon-32x32.png",
        oauth2_redirect_url=None,
    )
    return bytes(response.body).decode("utf-8")


def inline_script_hashes(html: str) -> tuple[str, ...]:
    """The CSP sources (``'sha256-...'``) of every inline ``<script>`` of ``html``."""
    return tuple(script_hash(script) for script in _INLINE_SCRIPT.findall(html))


def install(app: FastAPI) -> tuple[str, ...]:
    """Serve ``/docs`` and Swagger UI's files on ``app`` (created with ``docs_url=None``);
    the hashes its CSP must allow."""
    from swagger_ui_bundle import swagger_ui_path

    assert app.openapi_url is not None
    html = docs_html(app.openapi_url, app.title)

    @app.get(DOCS_PATH, include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(html)

    app.mount(ASSETS_PREFIX.rstrip("/"), StaticFiles(directory=swagger_ui_path), name="docs-assets")
    return inline_script_hashes(html)
