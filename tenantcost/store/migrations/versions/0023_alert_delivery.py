"""Alert deliveries: what ``watch --notify`` sent, per alert and destination.

An hourly CronJob runs ``tenantcost watch --notify``: each alert (an anomaly, a client's
projection above its band) must reach each of its destinations once, and a delivery that
failed must be tried again at the next run. ``alert_delivery`` holds one row per alert key,
destination and channel (webhook or e-mail): ``sending`` while a run holds it, then ``sent``
or ``failed``, with the attempts so far, the last error and the times
(:mod:`tenantcost.store.alert_deliveries`).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "alert_delivery",
        sa.Column("alert_key", sa.String(length=64), nullable=False),
        sa.Column("destination", sa.Text(), nullable=False),
        sa.Column("channel", sa.String(length=8), nullable=False),
        sa.Column("month", sa.String(length=7), nullable=False),
        sa.Column("client", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("first_attempt_at", UTC, nullable=False),
        sa.Column("last_attempt_at", UTC, nullable=False),
        sa.Column("sent_at", UTC, nullable=True),
        sa.CheckConstraint("channel IN ('webhook', 'email')", name="ck_alert_delivery_channel"),
        sa.CheckConstraint("kind IN ('anomaly', 'status')", name="ck_alert_delivery_kind"),
        sa.CheckConstraint("status IN ('sending', 'sent', 'failed')",
                           name="ck_alert_delivery_status"),
        sa.PrimaryKeyConstraint("alert_key", "destination", "channel", name="pk_alert_delivery"),
    )  # fmt: skip
    op.create_index("ix_alert_delivery_month", "alert_delivery", ["month"])


def downgrade() -> None:
    op.drop_index("ix_alert_delivery_month", table_name="alert_delivery")
    op.drop_table("alert_delivery")
