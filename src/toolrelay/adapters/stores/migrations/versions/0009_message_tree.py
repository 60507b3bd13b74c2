"""Messages form a tree (issue 29 item 8): each names its parent, a chat its current leaf.

`messages.parent_id` is the message before it in its branch (None for a chat's
first); existing chats are lines, so each message's parent is the one before it.
`chats.current_id` is the end of the chat's current branch, set once the chat
branches (a regenerated answer, an edited question); None: the chat is a line.

Revision ID: 0009_message_tree
Revises: 0008_user_valves
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009_message_tree"
down_revision: str | None = "0008_user_valves"
branch_labels: str | None = None
depends_on: str | None = None

_PARENTS = """
UPDATE messages SET parent_id = (
    SELECT p.id FROM messages AS p
    WHERE p.chat_id = messages.chat_id AND p.seq < messages.seq
    ORDER BY p.seq DESC LIMIT 1
)
"""


def upgrade() -> None:
    op.add_column("messages", sa.Column("parent_id", sa.String(64), nullable=True))
    op.add_column("chats", sa.Column("current_id", sa.String(64), nullable=True))
    op.execute(_PARENTS)  # through the (chat_id, seq) index, one lookup per message


def downgrade() -> None:
    with op.batch_alter_table("chats") as batch:
        batch.drop_column("current_id")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("parent_id")
