"""The cells (window, service or workload) and the Parquet files of each batch.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batch_cell",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name="fk_batch_cell_batch_id_batch"),
        sa.PrimaryKeyConstraint("id", name="pk_batch_cell"),
    )
    op.create_index("ix_batch_cell_batch_id", "batch_cell", ["batch_id"])
    op.create_index("ix_batch_cell_window_start_key", "batch_cell", ["window_start", "key"])
    op.create_table(
        "batch_file",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.CheckConstraint("rows >= 0", name="ck_batch_file_rows"),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name="fk_batch_file_batch_id_batch"),
        sa.PrimaryKeyConstraint("id", name="pk_batch_file"),
    )
    op.create_index("ix_batch_file_batch_id", "batch_file", ["batch_id"])
    op.create_index("ix_batch_file_day", "batch_file", ["day"])


def downgrade() -> None:
    op.drop_index("ix_batch_file_day", table_name="batch_file")
    op.drop_index("ix_batch_file_batch_id", table_name="batch_file")
    op.drop_table("batch_file")
    op.drop_index("ix_batch_cell_window_start_key", table_name="batch_cell")
    op.drop_index("ix_batch_cell_batch_id", table_name="batch_cell")
    op.drop_table("batch_cell")
