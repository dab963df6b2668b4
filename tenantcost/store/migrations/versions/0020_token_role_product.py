"""Tokens of the ``product`` role (issue 24): the token role CHECK gains ``product``.

Written by the phone part only because ``serve --demo`` prints a product token and the
browser test walks the product role's pages; if the product part's branch brings its own
migration for the same CHECK, keep that one and drop this file (the lead re-chains ids).

Revision ID: 0020
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0016"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)
BEFORE = "role IN ('admin', 'finance', 'account-manager', 'ingest')"
AFTER = "role IN ('admin', 'finance', 'account-manager', 'product', 'ingest')"
CHECK = "ck_token_ck_token_role"
"""The role CHECK's name as 0006 created it (the naming convention prefixed its name)."""


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
    with op.batch_alter_table("token", copy_from=_token_table(before)) as batch:
        batch.drop_constraint(op.f(CHECK), type_="check")
        batch.create_check_constraint(op.f(CHECK), after)


def upgrade() -> None:
    _role_check(BEFORE, AFTER)


def downgrade() -> None:
    _role_check(AFTER, BEFORE)
