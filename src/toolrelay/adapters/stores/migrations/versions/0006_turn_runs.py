"""Turns that have not ended, with their last checkpoint: a turn outlives its process.

Revision ID: 0006_turn_runs
Revises: 0005_sessions_key_tail
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006_turn_runs"
down_revision: str | None = "0005_sessions_key_tail"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "turn_runs",
        sa.Column("message_id", sa.String(64), primary_key=True),
        sa.Column(
            "chat_id",
            sa.String(64),
            sa.ForeignKey("chats.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("resumes", sa.Integer(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_turn_runs_chat_id", "turn_runs", ["chat_id"])


def downgrade() -> None:
    op.drop_table("turn_runs")
