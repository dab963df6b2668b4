"""Rendered sheets: an issued revision's sheets rendered once, in the background.

A PDF sheet takes about a second to render and an issued revision never changes, so each
revision's sheets are rendered once after close and kept: ``sheet_render`` holds the bodies
per renderer version, ``sheet_render_job`` the claim of the one background rendering of a
revision (its primary key: one process wins it, across workers and hosts).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "sheet_render",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("rendered_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_sheet_render_run_id_run"),
        sa.PrimaryKeyConstraint(
            "run_id", "revision", "client", "format", "version", name="pk_sheet_render"
        ),
    )
    op.create_table(
        "sheet_render_job",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("claimed_by", sa.Text(), nullable=False),
        sa.Column("claimed_at", UTC, nullable=False),
        sa.Column("heartbeat_at", UTC, nullable=False),
        sa.Column("finished_at", UTC, nullable=True),
        sa.Column("sheets", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], name="fk_sheet_render_job_run_id_run"),
        sa.PrimaryKeyConstraint("run_id", "revision", "version", name="pk_sheet_render_job"),
    )


def downgrade() -> None:
    op.drop_table("sheet_render_job")
    op.drop_table("sheet_render")
