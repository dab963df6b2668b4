"""The service's settings: the store's, plus the session secret and the request limits.

Worker processes (``serve --workers N``) each build the application from the environment
(:func:`settings_from_environment`), so ``serve`` passes everything it resolved through
environment variables: one source of truth, whether one process runs or several.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from tenantcost.errors import InputError
from tenantcost.store.settings import StoreSettings, resolve_settings

ENV_SECRET = "TENANTCOST_SECRET"
ENV_MAX_RECORDS = "TENANTCOST_MAX_RECORDS"
DEFAULT_MAX_RECORDS = 100_000
ENV_MAX_BODY = "TENANTCOST_MAX_BODY"
DEFAULT_MAX_BODY = 32 * 1024 * 1024
"""Largest request body, in bytes (32 MiB), of any route: counted while the body streams in
(:mod:`tenantcost.service.body_limit`), so a chunked body is cut off as soon as it passes.

Why 32 MiB: it holds :data:`DEFAULT_MAX_RECORDS` JSON usage records of about 330 bytes each
(a record with an hour window, a service, a client id of 30 characters and three metrics is
about 200), or a Parquet file of far more rows; and a refused body costs the server at most
this much memory for the moment it takes to refuse it, well under the 100 MiB it may grow."""
MIN_SECRET_LENGTH = 16
PLACEHOLDER_SECRET = "change-me"
"""config/settings.example.yaml's secret starts so; ``serve`` refuses it."""
INGEST_WAIT_SECONDS = 30.0
"""How long a usage POST waits for another writer (concurrent posters queue, none is lost)."""


@dataclass(frozen=True)
class ServiceSettings:
    """What :func:`tenantcost.service.app.create_app` needs."""

    store: StoreSettings
    secret: str
    """Signs browser sessions; the same in every worker and across restarts."""
    max_records: int = DEFAULT_MAX_RECORDS
    """A usage batch with more records is refused (413)."""
    max_body: int = DEFAULT_MAX_BODY
    """A request body of more bytes is refused (413) while it streams in."""
    ingest_wait: float = INGEST_WAIT_SECONDS


def check_secret(secret: str | None, origin: str) -> str:
    """A usable session secret, or one line saying where to set one."""
    if not secret:
        raise InputError(
            f"no session secret: set {ENV_SECRET} or 'secret:' in the settings file "
            "(sessions must survive restarts and be the same in every worker)"
        )
    if secret.startswith(PLACEHOLDER_SECRET):
        raise InputError(
            "the session secret is the example's placeholder: set a random one "
            '(e.g. `python3 -c "import secrets; print(secrets.token_urlsafe(32))"`)',
            file=origin,
        )
    if len(secret) < MIN_SECRET_LENGTH:
        raise InputError(
            f"the session secret is {len(secret)} characters, at least "
            f"{MIN_SECRET_LENGTH} are needed",
            file=origin,
        )
    return secret


def settings_from_environment(environ: Mapping[str, str] | None = None) -> ServiceSettings:
    """The settings the ``serve`` command exported (flags already folded in)."""
    env = os.environ if environ is None else environ
    store = resolve_settings(environ=env)
    secret = env.get(ENV_SECRET) or store.secret
    origin = ENV_SECRET if env.get(ENV_SECRET) else f"{store.settings_file}: secret"
    max_records = int(env.get(ENV_MAX_RECORDS) or DEFAULT_MAX_RECORDS)
    max_body = int(env.get(ENV_MAX_BODY) or DEFAULT_MAX_BODY)
    return ServiceSettings(store, check_secret(secret, origin), max_records, max_body)
