"""Tool results cut for the model, kept whole for the user: one row each, apart from turns.

Revision ID: 0004_tool_outputs
Revises: 0003_chat_search
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004_tool_outputs"
down_revision: str | None = "0003_chat_search"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "tool_outputs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column(
            "chat_id",
            sa.String(64),
            sa.ForeignKey("chats.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("message_id", sa.String(64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_tool_outputs_chat_id", "tool_outputs", ["chat_id"])


def downgrade() -> None:
    op.drop_table("tool_outputs")
