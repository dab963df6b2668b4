"""Report figures of a run: what the report pack needs beyond the per-client totals, so
`report --from-db` renders a run's sheets without recomputing it.

Written by `run`, per period: the run's lines per rule version (``run_line.rule_id``),
residual, exclusions and unclassified cost per workload (``run_workload``), pool client counts
(``run_pool``), its totals, hours and rule set (``run_report``); per window only the
unattributed part of each pool (``run_unattributed``), a pool figure: never per-window usage.
Written by `close` for the run it issues (the re-runs are too slow for every `run`): each
client's total under every alternative key and in each change notice (``run_client_figure``),
the services each client used (``run_client_service``) and the pack's other figures
(``run_pack``).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def _run_id() -> sa.Column[str]:
    return sa.Column("run_id", sa.String(length=36), nullable=False)


def _fk_run(name: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["run_id"], ["run.id"], name=f"fk_{name}_run_id_run")


def upgrade() -> None:
    op.add_column("run_line", sa.Column("rule_id", sa.String(length=200), nullable=True))
    op.create_table(
        "run_report",
        _run_id(),
        sa.Column("cost_total", sa.BigInteger(), nullable=False),
        sa.Column("external_total", sa.BigInteger(), nullable=False),
        sa.Column("windows", sa.BigInteger(), nullable=False),
        sa.Column("hours", sa.Float(), nullable=False),
        sa.Column("rules", sa.Text(), nullable=False),
        sa.Column("rules_origin", sa.Text(), nullable=False),
        _fk_run("run_report"),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_report"),
    )
    op.create_table(
        "run_pack",
        _run_id(),
        sa.Column("keys", sa.Text(), nullable=False),
        sa.Column("changes", sa.Text(), nullable=False),
        sa.Column("no_client", sa.Text(), nullable=False),
        sa.Column("uncovered_hours", sa.Text(), nullable=False),
        sa.Column("other_clients", sa.Text(), nullable=False),
        sa.Column("recorded_at", UTC, nullable=False),
        _fk_run("run_pack"),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_pack"),
    )
    op.create_table(
        "run_client_figure",
        _run_id(),
        sa.Column("figure", sa.String(length=200), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        _fk_run("run_client_figure"),
        sa.PrimaryKeyConstraint("run_id", "figure", "client", name="pk_run_client_figure"),
    )
    op.create_table(
        "run_client_service",
        _run_id(),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("service", sa.Text(), nullable=False),
        _fk_run("run_client_service"),
        sa.PrimaryKeyConstraint("run_id", "client", "service", name="pk_run_client_service"),
    )
    op.create_table(
        "run_pool",
        _run_id(),
        sa.Column("rule_id", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("min_clients", sa.BigInteger(), nullable=False),
        _fk_run("run_pool"),
        sa.PrimaryKeyConstraint("run_id", "rule_id", "kind", "source", "key", name="pk_run_pool"),
    )
    op.create_table(
        "run_unattributed",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_id(),
        sa.Column("rule_id", sa.String(length=200), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.Column("window_start", UTC, nullable=False),
        sa.Column("window_end", UTC, nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        _fk_run("run_unattributed"),
        sa.PrimaryKeyConstraint("id", name="pk_run_unattributed"),
    )
    op.create_index("ix_run_unattributed_run_id", "run_unattributed", ["run_id"])
    op.create_table(
        "run_workload",
        sa.Column("id", sa.Integer(), nullable=False),
        _run_id(),
        sa.Column("frame", sa.String(length=16), nullable=False),
        sa.Column("rule_id", sa.String(length=200), nullable=False),
        sa.Column("class", sa.String(length=32), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("amount", sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            "frame IN ('residual', 'exclusions', 'unclassified')", name="ck_run_workload_frame"
        ),
        _fk_run("run_workload"),
        sa.PrimaryKeyConstraint("id", name="pk_run_workload"),
    )
    op.create_index("ix_run_workload_run_id", "run_workload", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_run_workload_run_id", table_name="run_workload")
    op.drop_table("run_workload")
    op.drop_index("ix_run_unattributed_run_id", table_name="run_unattributed")
    op.drop_table("run_unattributed")
    op.drop_table("run_pool")
    op.drop_table("run_client_service")
    op.drop_table("run_client_figure")
    op.drop_table("run_pack")
    op.drop_table("run_report")
    with op.batch_alter_table("run_line") as batch:
        batch.drop_column("rule_id")
