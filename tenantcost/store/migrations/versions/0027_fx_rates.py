"""Exchange rates kept in the store (``tenantcost fx load FILE|ecb``).

``fx_load`` is one load of rates (a treasury file or the bundled ECB history): its sha256,
origin, count and days, who and when. ``fx_rate`` its rates, ``1 base = rate quote`` on a
date, the rate as published decimal text. Later loads win for the same date and pair.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "fx_load",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("rates", sa.Integer(), nullable=False),
        sa.Column("first_date", sa.Date(), nullable=False),
        sa.Column("last_date", sa.Date(), nullable=False),
        sa.Column("loaded_at", UTC, nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_fx_load"),
    )
    op.create_table(
        "fx_rate",
        sa.Column("load_id", sa.Integer(), nullable=False),
        sa.Column("published_on", sa.Date(), nullable=False),
        sa.Column("base", sa.String(length=3), nullable=False),
        sa.Column("quote", sa.String(length=3), nullable=False),
        sa.Column("rate", sa.String(length=40), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["load_id"], ["fx_load.id"], name="fk_fx_rate_load_id_fx_load"),
        sa.PrimaryKeyConstraint("load_id", "published_on", "base", "quote", name="pk_fx_rate"),
    )


def downgrade() -> None:
    op.drop_table("fx_rate")
    op.drop_table("fx_load")
