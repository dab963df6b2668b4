"""Runs: what each `tenantcost run` read and computed, per period (never per window).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def _run_id() -> sa.Column[str]:
    return sa.Column("run_id", sa.String(length=36), nullable=False)


def _fk_run(name: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=f"fk_{name}_run_id_run")


def upgrade() -> None:
    op.create_table(
        "run",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("period_start", UTC, nullable=False),
        sa.Column("period_end", UTC, nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("key_override", sa.Text(), nullable=True),
        sa.Column("rule_ids", sa.Text(), nullable=False),
        sa.Column("rule_file_sha256", sa.String(length=64), nullable=False),
        sa.Column("code_version", sa.String(length=64), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("reference_total", sa.BigInteger(), nullable=False),
        sa.Column("clients_total", sa.BigInteger(), nullable=False),
        sa.Column("unattributed", sa.BigInteger(), nullable=False),
        sa.Column("gap", sa.BigInteger(), nullable=False),
        sa.Column("started_at", UTC, nullable=False),
        sa.Column("finished_at", UTC, nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.CheckConstraint("status IN ('succeeded')", name="ck_run_status"),
        sa.PrimaryKeyConstraint("id", name="pk_run"),
    )
    op.create_index("ix_run_month_started_at", "run", ["month", "started_at"])
    op.create_table(
        "run_client",
        _run_id(),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        _fk_run("run_client"),
        sa.PrimaryKeyConstraint("run_id", "client", name="pk_run_client"),
    )
    op.create_table(
        "run_figure",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_id(),
        sa.Column("section", sa.String(length=16), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("before_distribution", sa.BigInteger(), nullable=True),
        sa.Column("distributed", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "section IN ('unattributed', 'residual', 'exclusion', 'cascade')",
            name="ck_run_figure_section",
        ),
        _fk_run("run_figure"),
        sa.PrimaryKeyConstraint("id", name="pk_run_figure"),
    )
    op.create_index("ix_run_figure_run_id", "run_figure", ["run_id"])
    op.create_table(
        "run_input",
        _run_id(),
        sa.Column("batch_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["batch_id"], ["batch.id"], name="fk_run_input_batch_id_batch"),
        _fk_run("run_input"),
        sa.PrimaryKeyConstraint("run_id", "batch_id", name="pk_run_input"),
    )
    op.create_table(
        "run_line",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_id(),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("measure", sa.Float(), nullable=True),
        sa.Column("total_measure", sa.Float(), nullable=True),
        sa.Column("share", sa.Float(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.Column("windows", sa.BigInteger(), nullable=False),
        _fk_run("run_line"),
        sa.PrimaryKeyConstraint("id", name="pk_run_line"),
    )
    op.create_index("ix_run_line_run_id", "run_line", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_run_line_run_id", table_name="run_line")
    op.drop_table("run_line")
    op.drop_table("run_input")
    op.drop_index("ix_run_figure_run_id", table_name="run_figure")
    op.drop_table("run_figure")
    op.drop_table("run_client")
    op.drop_index("ix_run_month_started_at", table_name="run")
    op.drop_table("run")
