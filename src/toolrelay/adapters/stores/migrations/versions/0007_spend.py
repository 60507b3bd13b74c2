"""Daily spend per user and per API key: what the daily budgets read.

Revision ID: 0007_spend
Revises: 0006_turn_runs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007_spend"
down_revision: str | None = "0006_turn_runs"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "spend",
        sa.Column("scope", sa.String(8), primary_key=True),
        sa.Column("subject", sa.String(64), primary_key=True),
        sa.Column("day", sa.String(10), primary_key=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("spend")
