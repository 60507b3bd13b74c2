"""Users' own valve values for Open WebUI tool files (`PUT /api/tools/{id}/user-valves`).

Revision ID: 0008_user_valves
Revises: 0007_spend
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008_user_valves"
down_revision: str | None = "0007_spend"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "user_valves",
        sa.Column(
            "user_id",
            sa.String(64),
            sa.ForeignKey("users.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("tool_id", sa.String(255), primary_key=True),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("user_valves")
