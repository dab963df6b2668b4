"""Each run's conversions (issue 37): the ledger shown in another currency, as computed then.

``run_fx`` is one conversion of a run: the currency, the ``fx`` document (policy, source and
every rate used, exact decimal text), the converted cascade and reference total beside the
ledger's, whether a rate was provisional, and the newest rates load the run could read.
``run_fx_client`` is each client's converted total beside its ledger total. A close issues a
run, so it issues the run's conversions with it: rates loaded later never change them.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_fx",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("policy", sa.String(length=32), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("provisional", sa.Boolean(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("cascade", sa.Text(), nullable=False),
        sa.Column("reference_total", sa.BigInteger(), nullable=False),
        sa.Column("ledger_reference_total", sa.BigInteger(), nullable=False),
        sa.Column("fx_load_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_run_fx_run_id_run"),
        sa.PrimaryKeyConstraint("run_id", "currency", name="pk_run_fx"),
    )
    op.create_table(
        "run_fx_client",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("ledger_amount", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_run_fx_client_run_id_run"),
        sa.PrimaryKeyConstraint("run_id", "currency", "client", name="pk_run_fx_client"),
    )


def downgrade() -> None:
    op.drop_table("run_fx_client")
    op.drop_table("run_fx")
