"""PostgreSQL's words index takes each doc at once, not through a pending list.

A GIN index with `fastupdate` (PostgreSQL's default) keeps new entries in a
pending list that every search reads through whole until a vacuum (or a full
list, 4 MB) moves them into the index: at 50,000 chats a search read up to 400
pending pages, 3-10 ms of each. Writes now put a doc's words in the index itself
(no slower that a loaded machine could measure, docs/scaling.md), and the entries
pending now are moved in here. SQLite's FTS5 index has no such list: nothing to do there.

Revision ID: 0010_search_gin_direct
Revises: 0009_message_tree
"""

from __future__ import annotations

from alembic import op

revision: str = "0010_search_gin_direct"
down_revision: str | None = "0009_message_tree"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER INDEX ix_search_docs_tsv SET (fastupdate = off)")
        op.execute("SELECT gin_clean_pending_list('ix_search_docs_tsv'::regclass)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER INDEX ix_search_docs_tsv SET (fastupdate = on)")
