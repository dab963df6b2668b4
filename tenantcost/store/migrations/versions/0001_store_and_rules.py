"""The store itself and rule file versions.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_store_meta"),
    )
    op.create_table(
        "rule_file",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("currency", sa.String(length=3), nullable=False),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_rule_file"),
        sa.UniqueConstraint("sha256", name="uq_rule_file_sha256"),
    )
    op.create_table(
        "rule_version",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rule_id", sa.String(length=200), nullable=False),
        sa.Column("effective_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("rule_file_id", sa.Integer(), nullable=False),
        sa.Column("loaded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["rule_file_id"], ["rule_file.id"], name="fk_rule_version_rule_file_id_rule_file"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_rule_version"),
        sa.UniqueConstraint("effective_from", name="uq_rule_version_effective_from"),
        sa.UniqueConstraint("rule_id", name="uq_rule_version_rule_id"),
    )
    op.create_index("ix_rule_version_rule_file_id", "rule_version", ["rule_file_id"])


def downgrade() -> None:
    op.drop_index("ix_rule_version_rule_file_id", table_name="rule_version")
    op.drop_table("rule_version")
    op.drop_table("rule_file")
    op.drop_table("store_meta")
