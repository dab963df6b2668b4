"""The ASGI application: :func:`create_app` wires the API, the pages and the access rules.

``tenantcost serve`` runs :func:`app_from_environment` through uvicorn as an *app factory*
(an import string), so each worker process (``--workers N``) builds its own application and
database engine from the same exported settings.

The HTML pages (``tenantcost.service.pages``) plug in through their module's
``install(app, settings)``: it includes its router, mounts its static files, adds the session
middleware, registers the session lookup (:func:`tenantcost.service.auth.set_session_lookup`)
and, optionally, the page renderer of denials (``app.state.render_denied``). Without that
module the application is the API alone.

Two pure ASGI middlewares wrap everything: :class:`~tenantcost.service.headers.SecurityHeaders`
(outermost: every answer gets its route kind's headers, a 413 included) and
:class:`~tenantcost.service.body_limit.BodyLimit` (``serve --max-body``); with ``serve
--metrics-port``, :class:`~tenantcost.service.metrics.RequestMetrics` between them counts
every answer, a 413 included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from tenantcost import __version__
from tenantcost.service.auth import Denied, denied_response
from tenantcost.service.config import ServiceSettings, settings_from_environment
from tenantcost.service.problems import Problem, invalid_request_response, problem_response

API_PREFIX = "/api/"

RenderDenied = Callable[[Request, Denied], Response]
"""How the pages answer a denial (HTML 404 page, a redirect to the login form...)."""


def create_app(settings: ServiceSettings) -> FastAPI:
    """The service over the store ``settings`` names (its schema must be current)."""
    from tenantcost.service import allocator, api, docs, metrics, otlp, usage
    from tenantcost.service.body_limit import BodyLimit
    from tenantcost.service.headers import SecurityHeaders
    from tenantcost.store.data import DataDir, Store
    from tenantcost.store.engine import open_engine

    engine = open_engine(settings.store)
    allocator.configure()  # large blocks given back when freed

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        from tenantcost.service import prerender
        from tenantcost.service.warm import prepare_in_background, warm_up

        # before the first request: redaction, templates, the months' displayed figures
        warm_up(engine, getattr(_app.state, "page_env", None), _app.state.store)
        preparer = prepare_in_background(engine, _app.state.store)  # the latest month
        watcher = prerender.start(engine)  # issued revisions' sheets, rendered once
        yield
        preparer.stop()
        if watcher is not None:
            watcher.stop()
        engine.dispose()

    app = FastAPI(
        title="tenantcost",
        version=__version__,
        description="Per-client Kubernetes costs from the tenantcost store: usage ingest, "
        "monthly figures and statements, close and reopen. Amounts are integers in the "
        "stated minor unit (micro-units, like `allocate --format json`).",
        lifespan=lifespan,
        docs_url=None,  # served by tenantcost.service.docs, without a CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.store = Store(engine, DataDir(settings.store.data)) if settings.store.data else None
    app.state.session_lookup = None
    app.state.render_denied = None
    app.add_exception_handler(Denied, _on_denied)
    app.add_exception_handler(Problem, problem_response)
    app.add_exception_handler(RequestValidationError, invalid_request_response)
    app.include_router(api.health)
    app.include_router(usage.router)
    app.include_router(otlp.router)
    app.include_router(api.router)
    docs_scripts = docs.install(app)
    _install_pages(app, settings)
    app.add_middleware(BodyLimit, max_body=settings.max_body)
    if metrics.enabled():  # serve --metrics-port: counted around everything but the headers
        app.add_middleware(metrics.RequestMetrics)
    app.add_middleware(SecurityHeaders, docs_scripts=docs_scripts)  # outermost
    return app


async def _on_denied(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Denied)
    render: RenderDenied | None = request.app.state.render_denied
    if render is not None and not request.url.path.startswith(API_PREFIX):
        return render(request, exc)
    return denied_response(exc)


def _install_pages(app: FastAPI, settings: ServiceSettings) -> None:
    """The HTML pages, when :mod:`tenantcost.service.pages` exists (the API runs without it)."""
    try:
        from tenantcost.service import pages
    except ModuleNotFoundError as exc:
        if exc.name != "tenantcost.service.pages":
            raise
        return
    install: Any = getattr(pages, "install", None)
    if install is not None:
        install(app, settings)


def app_from_environment() -> FastAPI:
    """The uvicorn factory ``tenantcost.service.app:app_from_environment`` (workers)."""
    return create_app(settings_from_environment())


def json_error(status: int, detail: str, **extra: Any) -> JSONResponse:
    """A JSON error body like FastAPI's own (``{"detail": ...}``) with extra fields."""
    return JSONResponse({"detail": detail, **extra}, status_code=status)
