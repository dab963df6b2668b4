"""The service's tokens (hashes only) and the idempotency keys of its usage API.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "token",
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
        sa.CheckConstraint(
            "role IN ('admin', 'finance', 'account-manager', 'ingest')", name="ck_token_role"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_token"),
        sa.UniqueConstraint("hash", name="uq_token_hash"),
        sa.UniqueConstraint("name", name="uq_token_name"),
    )
    op.create_table(
        "idempotency_key",
        sa.Column("token_name", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("request_sha256", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.Column("batch_uid", sa.String(length=32), nullable=True),
        sa.Column("created_at", UTC, nullable=False),
        sa.PrimaryKeyConstraint("token_name", "key", name="pk_idempotency_key"),
    )


def downgrade() -> None:
    op.drop_table("idempotency_key")
    op.drop_table("token")
