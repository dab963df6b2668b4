"""Billing data in the store: billing batches, their billing cells, the invoice.

``batch.kind`` gains ``billing``: a batch of billing rows (FOCUS or CUR 2.0, stored as the
reader's canonical columns in Parquet). Its ``batch_cell`` rows are its (BillingPeriodStart,
BillingPeriodEnd, BillingAccountId) cells: a later billing batch holding a cell replaces
every earlier one's rows of it (cloud exports are restated until the invoice is final).
``billing_cell`` keeps what ``status`` and ``close`` read of each cell without opening the
Parquet files: its rows, the invoices it lists, the last charge period end and the spans of
hours its usage lines cover. ``run.invoice`` is the invoice cascade of a run on billing data
(the ``invoice`` object of ``allocate --format json``; NULL for a run without billing data).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)
BEFORE = "kind IN ('costs', 'usage')"
AFTER = "kind IN ('costs', 'usage', 'billing')"
CHECK = "ck_batch_ck_batch_"
"""The prefix of the batch CHECK constraints' names as 0002 created them."""
STATUS = "status IN ('pending', 'committed', 'aborted', 'withdrawn')"


def _batch_table(kind: str) -> sa.Table:
    """``batch`` as 0011 left it, with the kind CHECK ``kind`` (SQLite's batch mode does not
    reflect CHECK constraints: the table it rebuilds is given whole)."""
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
        sa.CheckConstraint(kind, name=f"{CHECK}kind"),
        sa.CheckConstraint("mode IN ('replace', 'sum')", name=f"{CHECK}mode"),
        sa.CheckConstraint(STATUS, name=f"{CHECK}status"),
        sa.CheckConstraint("rows >= 0", name=f"{CHECK}rows"),
        sa.CheckConstraint("window_to > window_from", name=f"{CHECK}window"),
        sa.PrimaryKeyConstraint("id", name="pk_batch"),
        sa.UniqueConstraint("uid", name="uq_batch_uid"),
        sa.Index("ix_batch_kind_window_from", "kind", "window_from"),
    )


def _kind_check(before: str, after: str) -> None:
    with op.batch_alter_table("batch", copy_from=_batch_table(before)) as batch:
        batch.drop_constraint(op.f(f"{CHECK}kind"), type_="check")
        batch.create_check_constraint(op.f(f"{CHECK}kind"), after)


def upgrade() -> None:
    _kind_check(BEFORE, AFTER)
    op.create_table(
        "billing_cell",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("billing_period_start", UTC, nullable=False),
        sa.Column("billing_period_end", UTC, nullable=False),
        sa.Column("billing_account_id", sa.Text(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("invoices", sa.Text(), nullable=False),
        sa.Column("charge_end", UTC, nullable=False),
        sa.Column("coverage", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name="fk_billing_cell_batch_id_batch"),
        sa.PrimaryKeyConstraint("id", name="pk_billing_cell"),
    )
    op.create_index("ix_billing_cell_batch_id", "billing_cell", ["batch_id"])
    op.add_column("run", sa.Column("invoice", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run") as batch:  # SQLite drops a column by a table copy
        batch.drop_column("invoice")
    op.drop_index("ix_billing_cell_batch_id", table_name="billing_cell")
    op.drop_table("billing_cell")
    # 'aborted' is a status no reader counts: the billing batches stay out of every figure
    op.execute("UPDATE batch SET status = 'aborted', kind = 'costs' WHERE kind = 'billing'")
    _kind_check(AFTER, BEFORE)
