"""Signed-out browser sessions are refused server-side; a key's last characters tell keys apart.

`revoked_sessions` holds the id of every session signed out before it expired
(rows go once they would have expired anyway). `api_keys.tail` keeps a key's
last 4 characters (none for keys shorter than 20), so `keys list` can show
`tr-…a1B2`; keys made before this have none.

Revision ID: 0005_sessions_key_tail
Revises: 0004_tool_outputs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005_sessions_key_tail"
down_revision: str | None = "0004_tool_outputs"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "revoked_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_revoked_sessions_expires_at", "revoked_sessions", ["expires_at"])
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("tail", sa.String(8), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("tail")
    op.drop_table("revoked_sessions")
