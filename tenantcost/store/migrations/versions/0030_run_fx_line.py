"""Each run's lines converted (issue 37): what pricing in another currency needs.

``run_fx_line`` is a run's line (client, rule version, source, kind, key) converted into
``currency``, beside its ledger amount, as the run's conversion split it (the lines of a
client add up to its ``run_fx_client`` amount). The pricing page prices a stored month in
the presentation currency from these, the client totals and the converted cascade.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_fx_line",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("rule_id", sa.String(length=200), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("ledger_amount", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_run_fx_line_run_id_run"),
        sa.PrimaryKeyConstraint("id", name="pk_run_fx_line"),
    )
    op.create_index("ix_run_fx_line_run_id_currency", "run_fx_line", ["run_id", "currency"])


def downgrade() -> None:
    op.drop_index("ix_run_fx_line_run_id_currency", table_name="run_fx_line")
    op.drop_table("run_fx_line")
