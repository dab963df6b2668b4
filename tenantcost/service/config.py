"""The service's settings: the store's, plus the session secret and the ingest limits.

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
            "(e.g. `python3 -c \"import secrets; print(secrets.token_urlsafe(32))\"`)",
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
    return ServiceSettings(store, check_secret(secret, origin), max_records)
