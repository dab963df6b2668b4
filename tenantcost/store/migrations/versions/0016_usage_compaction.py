"""Usage compaction: a day's committed usage batches folded into one Parquet file.

A meter posts one small ``sum`` batch per process and minute (about 350,000 a month for 8
processes); reading a month would open every batch's file and apply the which-rows-count rule
to every cell. ``usage_compaction`` records a day's folded file: readers open it as one
virtual batch (id ``upto_batch_id``, the largest id it folds) plus the files of the batches
committed after it. An index on ``batch_file (day, batch_id)`` finds those files without
walking the folded ones.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "usage_compaction",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.String(length=32), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("upto_batch_id", sa.Integer(), nullable=False),
        sa.Column("batches", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("ended_at", UTC, nullable=True),
        sa.CheckConstraint(
            "status IN ('active', 'superseded', 'invalid')", name="ck_usage_compaction_status"
        ),
        sa.CheckConstraint("rows >= 0", name="ck_usage_compaction_rows"),
        sa.ForeignKeyConstraint(
            ["upto_batch_id"], ["batch.id"], name="fk_usage_compaction_upto_batch_id_batch"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_usage_compaction"),
        sa.UniqueConstraint("uid", name="uq_usage_compaction_uid"),
    )
    op.create_index("ix_usage_compaction_day_status", "usage_compaction", ["day", "status"])
    op.create_index("ix_batch_file_day_batch_id", "batch_file", ["day", "batch_id"])


def downgrade() -> None:
    op.drop_index("ix_batch_file_day_batch_id", table_name="batch_file")
    op.drop_index("ix_usage_compaction_day_status", table_name="usage_compaction")
    op.drop_table("usage_compaction")
