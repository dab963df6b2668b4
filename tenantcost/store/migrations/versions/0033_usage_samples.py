"""Gauges in the store (issue 39): the declared kind of each usage column, and gauge samples.

* ``usage_metric``: ``metrics:`` of the rule files loaded (name, kind, unit, stale_after);
* ``usage_sample``: each gauge sample of a ``usage`` batch, its level as exact decimal text
  at a microsecond instant, read by ``(metric, t_us)``.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "usage_metric",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("unit", sa.String(length=32), nullable=True),
        sa.Column("stale_after", sa.String(length=8), nullable=True),
        sa.Column("rule_file_id", sa.Integer(), nullable=False),
        sa.Column("declared_at", UTC, nullable=False),
        sa.CheckConstraint("kind IN ('counter', 'gauge')", name=op.f("ck_usage_metric_kind")),
        sa.ForeignKeyConstraint(
            ["rule_file_id"], ["rule_file.id"], name="fk_usage_metric_rule_file_id_rule_file"
        ),
        sa.PrimaryKeyConstraint("name", name="pk_usage_metric"),
    )
    op.create_table(
        "usage_sample",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("metric", sa.String(length=63), nullable=False),
        sa.Column("service", sa.Text(), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("t_us", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.String(length=40), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name="fk_usage_sample_batch_id_batch"),
        sa.PrimaryKeyConstraint("id", name="pk_usage_sample"),
    )
    op.create_index("ix_usage_sample_batch_id", "usage_sample", ["batch_id"])
    op.create_index("ix_usage_sample_metric_t_us", "usage_sample", ["metric", "t_us"])


def downgrade() -> None:
    op.drop_index("ix_usage_sample_metric_t_us", table_name="usage_sample")
    op.drop_index("ix_usage_sample_batch_id", table_name="usage_sample")
    op.drop_table("usage_sample")
    op.drop_table("usage_metric")
