"""Browser sessions ended by logout (the service's pages).

A session is a signed cookie (no row while it lives, so every worker accepts it without a
lookup table); logging out records the session's id here, so a copy of the cookie is
refused afterwards. ``expires_at`` is when the cookie would have expired anyway: rows past
it may be deleted.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "web_session_end",
        sa.Column("sid", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("ended_at", UTC, nullable=False),
        sa.Column("expires_at", UTC, nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"], ["token.id"], name="fk_web_session_end_token_id_token"
        ),
        sa.PrimaryKeyConstraint("sid", name="pk_web_session_end"),
    )


def downgrade() -> None:
    op.drop_table("web_session_end")
