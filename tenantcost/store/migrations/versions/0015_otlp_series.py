"""OTLP series state: the last point of each series ``POST /v1/metrics`` received.

A cumulative OTLP point carries its series' total since ``start_unix_nano``: the usage it adds
is its difference from the previous point, which is kept here (so a restart of the service
neither counts a series twice nor loses it), and a point at or before the kept one was received
already. ``seen_at`` is when the series last arrived: rows not seen for 48 hours are deleted.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "otlp_series",
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("start_unix_nano", sa.BigInteger(), nullable=False),
        sa.Column("time_unix_nano", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("seen_at", UTC, nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_otlp_series"),
    )
    op.create_index("ix_otlp_series_seen_at", "otlp_series", ["seen_at"])


def downgrade() -> None:
    op.drop_index("ix_otlp_series_seen_at", table_name="otlp_series")
    op.drop_table("otlp_series")
