"""An index on run_line (run_id, client): the service reads one client's lines of a run per
request; with 10,000 clients a run has hundreds of thousands of lines.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_run_line_run_id_client", "run_line", ["run_id", "client"])


def downgrade() -> None:
    op.drop_index("ix_run_line_run_id_client", table_name="run_line")
