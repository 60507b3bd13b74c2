"""The SQL store's messages: add them, save and checkpoint turns, read a chat's history.

A mixin of `SQLStore` (`sql.py`). Every write also updates the chat's search doc
(`sql_index`) in the same transaction. Reads go through SQLAlchemy Core, not the
ORM: a long chat's thousands of rows cost their decoding only, and the history
for the next turn reuses its settled part (`history_cache`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from sqlalchemy import func, insert, select, update

from toolrelay.adapters.stores.base import NewChat, NotFoundError, StoredMessage
from toolrelay.adapters.stores.history_cache import Kept
from toolrelay.adapters.stores.models import (
    ChatRow,
    MessageRow,
    SearchDocRow,
    ToolOutputRow,
    UserRow,
)
from toolrelay.adapters.stores.records import history_of, message_content, turn_fields
from toolrelay.adapters.stores.sql_index import doc_row, index_message, keep_outputs
from toolrelay.adapters.stores.sql_rows import (
    MESSAGE_COLUMNS,
    SQLParts,
    chat_row,
    message_row,
    stored,
)
from toolrelay.adapters.stores.sql_tree import (
    current_of,
    insert_message,
    place,
    rows_by_id,
    tree_of,
)
from toolrelay.adapters.stores.tree import branch_ids, sibling_ids
from toolrelay.core.ids import new_id
from toolrelay.engine.interfaces import Message

__all__ = ["MessageRows"]

_M = MessageRow.__table__.c


def _page(ids: list[str], before: str | None, limit: int | None) -> list[str]:
    """`get_messages`'s `before` and `limit` on a branch's ids."""
    if before is not None:
        ids = ids[: ids.index(before)] if before in ids else []
    if limit is not None:
        ids = ids[max(len(ids) - limit, 0) :] if limit > 0 else []
    return ids


class MessageRows(SQLParts):
    """`Store`'s message and turn methods over `messages` (and kept tool outputs)."""

    async def add_message(self, chat_id: str, message: Mapping[str, Any]) -> str:
        now = self._now()
        mid = new_id("msg")
        async with self._write() as session:
            chat = await chat_row(session, chat_id)
            await insert_message(session, chat, mid, message, now, await place(session, chat, mid))
        return mid

    async def add_chats(self, chats: Sequence[NewChat]) -> None:
        """Whole new chats in one transaction, as bulk inserts (`Store.add_chats`): the
        request log writes a burst of ended turns this way, not four transactions each."""
        if not chats:
            return
        now = self._now()
        chat_rows: list[dict[str, Any]] = []
        message_rows: list[dict[str, Any]] = []
        doc_rows: list[dict[str, Any]] = []
        for chat in chats:  # every value checked and copied before anything is written
            chat_rows.append(
                {
                    "id": chat.id,
                    "user_id": chat.user_id,
                    "title": chat.title,
                    "tags": [str(tag) for tag in chat.tags],
                    "model": chat.model,
                    "created_at": now,
                    "updated_at": now,
                }
            )
            if chat.title:
                doc_rows.append(doc_row(chat.id, None, chat.title))
            parent: str | None = None  # a line: each message's parent is the one before
            for message in chat.messages:
                role, content = message_content(message)
                message_id = new_id("msg")
                message_rows.append(
                    message_row(chat.id, message_id, role, now, content=content, parent_id=parent)
                )
                doc_rows.append(doc_row(chat.id, message_id, content))
                parent = message_id
            fields = turn_fields(chat.turn)
            doc_rows.append(doc_row(chat.id, chat.turn_id, fields.content))
            message_rows.append(
                message_row(
                    chat.id,
                    chat.turn_id,
                    "assistant",
                    now,
                    parent_id=parent,
                    **fields.columns(),
                )
            )
        users = {chat.user_id for chat in chats}
        async with self._write() as session:
            found = set(await session.scalars(select(UserRow.id).where(UserRow.id.in_(users))))
            if users - found:
                raise NotFoundError(f"users not found: {sorted(users - found)}")
            await session.execute(insert(ChatRow), chat_rows)
            await session.execute(insert(MessageRow), message_rows)
            await session.execute(insert(SearchDocRow), doc_rows)
            for chat in chats:
                whole = turn_fields(chat.turn).whole_outputs
                await keep_outputs(session, chat.id, chat.turn_id, whole, now)

    async def save_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> None:
        """Insert or overwrite assistant message `message_id`, all in one transaction."""
        fields = turn_fields(turn)
        now = self._now()
        async with self._write() as session:
            chat = await chat_row(session, chat_id)
            row = await session.scalar(select(MessageRow).where(MessageRow.id == message_id))
            if row is None:
                parent = await place(session, chat, message_id)
                row = MessageRow(
                    id=message_id,
                    chat_id=chat_id,
                    role="assistant",
                    created_at=now,
                    parent_id=parent,
                )
                session.add(row)
            elif row.chat_id != chat_id or row.role != "assistant":
                raise NotFoundError(f"no assistant message {message_id!r} in chat {chat_id!r}")
            else:
                kept = self._histories.get(chat_id)
                if kept is not None and row.seq <= kept.seq:  # rewriting a kept message
                    self._histories.drop(chat_id)
            for column, value in fields.columns().items():
                setattr(row, column, value)
            row.updated_at = now
            chat.updated_at = now
            await session.flush()
            await index_message(session, chat_id, message_id, fields.content)
            await keep_outputs(session, chat_id, message_id, fields.whole_outputs, now)

    async def checkpoint_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> bool:
        """Overwrite the turn only while it is `in_progress`: a late checkpoint never wins."""
        fields = turn_fields(turn)
        query = (
            update(MessageRow)
            .where(
                MessageRow.id == message_id,
                MessageRow.chat_id == chat_id,
                MessageRow.role == "assistant",
                MessageRow.status == "in_progress",
            )
            .values(**fields.columns(checkpoint=True), updated_at=self._now())
        )
        async with self._write() as session:
            result = await session.execute(query)
        return bool(getattr(result, "rowcount", 0))

    async def in_progress_turns(self, *, chat_id: str | None = None) -> list[StoredMessage]:
        """Assistant turns not finished yet (running somewhere, or orphaned by a crash)."""
        query = select(*MESSAGE_COLUMNS).where(_M.role == "assistant", _M.status == "in_progress")
        if chat_id is not None:
            query = query.where(_M.chat_id == chat_id)
        async with self._engine.connect() as connection:
            rows = await connection.execute(query.order_by(_M.seq))
            return [stored(row) for row in rows]

    async def get_messages(
        self, chat_id: str, *, before: str | None = None, limit: int | None = None
    ) -> list[StoredMessage]:
        """Rows read as plain tuples (SQLAlchemy Core), never as ORM objects: a long
        chat's thousands of rows cost their decoding, not an identity map's bookkeeping.
        A page (`limit`) is read newest first through the (chat_id, seq) index. A
        branched chat's current branch is picked from all its rows (`stores.tree`)."""
        async with self._engine.connect() as connection:
            current = await current_of(connection, chat_id)
            if current is not None:
                return await self._branch(connection, chat_id, current, before, limit)
        query = select(*MESSAGE_COLUMNS).where(_M.chat_id == chat_id)
        if before is not None:
            anchor = select(_M.seq).where(_M.id == before, _M.chat_id == chat_id)
            query = query.where(_M.seq < anchor.scalar_subquery())
        if limit is None:
            query = query.order_by(_M.seq)
        else:
            query = query.order_by(_M.seq.desc()).limit(max(limit, 0))
        async with self._engine.connect() as connection:
            rows = [stored(row) for row in await connection.execute(query)]
        return rows if limit is None else rows[::-1]

    async def _branch(
        self,
        connection: Any,
        chat_id: str,
        current: str,
        before: str | None = None,
        limit: int | None = None,
    ) -> list[StoredMessage]:
        """A page of the current branch's messages, each with its siblings: the tree is
        read as ids alone (`tree_of`), then only the page's rows whole."""
        parents = await tree_of(connection, chat_id)
        siblings = sibling_ids(parents)
        ids = _page(branch_ids(parents, current), before, limit)
        rows = await rows_by_id(connection, MESSAGE_COLUMNS, ids)
        return [dataclasses.replace(stored(rows[i]), siblings=siblings.get(i, ())) for i in ids]

    async def load_messages(self, chat_id: str) -> list[Message]:
        """The history for the next turn: the kept settled part (`history_cache`), checked
        by one indexed aggregate, and the rows after it, three columns each, no record
        built. A chat read for the first time is read whole; a branched chat's current
        branch is read whole each time (`stores.tree`), never kept."""
        kept = self._histories.get(chat_id)
        async with self._engine.connect() as connection:
            current = await current_of(connection, chat_id)
            if current is not None:  # its branch's rows, four columns
                ids = branch_ids(await tree_of(connection, chat_id), current)
                columns = (_M.id, _M.role, _M.content, _M.output)
                found = await rows_by_id(connection, columns, ids)
                return history_of([tuple(found[i])[1:] for i in ids])
            if kept is not None:
                check = select(func.count(), func.max(_M.updated_at)).where(
                    _M.chat_id == chat_id, _M.seq <= kept.seq
                )
                if tuple((await connection.execute(check)).one()) != (kept.count, kept.stamp):
                    kept = None
            query = select(_M.seq, _M.role, _M.content, _M.output, _M.status, _M.updated_at)
            query = query.where(_M.chat_id == chat_id).order_by(_M.seq)
            if kept is not None:
                query = query.where(_M.seq > kept.seq)
            rows = (await connection.execute(query)).all()
        settled = next((i for i, row in enumerate(rows) if row[4] == "in_progress"), len(rows))
        counts = (dict(kept.calls), dict(kept.outputs)) if kept is not None else ({}, {})
        head = history_of([(row[1], row[2], row[3]) for row in rows[:settled]], counts)
        calls, outputs = dict(counts[0]), dict(counts[1])  # where the settled part ends
        tail = history_of([(row[1], row[2], row[3]) for row in rows[settled:]], counts)
        known: list[Message] = orjson.loads(kept.history) if kept is not None else []
        if settled:
            stamps = [row[5] for row in rows[:settled]]
            if kept is not None and kept.stamp is not None:
                stamps.append(kept.stamp)
            self._histories.put(
                chat_id,
                Kept(
                    seq=rows[settled - 1][0],
                    count=(kept.count if kept is not None else 0) + settled,
                    stamp=max(stamps),
                    history=orjson.dumps([*known, *head]),
                    calls=calls,
                    outputs=outputs,
                ),
            )
        return [*known, *head, *tail]

    async def get_tool_output(self, chat_id: str, item_id: str) -> str | None:
        query = select(ToolOutputRow.body).where(
            ToolOutputRow.id == item_id, ToolOutputRow.chat_id == chat_id
        )
        async with self._sessions() as session:
            return await session.scalar(query)
