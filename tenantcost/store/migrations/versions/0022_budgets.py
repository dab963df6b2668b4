"""Budgets per client and month (``tenantcost budget load``), versioned.

``budget_version`` is one load of a month's budget: its number within the month (the latest
is in force, earlier ones stay), the sha256 of its canonical rows, origin, currency, who and
when; ``budget_client`` each client's band in micro-units (0 <= low <= expected <= high).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "budget_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("clients", sa.Integer(), nullable=False),
        sa.Column("loaded_at", UTC, nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.CheckConstraint("version >= 1", name="ck_budget_version_version"),
        sa.PrimaryKeyConstraint("id", name="pk_budget_version"),
        sa.UniqueConstraint("month", "version", name="uq_budget_version_month_version"),
    )
    op.create_table(
        "budget_client",
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("client", sa.String(length=400), nullable=False),
        sa.Column("low", sa.BigInteger(), nullable=False),
        sa.Column("expected", sa.BigInteger(), nullable=False),
        sa.Column("high", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("low >= 0 AND low <= expected AND expected <= high",
                           name="ck_budget_client_band"),
        sa.ForeignKeyConstraint(["version_id"], ["budget_version.id"],
                                name="fk_budget_client_version_id_budget_version"),
        sa.PrimaryKeyConstraint("version_id", "client", name="pk_budget_client"),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("budget_client")
    op.drop_table("budget_version")
