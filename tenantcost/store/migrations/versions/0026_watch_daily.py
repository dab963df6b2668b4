"""Each watch run's daily cost per source, per client and summed over all clients.

``tenantcost watch`` sums its allocation per client, source and day to score anomalies, then
kept only the anomalies. The pages now draw the daily cost per source with each anomaly
marked, and a page never allocates, so each run keeps those sums: ``watch_daily`` holds one
row per client of the run (its days as JSON) and one row with an empty ``client``, the sums
over every client, so the month page reads one row at 10,000 clients. Runs recorded before
this revision have no rows: their pages show no daily chart.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "watch_daily",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("figures", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["snapshot_id"], ["watch_snapshot.id"],
                                name="fk_watch_daily_snapshot_id_watch_snapshot"),
        sa.PrimaryKeyConstraint("snapshot_id", "client", name="pk_watch_daily"),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("watch_daily")
