"""The rest of each converted run (issue 37): what its statement in another currency needs.

A statement rendered from the store in another currency (``report --from-db --currency``)
shows the run as its conversion split it, like ``report --currency`` from the files. The
lines and client totals are kept already (``run_fx_line``, ``run_fx_client``); these two
tables keep the rest of the converted cascade at the grain the ledger keeps it:

* ``run_fx_workload``: a residual, excluded or unclassified workload's converted cost over
  the period (as ``run_workload``), beside its ledger amount;
* ``run_fx_unattributed``: the unattributed part of a pool in one window (as
  ``run_unattributed``), beside its ledger amount;
* ``run_fx_day``: under the daily policy, each client's ledger amount per UTC day (one row
  per client, the days as a JSON object: 10,000 rows a month rather than 310,000), which a
  converted sheet lists beside each day's rate so its reader can redo the conversion.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "run_fx_workload",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("frame", sa.String(length=16), nullable=False),
        sa.Column("rule_id", sa.String(length=200), nullable=False),
        sa.Column("class", sa.String(length=32), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("ledger_amount", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_run_fx_workload_run_id_run"),
        sa.PrimaryKeyConstraint("id", name="pk_run_fx_workload"),
    )
    op.create_index("ix_run_fx_workload_run_currency", "run_fx_workload", ["run_id", "currency"])
    op.create_table(
        "run_fx_unattributed",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("rule_id", sa.String(length=200), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.Column("window_start", UTC, nullable=False),
        sa.Column("window_end", UTC, nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("ledger_amount", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_run_fx_unattributed_run_id_run"),
        sa.PrimaryKeyConstraint("id", name="pk_run_fx_unattributed"),
    )
    op.create_index(
        "ix_run_fx_unattributed_run_currency", "run_fx_unattributed", ["run_id", "currency"]
    )

    op.create_table(
        "run_fx_day",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("days", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_run_fx_day_run_id_run"),
        sa.PrimaryKeyConstraint("run_id", "client", name="pk_run_fx_day"),
    )


def downgrade() -> None:
    op.drop_table("run_fx_day")
    op.drop_index("ix_run_fx_unattributed_run_currency", table_name="run_fx_unattributed")
    op.drop_table("run_fx_unattributed")
    op.drop_index("ix_run_fx_workload_run_currency", table_name="run_fx_workload")
    op.drop_table("run_fx_workload")
