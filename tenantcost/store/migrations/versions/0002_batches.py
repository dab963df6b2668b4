"""The catalog of ingested batches (costs and usage).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batch",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("window_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_to", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.CheckConstraint("kind IN ('costs', 'usage')", name="ck_batch_kind"),
        sa.CheckConstraint("mode IN ('replace', 'sum')", name="ck_batch_mode"),
        sa.CheckConstraint("status IN ('pending', 'committed', 'aborted')", name="ck_batch_status"),
        sa.CheckConstraint("rows >= 0", name="ck_batch_rows"),
        sa.CheckConstraint("window_to > window_from", name="ck_batch_window"),
        sa.PrimaryKeyConstraint("id", name="pk_batch"),
        sa.UniqueConstraint("uid", name="uq_batch_uid"),
    )
    op.create_index("ix_batch_kind_window_from", "batch", ["kind", "window_from"])


def downgrade() -> None:
    op.drop_index("ix_batch_kind_window_from", table_name="batch")
    op.drop_table("batch")
