"""`MemoryStore`: the `Store` API in process memory, for engine tests and library users.

Behaves like `SQLStore` (same errors, ordering, isolation and validation) but
keeps everything in dicts and forgets it on exit. Records are frozen and JSON
values are copied in and out, so callers can never mutate stored state.
Users and keys (`memory_users`) and turn runs (`memory_runs`) are mixins, as
`SQLStore`'s parts are; the dicts they all share are made here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from toolrelay.adapters.stores import (
    ApiKey,
    Chat,
    Clock,
    NewChat,
    NotFoundError,
    Spend,
    StoredMessage,
    TurnRun,
    User,
    history_messages,
    message_content,
    turn_fields,
    utc_now,
)
from toolrelay.adapters.stores.listing import ChatCursor, matches, search_terms, search_text
from toolrelay.adapters.stores.memory_runs import MemoryRuns
from toolrelay.adapters.stores.memory_users import MemoryUsers
from toolrelay.adapters.stores.tree import branch_ids, newest_leaf, sibling_ids
from toolrelay.core.ids import new_id
from toolrelay.engine.interfaces import Message

__all__ = ["MemoryStore"]


class MemoryStore(MemoryUsers, MemoryRuns):
    """Dicts keyed by id; insertion order of `_messages` is creation order."""

    def __init__(self, *, clock: Clock = utc_now) -> None:
        self._now = clock
        self._users: dict[str, User] = {}
        self._keys: dict[str, ApiKey] = {}
        self._revoked_sessions: dict[str, datetime] = {}
        self._key_hashes: dict[str, str] = {}  # key id -> sha256 hex
        self._chats: dict[str, Chat] = {}
        self._messages: dict[str, StoredMessage] = {}
        self._outputs: dict[str, tuple[str, str]] = {}  # item id -> (chat id, whole text)
        self._runs: dict[str, TurnRun] = {}  # message id -> the run of a turn not ended
        self._spend: dict[tuple[str, str, str], Spend] = {}  # (scope, subject, day)
        self._user_valves: dict[tuple[str, str], dict[str, Any]] = {}
        self._current: dict[str, str] = {}  # chat id -> its current leaf, once it branched

    @classmethod
    async def open(
        cls, url: str = "", *, migrate: bool = True, clock: Clock = utc_now
    ) -> MemoryStore:
        """Same shape as `SQLStore.open`; the url and migrate flag are ignored."""
        return cls(clock=clock)

    async def close(self) -> None:
        return None

    async def ping(self) -> None:
        return None

    # chats

    async def create_chat(
        self,
        user_id: str,
        *,
        title: str | None = None,
        model: str | None = None,
        chat_id: str | None = None,
    ) -> Chat:
        self._require_user(user_id)
        now = self._now()
        chat = Chat(
            id=chat_id or new_id("chat"),
            user_id=user_id,
            title=title,
            tags=[],
            model=model,
            created_at=now,
            updated_at=now,
        )
        if chat.id in self._chats:
            raise ValueError(f"chat {chat.id!r} already exists")
        self._chats[chat.id] = chat
        return _copy_chat(chat)

    async def get_chat(self, chat_id: str, *, user_id: str) -> Chat | None:
        chat = self._chats.get(chat_id)
        return None if chat is None or chat.user_id != user_id else _copy_chat(chat)

    async def list_chats(
        self,
        user_id: str,
        *,
        limit: int = 50,
        offset: int = 0,
        query: str | None = None,
        id_prefix: str | None = None,
        exclude_prefix: bool = False,
        after: ChatCursor | None = None,
        count: bool = True,
    ) -> tuple[list[Chat], int]:
        terms = search_terms(query) if query else None
        owned = [
            c
            for c in self._chats.values()
            if c.user_id == user_id
            and (id_prefix is None or c.id.startswith(id_prefix) != exclude_prefix)
            and (terms is None or (bool(terms) and self._mentions(c, terms)))
        ]
        owned.sort(key=lambda c: (c.updated_at, c.created_at, c.id), reverse=True)
        listed = owned if after is None else [c for c in owned if _key(c) < after.key()]
        start = max(offset, 0)
        page = listed[start : start + max(limit, 0)]
        return [_copy_chat(c) for c in page], len(owned) if count else -1

    def _mentions(self, chat: Chat, terms: list[str]) -> bool:
        texts = [search_text(chat.title or "")]
        texts += [search_text(m.content) for m in self._messages.values() if m.chat_id == chat.id]
        return matches(terms, texts)

    async def prune_chats(
        self, *, id_prefix: str, older_than: datetime | None = None, keep: int | None = None
    ) -> int:
        matching = sorted(
            (c for c in self._chats.values() if c.id.startswith(id_prefix)),
            key=lambda c: (c.created_at, c.id),
            reverse=True,
        )
        doomed = [c for c in matching if older_than is not None and c.created_at < older_than]
        if keep is not None:
            doomed += [c for c in matching[max(keep, 0) :] if c not in doomed]
        for chat in doomed:
            await self.delete_chat(chat.id, user_id=chat.user_id)
        return len(doomed)

    async def delete_chat(self, chat_id: str, *, user_id: str) -> bool:
        chat = self._chats.get(chat_id)
        if chat is None or chat.user_id != user_id:
            return False
        del self._chats[chat_id]
        self._current.pop(chat_id, None)
        for message_id in [m.id for m in self._messages.values() if m.chat_id == chat_id]:
            del self._messages[message_id]
        for item_id in [i for i, (c, _) in self._outputs.items() if c == chat_id]:
            del self._outputs[item_id]
        return True

    async def update_chat(
        self, chat_id: str, *, title: str | None = None, tags: list[str] | None = None
    ) -> None:
        chat = self._chat(chat_id)
        self._chats[chat_id] = replace(
            chat,
            title=chat.title if title is None else title,
            tags=list(chat.tags) if tags is None else [str(t) for t in tags],
            updated_at=self._now(),
        )

    async def add_spend(self, subjects: list[tuple[str, str]], day: str, spend: Spend) -> None:
        for scope, subject in subjects:
            old = self._spend.get((scope, subject, day), Spend())
            self._spend[(scope, subject, day)] = Spend(
                old.input_tokens + spend.input_tokens,
                old.output_tokens + spend.output_tokens,
                old.cost + spend.cost,
                old.turns + spend.turns,
            )

    async def spend_of(self, scope: str, subject: str, day: str) -> Spend:
        return self._spend.get((scope, subject, day), Spend())

    async def title_if_untitled(self, chat_id: str, title: str) -> bool:
        chat = self._chats.get(chat_id)
        if chat is None or chat.title is not None:
            return False
        self._chats[chat_id] = replace(chat, title=title, updated_at=self._now())
        return True

    # messages

    async def add_message(self, chat_id: str, message: Mapping[str, Any]) -> str:
        return await self._add(chat_id, message, new_id("msg"), self._leaf(chat_id))

    async def add_branch(
        self,
        chat_id: str,
        message: Mapping[str, Any],
        *,
        parent_id: str | None,
        message_id: str | None = None,
    ) -> str:
        self._chat(chat_id)
        parent = self._messages.get(parent_id) if parent_id is not None else None
        if parent_id is not None and (parent is None or parent.chat_id != chat_id):
            raise NotFoundError(f"no message {parent_id!r} in chat {chat_id!r}")
        mid = await self._add(chat_id, message, message_id or new_id("msg"), parent_id)
        self._current[chat_id] = mid
        return mid

    async def switch_branch(self, chat_id: str, message_id: str) -> str | None:
        parents = self._parents(chat_id)
        if message_id not in parents:
            return None
        self._current[chat_id] = leaf = newest_leaf(parents, message_id)
        return leaf

    def _parents(self, chat_id: str) -> dict[str, str | None]:
        return {m.id: m.parent_id for m in self._messages.values() if m.chat_id == chat_id}

    def _leaf(self, chat_id: str) -> str | None:
        """Where a new message goes: the current branch's end (a line's last message)."""
        if chat_id in self._current:
            return self._current[chat_id]
        last = [m.id for m in self._messages.values() if m.chat_id == chat_id]
        return last[-1] if last else None

    def _moved(self, chat_id: str, message_id: str) -> None:
        """A message added at the current branch's end is its new end."""
        if chat_id in self._current:
            self._current[chat_id] = message_id

    async def _add(
        self, chat_id: str, message: Mapping[str, Any], message_id: str, parent_id: str | None
    ) -> str:
        role, content = message_content(message)
        chat = self._chat(chat_id)
        now = self._now()
        if message_id in self._messages:
            raise ValueError(f"message {message_id!r} already exists")
        self._moved(chat_id, message_id)
        stored = StoredMessage(
            id=message_id,
            chat_id=chat_id,
            role=role,
            content=content,
            output=[],
            usage=None,
            status=None,
            error=None,
            timings=None,
            model=None,
            follow_ups=[],
            created_at=now,
            updated_at=now,
            parent_id=parent_id,
        )
        self._messages[stored.id] = stored
        self._chats[chat_id] = replace(chat, updated_at=now)
        return stored.id

    async def add_chats(self, chats: Sequence[NewChat]) -> None:
        """All or none (`Store.add_chats`): everything is checked before anything is kept."""
        for chat in chats:
            self._require_user(chat.user_id)
            if chat.id in self._chats or chat.turn_id in self._messages:
                raise ValueError(f"chat {chat.id!r} or message {chat.turn_id!r} already exists")
            for message in chat.messages:
                message_content(message)
            turn_fields(chat.turn)
        for chat in chats:
            await self.create_chat(
                chat.user_id, title=chat.title, model=chat.model, chat_id=chat.id
            )
            await self.update_chat(chat.id, tags=list(chat.tags))
            for message in chat.messages:
                await self.add_message(chat.id, message)
            await self.save_turn(chat.id, chat.turn_id, chat.turn)

    async def save_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> None:
        fields = turn_fields(turn)  # validates and copies before anything changes
        chat = self._chat(chat_id)
        now = self._now()
        previous = self._messages.get(message_id)
        if previous is not None and (previous.chat_id != chat_id or previous.role != "assistant"):
            raise NotFoundError(f"no assistant message {message_id!r} in chat {chat_id!r}")
        parent = self._leaf(chat_id) if previous is None else previous.parent_id
        if previous is None:
            self._moved(chat_id, message_id)
        self._messages[message_id] = StoredMessage(
            id=message_id,
            chat_id=chat_id,
            role="assistant",
            **fields.columns(),
            created_at=now if previous is None else previous.created_at,
            updated_at=now,
            parent_id=parent,
        )
        self._chats[chat_id] = replace(chat, updated_at=now)
        for item_id, text in fields.whole_outputs.items():
            self._outputs.setdefault(item_id, (chat_id, text))

    async def checkpoint_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> bool:
        fields = turn_fields(turn)
        previous = self._messages.get(message_id)
        if (
            previous is None
            or previous.chat_id != chat_id
            or previous.role != "assistant"
            or previous.status != "in_progress"
        ):
            return False
        self._messages[message_id] = replace(
            previous, **fields.columns(checkpoint=True), updated_at=self._now()
        )
        return True

    async def in_progress_turns(self, *, chat_id: str | None = None) -> list[StoredMessage]:
        return [
            copy.deepcopy(m)
            for m in self._messages.values()
            if m.role == "assistant"
            and m.status == "in_progress"
            and (chat_id is None or m.chat_id == chat_id)
        ]

    async def get_messages(
        self, chat_id: str, *, before: str | None = None, limit: int | None = None
    ) -> list[StoredMessage]:
        messages = [m for m in self._messages.values() if m.chat_id == chat_id]
        if chat_id in self._current:  # branched: the current branch, siblings named
            parents = {m.id: m.parent_id for m in messages}
            siblings = sibling_ids(parents)
            ids = branch_ids(parents, self._current[chat_id])
            messages = [replace(self._messages[i], siblings=siblings.get(i, ())) for i in ids]
        if before is not None:
            ids = [m.id for m in messages]
            messages = messages[: ids.index(before)] if before in ids else []
        if limit is not None:
            messages = messages[max(len(messages) - limit, 0) :] if limit > 0 else []
        return [copy.deepcopy(m) for m in messages]

    async def load_messages(self, chat_id: str) -> list[Message]:
        return history_messages(await self.get_messages(chat_id))

    async def get_tool_output(self, chat_id: str, item_id: str) -> str | None:
        found = self._outputs.get(item_id)
        return found[1] if found is not None and found[0] == chat_id else None

    # helpers

    def _chat(self, chat_id: str) -> Chat:
        chat = self._chats.get(chat_id)
        if chat is None:
            raise NotFoundError(f"chat {chat_id!r} not found")
        return chat


def _key(chat: Chat) -> tuple[datetime, datetime, str]:
    return (chat.updated_at, chat.created_at, chat.id)


def _copy_chat(chat: Chat) -> Chat:
    """Chats hold a mutable tag list; hand out a copy so callers cannot edit the store."""
    return replace(chat, tags=list(chat.tags))
