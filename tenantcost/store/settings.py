"""Where the store is: the database URL and the data directory.

Each value comes from the first of: the command's flag (``--db``, ``--data``), the environment
(``TENANTCOST_DB``, ``TENANTCOST_DATA``), the settings file (``--settings FILE``, else
``TENANTCOST_SETTINGS``), the default. Flags win so that a one-off command can point
elsewhere without editing anything; the environment wins over the file so that a container
can override a file baked into its image.

Defaults: ``sqlite:///tenantcost.db`` (a file in the working directory) and the folder
``tenantcost-data/`` next to that file. A server database (PostgreSQL) has no folder "next to
it", so there the data directory has no default and the commands that need it say so.

Relative paths in a settings file are relative to the file's folder (as the rule file's
``sources:`` are), so one file works from any working directory; on the command line and in
the environment they are relative to the working directory. ``config/settings.example.yaml``
documents every field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tenantcost.config.base import Strict
from tenantcost.config.otlp import OtlpSettings
from tenantcost.config.watch import AlertSettings, WatchSettings
from tenantcost.errors import InputError

ENV_DB = "TENANTCOST_DB"
ENV_DATA = "TENANTCOST_DATA"
ENV_SETTINGS = "TENANTCOST_SETTINGS"
DEFAULT_DB = "sqlite:///tenantcost.db"
DATA_FOLDER = "tenantcost-data"
SQLITE_PREFIX = "sqlite:///"
POSTGRES_DRIVER = "postgresql+psycopg"
_POSTGRES_ALIASES = ("postgresql://", "postgres://")
_SUPPORTED = "sqlite:///FILE or postgresql+psycopg://USER@HOST:PORT/DB"


class SettingsFile(Strict):
    """The settings file's fields (every one optional; unknown keys are typos)."""

    db: str | None = None
    data: str | None = None
    secret: str | None = None
    """The service's session secret (``tenantcost serve``; TENANTCOST_SECRET wins)."""
    otlp: OtlpSettings | None = None
    """``POST /v1/metrics``: which OTLP metrics are which usage columns."""
    watch: WatchSettings | None = None
    """``tenantcost watch``: the anomaly method's parameters."""
    alerts: AlertSettings | None = None
    """``tenantcost watch --notify``: destinations and routes."""


@dataclass(frozen=True)
class StoreSettings:
    """The resolved settings, with where each value came from (for error messages)."""

    db: str
    data: str | None
    db_origin: str
    data_origin: str
    settings_file: Path | None = None
    secret: str | None = field(default=None, repr=False)
    """The settings file's ``secret`` (the service reads TENANTCOST_SECRET first)."""
    otlp: OtlpSettings = field(default_factory=OtlpSettings)
    """The settings file's ``otlp:`` section (its defaults without one)."""
    watch: WatchSettings = field(default_factory=WatchSettings)
    """The settings file's ``watch:`` section (its defaults without one)."""
    alerts: AlertSettings | None = None
    """The settings file's ``alerts:`` section (None: ``--notify`` has nowhere to send)."""

    @property
    def sqlite_path(self) -> Path | None:
        """The database file of a SQLite store (None in memory or on a server)."""
        if not self.db.startswith(SQLITE_PREFIX):
            return None
        path = self.db.removeprefix(SQLITE_PREFIX).split("?", 1)[0]
        return Path(path) if path and path != ":memory:" else None

    @property
    def display_db(self) -> str:
        """The URL without its password, for messages."""
        return display_url(self.db)

    def require_data(self) -> str:
        """The data directory, or a one-line error for a store that has none configured."""
        if self.data is None:
            raise InputError(
                f"no data directory for the store {self.display_db}: pass --data DIR, set "
                f"{ENV_DATA} or 'data:' in the settings file (a server database has no default)"
            )
        return self.data


def display_url(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def normalize_db_url(url: str, origin: str) -> str:
    """A supported SQLAlchemy URL: ``postgresql://`` gets the psycopg 3 driver (the one
    tenantcost installs); anything else is a one-line error naming where it came from."""
    url = url.strip()
    for alias in _POSTGRES_ALIASES:
        if url.startswith(alias):
            return f"{POSTGRES_DRIVER}://{url.removeprefix(alias)}"
    if url.startswith(f"{POSTGRES_DRIVER}://") or url.startswith(SQLITE_PREFIX):
        return url
    if url in ("sqlite://", "sqlite:///:memory:"):
        return "sqlite://"
    hint = f" (did you mean {SQLITE_PREFIX}{url}?)" if "://" not in url else ""
    raise InputError(
        f"not a supported database URL: '{display_url(url)}'{hint}; use {_SUPPORTED}",
        file=origin,
    )


def _read_file(path: Path) -> SettingsFile:
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such settings file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        problem = getattr(exc, "problem", None) or exc
        raise InputError(f"not valid YAML: {problem}", file=str(path), where=where) from None
    if data is None:
        return SettingsFile()
    if not isinstance(data, dict):
        raise InputError("a settings file is a mapping (db:, data:)", file=str(path))
    try:
        return SettingsFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        message = "unknown key" if first["type"] == "extra_forbidden" else str(first["msg"])
        raise InputError(message, file=str(path), where=where) from None


def _relative_to(base: Path, db: str | None, data: str | None) -> tuple[str | None, str | None]:
    """A settings file's relative SQLite path and data folder, made relative to its folder."""
    if db is not None and db.startswith(SQLITE_PREFIX):
        path = db.removeprefix(SQLITE_PREFIX)
        if path and not path.startswith(("/", ":memory:")):
            db = f"{SQLITE_PREFIX}{base / path}"
    if data is not None and "://" not in data and not Path(data).is_absolute():
        data = str(base / data)
    return db, data


def resolve_settings(
    db: str | None = None,
    data: str | None = None,
    settings: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> StoreSettings:
    """Flags (the arguments) > environment > settings file > defaults, per value."""
    env = os.environ if environ is None else environ
    settings_file = settings or (Path(env[ENV_SETTINGS]) if env.get(ENV_SETTINGS) else None)
    file_db = file_data = file_secret = None
    otlp = OtlpSettings()
    watch, alerts = WatchSettings(), None
    if settings_file is not None:
        parsed = _read_file(settings_file)
        file_secret = parsed.secret
        otlp = parsed.otlp or otlp
        watch, alerts = parsed.watch or watch, parsed.alerts
        file_db, file_data = _relative_to(settings_file.parent, parsed.db, parsed.data)
    db_value, db_origin = _first(
        (db, "--db"), (env.get(ENV_DB), ENV_DB), (file_db, f"{settings_file}: db")
    )
    db_origin = db_origin or "--db default"
    url = normalize_db_url(db_value or DEFAULT_DB, db_origin)
    data_value, data_origin = _first(
        (data, "--data"), (env.get(ENV_DATA), ENV_DATA), (file_data, f"{settings_file}: data")
    )
    resolved = StoreSettings(url, data_value, db_origin, data_origin or "--data default",
                             settings_file, file_secret, otlp, watch, alerts)  # fmt: skip
    if data_value is None and resolved.sqlite_path is not None:
        folder = resolved.sqlite_path.parent / DATA_FOLDER
        resolved = StoreSettings(url, str(folder), db_origin, "--data default", settings_file,
                                 file_secret, otlp, watch, alerts)  # fmt: skip
    return resolved


def _first(*candidates: tuple[str | None, str]) -> tuple[str | None, str | None]:
    """The first non-empty value and its origin."""
    for value, origin in candidates:
        if value:
            return value, origin
    return None, None
