"""The display rule a close froze with its revision: its version and the decimals it chose.

A revision's figures are shown as strings (``0.1234 USD``) on every page and sheet. They are
rounded by a display rule (decimals per currency, raised for small amounts, the same decimals
across a client's history: :mod:`tenantcost.report.display_rule`). If the rule changed later
(a currency's decimals, the smallest figure shown), an issued revision would read differently
from what was sent. So a close records the rule's version and the decimals it chose on its
close event; pages and sheets read them back. Closes from before this revision have neither
and are shown by version 1, the rule they were shown with.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("month_event", sa.Column("display_rule", sa.Integer(), nullable=True))
    op.add_column("month_event", sa.Column("display_places", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("month_event") as batch:  # SQLite drops by a table copy
        batch.drop_column("display_places")
        batch.drop_column("display_rule")
