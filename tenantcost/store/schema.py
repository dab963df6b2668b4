"""The store's schema revision: migrating it (``db upgrade``) and checking it (every command).

Alembic is configured here in code, from the migrations shipped inside the package, so an
installed tenantcost needs no ``alembic.ini`` and no checkout. Every store command other than
``db upgrade`` first calls :func:`require_current_schema`: a store at an older revision would
lack tables the command writes, one at a newer revision may hold meanings this code does not
know; both stop with one line (exit 2) before anything is read or written.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

from tenantcost import __version__
from tenantcost.errors import InputError
from tenantcost.store.actor import os_actor
from tenantcost.store.lock import write_transaction
from tenantcost.store.models import StoreMeta, utcnow
from tenantcost.store.settings import StoreSettings

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for the packaged migrations (on ``connection``, if given)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The revision this code expects (the last migration)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the store has no migrations"
    return head


def known_revisions() -> set[str]:
    """Every revision this code has a migration for."""
    script = ScriptDirectory.from_config(alembic_config())
    return {rev.revision for rev in script.walk_revisions()}


def current_revision(engine: Engine) -> str | None:
    """The store's revision (None for an empty database)."""
    with engine.connect() as connection:
        heads = MigrationContext.configure(connection).get_current_heads()
    return heads[0] if heads else None


@dataclass(frozen=True)
class Upgrade:
    """What ``db upgrade`` did."""

    before: str | None
    after: str


def upgrade(engine: Engine, target: str = "head", *, wait: float = 5.0) -> Upgrade:
    """Migrate the store up to ``target``, recording who did it in ``store_meta``, under the
    store's write lock (waiting up to ``wait`` seconds, else
    :class:`~tenantcost.store.lock.StoreLocked`).

    Refuses a store at a revision this code does not know (newer code upgraded it): going
    "up" from there is impossible and going down would lose what the newer code wrote.
    """
    _refuse_unknown(current_revision(engine), engine)  # before waiting for the lock
    # The migrations and the record: one transaction, holding the lock.
    with write_transaction(engine, wait) as connection:
        heads = MigrationContext.configure(connection).get_current_heads()
        before = heads[0] if heads else None  # read under the lock: another may have upgraded
        _refuse_unknown(before, engine)
        command.upgrade(alembic_config(connection), target)
        after = MigrationContext.configure(connection).get_current_heads()[0]
        if after != before:
            _record_upgrade(connection, created=before is None)
    return Upgrade(before, after)


def downgrade(engine: Engine, target: str) -> None:
    """Migrate the store down to ``target`` (``base``: empty). For tests and operators; no
    command exposes it, since downgrading drops what later revisions hold."""
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), target)


def stamp(engine: Engine, revision: str) -> None:
    """Record ``revision`` as the store's without migrating (tests; repairs by hand)."""
    with engine.begin() as connection:
        command.stamp(alembic_config(connection), revision, purge=True)


def _record_upgrade(connection: Connection, *, created: bool) -> None:
    facts = {"upgraded_at": utcnow().isoformat(), "upgraded_by": os_actor(),
             "upgraded_with": f"tenantcost {__version__}"}  # fmt: skip
    if created:
        facts |= {k.replace("upgraded", "created"): v for k, v in facts.items()}
    from sqlmodel import Session

    with Session(bind=connection) as session:  # joins the migration's transaction
        for key, value in facts.items():
            row = session.get(StoreMeta, key) or StoreMeta(key=key, value=value)
            row.value, row.updated_at = value, utcnow()
            session.add(row)
        session.flush()


def _refuse_unknown(revision: str | None, engine: Engine) -> None:
    if revision is not None and revision not in known_revisions():
        raise InputError(
            f"the store {_name(engine)} is at schema revision {revision}, newer than this "
            f"tenantcost {__version__} knows (it expects {head_revision()}): use the tenantcost "
            "version that ran `tenantcost db upgrade` on it"
        )


def require_current_schema(engine: Engine) -> str:
    """The store's revision if it is the one this code expects; else one line, exit 2."""
    revision = current_revision(engine)
    expected = head_revision()
    if revision == expected:
        return revision
    _refuse_unknown(revision, engine)
    state = "has no tenantcost schema" if revision is None else f"is at schema revision {revision}"
    raise InputError(
        f"the store {_name(engine)} {state}, this tenantcost {__version__} expects revision "
        f"{expected}: run `tenantcost db upgrade`"
    )


def _name(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)


@contextmanager
def current_store(settings: StoreSettings) -> Iterator[Engine]:
    """The engine of the store ``settings`` name, refused unless at the current revision.

    Every command that reads or writes a store opens it this way: errors reaching the database
    are one line (:func:`~tenantcost.store.engine.store_errors`), a stale schema is one line,
    and the engine is disposed when the command is done.
    """
    from tenantcost.store.engine import open_engine, store_errors

    with store_errors(settings):
        engine = open_engine(settings)
        try:
            require_current_schema(engine)
            yield engine
        finally:
            engine.dispose()
