"""A budget band in a client's own currency (issue 37).

``budget_client.currency`` is the band's ISO 4217 currency when the budget file's
``currency`` column gives one; NULL: the version's currency (the ledger's), as every band
before. The watch compares such a band with the projection converted at the month's rates to
date.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("budget_client", sa.Column("currency", sa.String(length=3), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("budget_client") as batch:  # SQLite drops by a table copy
        batch.drop_column("currency")
