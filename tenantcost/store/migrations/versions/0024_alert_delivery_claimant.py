"""Alert deliveries: who holds a ``sending`` claim, and since when.

A run of ``watch --notify`` that dies while sending (SIGKILL, the node lost) leaves its
deliveries ``sending``. To retry them at the next run without ever letting two live runs
send the same one, a claim names its claimant (host, PID namespace, process id and a token
of the run) and the time it was taken or last renewed: a claim may be taken over when it is
older than the bound or when its process is gone (same host and PID namespace only)
(:mod:`tenantcost.store.alert_deliveries`). Rows from before this revision have neither and
are judged by ``last_attempt_at``, as before.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("alert_delivery", sa.Column("claimed_by", sa.Text(), nullable=True))
    op.add_column("alert_delivery", sa.Column("claimed_at", UTC, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("alert_delivery") as batch:  # SQLite drops by a table copy
        batch.drop_column("claimed_at")
        batch.drop_column("claimed_by")
