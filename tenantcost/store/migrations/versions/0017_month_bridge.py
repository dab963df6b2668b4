"""The month-over-month bridge, cached per pair of runs.

``month_bridge`` is one run's bridge against the previous month's run issued at the time
(unique per pair: a restated previous month is another pair), ``month_bridge_client`` each
client's two amounts, ``month_bridge_part`` each part (``explain``'s effects) with its reason.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)
EFFECTS = "'volume', 'rate', 'rule', 'residual', 'direct', 'new_source', 'ended_source'"


def upgrade() -> None:
    op.create_table(
        "month_bridge",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("previous_month", sa.String(length=7), nullable=False),
        sa.Column("previous_run_id", sa.String(length=36), nullable=False),
        sa.Column("restated", sa.Boolean(), nullable=False),
        sa.Column("computed_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_month_bridge_run_id_run"),
        sa.ForeignKeyConstraint(["previous_run_id"], ["run.id"],
                                name="fk_month_bridge_previous_run_id_run"),
        sa.PrimaryKeyConstraint("id", name="pk_month_bridge"),
        sa.UniqueConstraint("run_id", "previous_run_id",
                            name="uq_month_bridge_run_id_previous_run_id"),
    )  # fmt: skip
    op.create_table(
        "month_bridge_client",
        sa.Column("bridge_id", sa.Integer(), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("previous_amount", sa.BigInteger(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["bridge_id"], ["month_bridge.id"],
                                name="fk_month_bridge_client_bridge_id_month_bridge"),
        sa.PrimaryKeyConstraint("bridge_id", "client", name="pk_month_bridge_client"),
    )  # fmt: skip
    op.create_table(
        "month_bridge_part",
        sa.Column("bridge_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("effect", sa.String(length=16), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.CheckConstraint(f"effect IN ({EFFECTS})", name="ck_month_bridge_part_effect"),
        sa.ForeignKeyConstraint(["bridge_id"], ["month_bridge.id"],
                                name="fk_month_bridge_part_bridge_id_month_bridge"),
        sa.PrimaryKeyConstraint("bridge_id", "position", name="pk_month_bridge_part"),
    )  # fmt: skip
    op.create_index("ix_month_bridge_part_bridge_id_client", "month_bridge_part",
                    ["bridge_id", "client"])  # fmt: skip


def downgrade() -> None:
    op.drop_index("ix_month_bridge_part_bridge_id_client", table_name="month_bridge_part")
    op.drop_table("month_bridge_part")
    op.drop_table("month_bridge_client")
    op.drop_table("month_bridge")
