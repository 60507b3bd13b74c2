"""API keys keep no character of their secret: `prefix` holds only the `tr-` marker.

Revision ID: 0002_key_prefix_scrub
Revises: 0001_initial
"""

from __future__ import annotations

from alembic import op

revision: str = "0002_key_prefix_scrub"
down_revision: str | None = "0001_initial"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.execute("UPDATE api_keys SET prefix = CASE WHEN prefix LIKE 'tr-%' THEN 'tr-' ELSE '' END")


def downgrade() -> None:
    """The scrubbed characters are gone for good; nothing to restore."""
