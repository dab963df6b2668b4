"""Alembic's entry point, configured in code by :mod:`tenantcost.store.schema`.

The connection comes in ``config.attributes["connection"]``: the command that migrates opens
it (with the store's SQLite pragmas, foreign keys off while tables are rebuilt). SQLite gets
Alembic's batch mode (``ALTER TABLE`` there cannot drop or alter columns; batch mode copies the
table), and every migration runs in one transaction on both backends, so a failed upgrade
leaves the previous revision intact. On PostgreSQL a transaction-scoped advisory lock makes
two concurrent upgrades run one after the other (the second finds nothing to do).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from tenantcost.store.models import METADATA

MIGRATION_LOCK = 7_240_911_001
"""PostgreSQL advisory lock key held while migrating (the store's other locks use others)."""


def run_migrations_online() -> None:
    """Migrate on the connection the caller opened."""
    connection = context.config.attributes["connection"]
    sqlite = connection.dialect.name == "sqlite"
    context.configure(
        connection=connection,
        target_metadata=METADATA,
        render_as_batch=sqlite,
        transactional_ddl=True,
        compare_type=True,
    )
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("tenantcost migrations run online only: `tenantcost db upgrade`")
run_migrations_online()
