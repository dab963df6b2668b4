"""The reason clients' readers are told of a restatement (``reopen --client-reason``).

A reopen's ``reason`` is written for finance and may hold other clients' names and figures
that no redaction can recognise, so account managers and client sheets never show it. This
adds ``client_reason`` to ``month_event`` (the reopen's, carried by the close after it) and to
``statement`` (copied at issue, like ``reason``). NULL, as on every row written before: the
client's reader sees the fixed note "restated by finance".

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TABLES = ("month_event", "statement")


def upgrade() -> None:
    for name in TABLES:
        op.add_column(name, sa.Column("client_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    for name in reversed(TABLES):
        with op.batch_alter_table(name) as batch:  # SQLite drops a column by a table copy
            batch.drop_column("client_reason")
