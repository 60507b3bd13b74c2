"""Chat search through the database's own index, and the chat list's order as one index.

`search_docs` holds the searchable words of each message and title
(`listing.search_text`); SQLite indexes them with FTS5 (an external-content table
kept in step by triggers), PostgreSQL with a generated `tsvector` column and a GIN
index. Existing messages and titles are indexed here, in batches. The chats index
gains `created_at` and `id`, the rest of the list's sort key.

Revision ID: 0003_chat_search
Revises: 0002_key_prefix_scrub
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from toolrelay.adapters.stores.listing import search_text

revision: str = "0003_chat_search"
down_revision: str | None = "0002_key_prefix_scrub"
branch_labels: str | None = None
depends_on: str | None = None

BATCH = 2000
_CONTENT = sa.column("content", sa.JSON)
"""Read as JSON, so each dialect's driver hands back the value (text on SQLite)."""

_SQLITE_INDEX = (
    "CREATE VIRTUAL TABLE search_fts USING fts5("
    "body, content='search_docs', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2', prefix='2 3')",
    "CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_fts(rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER search_docs_ad AFTER DELETE ON search_docs BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, body) VALUES ('delete', old.id, old.body); END",
    "CREATE TRIGGER search_docs_au AFTER UPDATE ON search_docs BEGIN "
    "INSERT INTO search_fts(search_fts, rowid, body) VALUES ('delete', old.id, old.body); "
    "INSERT INTO search_fts(rowid, body) VALUES (new.id, new.body); END",
)
_POSTGRES_INDEX = (
    "ALTER TABLE search_docs ADD COLUMN tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED",
    "CREATE INDEX ix_search_docs_tsv ON search_docs USING gin (tsv)",
)


def upgrade() -> None:
    op.create_table(
        "search_docs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "chat_id",
            sa.String(64),
            sa.ForeignKey("chats.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column(
            "message_id",
            sa.String(64),
            sa.ForeignKey("messages.id", ondelete="CASCADE"),
            nullable=True,
            unique=True,
        ),
        sa.Column("body", sa.Text(), nullable=False),
    )
    op.create_index("ix_search_docs_chat_id", "search_docs", ["chat_id"])
    sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in _SQLITE_INDEX if sqlite else _POSTGRES_INDEX:
        op.execute(statement)
    _index_existing()
    op.create_index("ix_chats_user_recent", "chats", ["user_id", "updated_at", "created_at", "id"])
    op.drop_index("ix_chats_user_updated", table_name="chats")


def _index_existing() -> None:
    """Every message and title written before this revision, a batch at a time."""
    bind = op.get_bind()
    docs = sa.table(
        "search_docs",
        sa.column("chat_id", sa.String),
        sa.column("message_id", sa.String),
        sa.column("body", sa.Text),
    )
    titles = bind.execute(sa.text("SELECT id, title FROM chats WHERE title IS NOT NULL"))
    rows = [{"chat_id": i, "message_id": None, "body": search_text(t)} for i, t in titles]
    if rows:
        bind.execute(docs.insert(), rows)
    last = -1
    while True:
        batch = bind.execute(
            sa.text(
                "SELECT seq, id, chat_id, content FROM messages WHERE seq > :last "
                "ORDER BY seq LIMIT :size"
            ).columns(sa.column("seq"), sa.column("id"), sa.column("chat_id"), _CONTENT),
            {"last": last, "size": BATCH},
        ).all()
        if not batch:
            return
        bind.execute(
            docs.insert(),
            [
                {"chat_id": chat, "message_id": mid, "body": search_text(content)}
                for _, mid, chat, content in batch
            ],
        )
        last = batch[-1][0]


def downgrade() -> None:
    op.create_index("ix_chats_user_updated", "chats", ["user_id", "updated_at"])
    op.drop_index("ix_chats_user_recent", table_name="chats")
    if op.get_bind().dialect.name == "sqlite":
        for trigger in ("search_docs_ai", "search_docs_ad", "search_docs_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS search_fts")
    op.drop_table("search_docs")
