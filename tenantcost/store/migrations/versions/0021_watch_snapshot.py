"""What each ``tenantcost watch`` run found, for the service to show.

``watch_snapshot`` is one run of ``watch`` on a month (``as_of``, the month-level warnings as
JSON), ``watch_entry`` each client's part of it: status, month to date, projection and its
own anomalies, rule changes and warnings as JSON, so that an account manager's page reads one
row of its own client and nothing else.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)
STATUSES = "'below', 'within', 'above', 'no_budget'"


def upgrade() -> None:
    op.create_table(
        "watch_snapshot",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("as_of", UTC, nullable=False),
        sa.Column("computed_at", UTC, nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("month_closed", sa.Boolean(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_watch_snapshot"),
    )
    op.create_index("ix_watch_snapshot_month_id", "watch_snapshot", ["month", "id"])
    op.create_table(
        "watch_entry",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("month_to_date", sa.BigInteger(), nullable=False),
        sa.Column("projected", sa.BigInteger(), nullable=False),
        sa.Column("anomalies", sa.Integer(), nullable=False),
        sa.Column("entry", sa.Text(), nullable=False),
        sa.CheckConstraint(f"status IN ({STATUSES})", name="ck_watch_entry_status"),
        sa.ForeignKeyConstraint(["snapshot_id"], ["watch_snapshot.id"],
                                name="fk_watch_entry_snapshot_id_watch_snapshot"),
        sa.PrimaryKeyConstraint("snapshot_id", "client", name="pk_watch_entry"),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("watch_entry")
    op.drop_index("ix_watch_snapshot_month_id", table_name="watch_snapshot")
    op.drop_table("watch_snapshot")
