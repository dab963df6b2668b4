"""The ``product`` role: ``token.role`` may be ``product``.

Product teams read every client's issued figures and the pricing page
(:mod:`tenantcost.service.permissions`); a token of theirs is a ``token`` row like any other,
so the role CHECK gains the value. Downgrading first revokes nothing silently: it refuses
while a product token exists (its holder would otherwise lose access without a word).

Revision ID: 0020
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0018"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)
BEFORE = "role IN ('admin', 'finance', 'account-manager', 'ingest')"
AFTER = "role IN ('admin', 'finance', 'account-manager', 'ingest', 'product')"
CHECK = "ck_token_ck_token_role"
"""The role CHECK's name as 0006 created it (the naming convention prefixed the name)."""


def _token_table(role: str) -> sa.Table:
    """``token`` as 0006 made it, with the role CHECK ``role``: SQLite's batch mode does not
    reflect CHECK constraints, so the table it rebuilds is given whole."""
    return sa.Table(
        "token",
        sa.MetaData(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=False),
        sa.Column("clients", sa.Text(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("expires_at", UTC, nullable=True),
        sa.Column("revoked_at", UTC, nullable=True),
        sa.Column("revoked_by", sa.String(length=200), nullable=True),
        sa.CheckConstraint(role, name=CHECK),
        sa.PrimaryKeyConstraint("id", name="pk_token"),
        sa.UniqueConstraint("hash", name="uq_token_hash"),
        sa.UniqueConstraint("name", name="uq_token_name"),
    )


def _role_check(before: str, after: str) -> None:
    """Replace the role CHECK ``before`` by ``after`` (PostgreSQL: in place; SQLite: batch
    mode rebuilds the table from :func:`_token_table`)."""
    with op.batch_alter_table("token", copy_from=_token_table(before)) as batch:
        batch.drop_constraint(op.f(CHECK), type_="check")
        batch.create_check_constraint(op.f(CHECK), after)


def upgrade() -> None:
    _role_check(BEFORE, AFTER)


def downgrade() -> None:
    held = op.get_bind().execute(sa.text("SELECT COUNT(*) FROM token WHERE role = 'product'"))
    if held.scalar():
        raise RuntimeError(
            "product tokens exist: revoke and delete them before downgrading below 0020"
        )
    _role_check(AFTER, BEFORE)
