"""A client's converted lines read by its key (issue 37): the client page's trend.

The trend of one client in another currency reads its ``run_fx_line`` rows of a dozen runs;
the index on ``(run_id, currency)`` made that a scan of every client's lines of each run. The
index on ``(run_id, currency, client)`` serves both that read and the pricing page's (a
run's lines in one currency, its prefix), so it replaces the former.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_run_fx_line_run_id_currency", table_name="run_fx_line")
    op.create_index(
        "ix_run_fx_line_run_currency_client", "run_fx_line", ["run_id", "currency", "client"]
    )


def downgrade() -> None:
    op.drop_index("ix_run_fx_line_run_currency_client", table_name="run_fx_line")
    op.create_index("ix_run_fx_line_run_id_currency", "run_fx_line", ["run_id", "currency"])
