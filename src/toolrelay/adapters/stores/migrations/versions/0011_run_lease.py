"""A library process's lease on the durable run it goes on with (`Relay.resume`).

`turn_runs.lease_until`: until when its owner holds the run; another process
neither resumes it nor starts a durable turn in its chat before then. A server's
runs keep theirs on the event bus (None here), as do runs recorded before.

Revision ID: 0011_run_lease
Revises: 0010_search_gin_direct
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011_run_lease"
down_revision: str | None = "0010_search_gin_direct"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("turn_runs", sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("turn_runs") as batch:
        batch.drop_column("lease_until")
