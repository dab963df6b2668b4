"""An index on idempotency_key (key): usage idempotency keys are checked store-wide, across
tokens, so a batch a meter spooled before its token was rotated is replayed when
the new token delivers it. The primary key (token_name, key) stays: keys stored per token
before this revision may repeat across tokens, and a unique index would refuse such a store.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_idempotency_key_key", "idempotency_key", ["key"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_key_key", table_name="idempotency_key")
