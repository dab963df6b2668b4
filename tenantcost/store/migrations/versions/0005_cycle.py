"""The closed-period cycle: month events (close, reopen) and issued statements.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "month_event",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("run_id", sa.String(length=36), nullable=True),
        sa.Column("incomplete", sa.Boolean(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("at", UTC, nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.CheckConstraint("action IN ('close', 'reopen')", name="ck_month_event_action"),
        sa.CheckConstraint("revision >= 1", name="ck_month_event_revision"),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_month_event_run_id_run"),
        sa.PrimaryKeyConstraint("id", name="pk_month_event"),
        sa.UniqueConstraint(
            "month", "action", "revision", name="uq_month_event_month_action_revision"
        ),
    )
    op.create_index("ix_month_event_month_id", "month_event", ["month", "id"])
    op.create_table(
        "statement",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("previous_amount", sa.BigInteger(), nullable=True),
        sa.Column("difference", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("rule_ids", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("incomplete", sa.Boolean(), nullable=False),
        sa.Column("issued_at", UTC, nullable=False),
        sa.Column("issued_by", sa.String(length=200), nullable=False),
        sa.CheckConstraint("revision >= 1", name="ck_statement_revision"),
        sa.ForeignKeyConstraint(
            ["event_id"], ["month_event.id"], name="fk_statement_event_id_month_event"
        ),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_statement_run_id_run"),
        sa.PrimaryKeyConstraint("id", name="pk_statement"),
        sa.UniqueConstraint(
            "month", "client", "revision", name="uq_statement_month_client_revision"
        ),
    )
    op.create_index("ix_statement_client_month", "statement", ["client", "month"])
    op.create_index("ix_statement_event_id", "statement", ["event_id"])
    op.create_index("ix_statement_run_id", "statement", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_statement_run_id", table_name="statement")
    op.drop_index("ix_statement_event_id", table_name="statement")
    op.drop_index("ix_statement_client_month", table_name="statement")
    op.drop_table("statement")
    op.drop_index("ix_month_event_month_id", table_name="month_event")
    op.drop_table("month_event")
