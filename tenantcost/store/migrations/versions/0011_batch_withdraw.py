"""Batch withdrawal: ``batch withdraw`` takes a committed batch back from its open months.

``batch.status`` gains ``withdrawn`` (every reader asks for ``committed`` batches, so a
withdrawn batch no longer counts, while its row, cells and files stay), and
``batch_withdrawal`` records who withdrew it, when and why (one row per batch).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)
BEFORE = "status IN ('pending', 'committed', 'aborted')"
AFTER = "status IN ('pending', 'committed', 'aborted', 'withdrawn')"
CHECK = "ck_batch_ck_batch_"
"""The prefix of the batch CHECK constraints' names as 0002 created them (the naming
convention prefixed the names it was given)."""


def _batch_table(status: str) -> sa.Table:
    """``batch`` as 0002 made it, with the status CHECK ``status``: SQLite's batch mode does
    not reflect CHECK constraints, so the table it rebuilds is given whole (else it would lose
    the kind, mode, rows and window checks)."""
    return sa.Table(
        "batch",
        sa.MetaData(),
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uid", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("window_from", UTC, nullable=False),
        sa.Column("window_to", UTC, nullable=False),
        sa.Column("created_at", UTC, nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.CheckConstraint("kind IN ('costs', 'usage')", name=f"{CHECK}kind"),
        sa.CheckConstraint("mode IN ('replace', 'sum')", name=f"{CHECK}mode"),
        sa.CheckConstraint(status, name=f"{CHECK}status"),
        sa.CheckConstraint("rows >= 0", name=f"{CHECK}rows"),
        sa.CheckConstraint("window_to > window_from", name=f"{CHECK}window"),
        sa.PrimaryKeyConstraint("id", name="pk_batch"),
        sa.UniqueConstraint("uid", name="uq_batch_uid"),
        sa.Index("ix_batch_kind_window_from", "kind", "window_from"),
    )


def _status_check(before: str, after: str) -> None:
    """Replace the batch status CHECK ``before`` by ``after`` (PostgreSQL: in place; SQLite:
    batch mode rebuilds the table from :func:`_batch_table`)."""
    with op.batch_alter_table("batch", copy_from=_batch_table(before)) as batch:
        batch.drop_constraint(op.f(f"{CHECK}status"), type_="check")
        batch.create_check_constraint(op.f(f"{CHECK}status"), after)


def upgrade() -> None:
    _status_check(BEFORE, AFTER)
    op.create_table(
        "batch_withdrawal",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("at", UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"], ["batch.id"], name="fk_batch_withdrawal_batch_id_batch"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_batch_withdrawal"),
        sa.UniqueConstraint("batch_id", name="uq_batch_withdrawal_batch_id"),
    )


def downgrade() -> None:
    op.drop_table("batch_withdrawal")
    # 'aborted' is a status no reader counts either: a withdrawn batch stays out of the figures
    op.execute("UPDATE batch SET status = 'aborted' WHERE status = 'withdrawn'")
    _status_check(AFTER, BEFORE)
