"""The client catalog (``tenantcost catalog load``): plans, segments, revenue, contract days.

``catalog_load`` is one load of a catalog file (sha256, origin, currency, clients, who and
when); ``catalog_client`` its rows, as the catalog reader checked them. The latest load is
the store's catalog (``unit-economics --from-db``); earlier loads stay for provenance.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "catalog_load",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("clients", sa.Integer(), nullable=False),
        sa.Column("loaded_at", UTC, nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_catalog_load"),
    )
    op.create_table(
        "catalog_client",
        sa.Column("load_id", sa.Integer(), nullable=False),
        sa.Column("client", sa.String(length=400), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("plan", sa.Text(), nullable=False),
        sa.Column("segment", sa.Text(), nullable=False),
        sa.Column("account_manager", sa.Text(), nullable=False),
        sa.Column("monthly_revenue", sa.BigInteger(), nullable=False),
        sa.Column("has_revenue", sa.Boolean(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("contract_start", sa.Date(), nullable=True),
        sa.Column("contract_end", sa.Date(), nullable=True),
        sa.ForeignKeyConstraint(
            ["load_id"], ["catalog_load.id"], name="fk_catalog_client_load_id_catalog_load"
        ),
        sa.PrimaryKeyConstraint("load_id", "client", name="pk_catalog_client"),
    )


def downgrade() -> None:
    op.drop_table("catalog_client")
    op.drop_table("catalog_load")
