"""Chat persistence: the `Store` API, its record types and the helpers both backends share.

Two backends implement `Store`: `SQLStore` (SQLAlchemy async, SQLite by default or
PostgreSQL, migrated with Alembic) and `MemoryStore` (dicts, for tests and library
users). This module stays free of SQLAlchemy so that `MemoryStore` works without the
`server` extra; the backends are imported lazily by name.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Protocol

import orjson

from toolrelay.core.status import TurnStatus
from toolrelay.core.transcript import to_chat_messages
from toolrelay.engine.interfaces import ChatStore, Message
from toolrelay.errors import ToolrelayError

if TYPE_CHECKING:
    from toolrelay.adapters.stores.memory import MemoryStore
    from toolrelay.adapters.stores.sql import SQLStore, upgrade

__all__ = [
    "KEY_PREFIX",
    "ApiKey",
    "Chat",
    "Clock",
    "MemoryStore",
    "NotFoundError",
    "SQLStore",
    "Store",
    "StoredMessage",
    "TurnFields",
    "User",
    "generate_key",
    "hash_key",
    "history_messages",
    "key_matches",
    "message_content",
    "turn_fields",
    "upgrade",
    "utc_now",
]

KEY_PREFIX: Final = "tr-"
"""Every generated API key starts with this, so leaked keys are easy to spot."""

TURN_STATUSES: Final = frozenset({"in_progress", *TurnStatus})


class NotFoundError(ToolrelayError, LookupError):
    """A write names a user, chat or message that does not exist (or is not in that chat)."""


@dataclass(frozen=True, slots=True)
class User:
    id: str
    name: str
    is_admin: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    user_id: str
    name: str
    prefix: str
    """The key's first 8 characters: enough to recognise it in a list, useless to an attacker."""
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Chat:
    id: str
    user_id: str
    title: str | None
    tags: list[str]
    model: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: str
    chat_id: str
    role: str
    content: Any
    """A string, or a list of content parts for multimodal user messages."""
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None
    status: str | None
    error: Any
    timings: dict[str, Any] | None
    model: str | None
    follow_ups: list[str]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class TurnFields:
    """An assistant turn checked and copied into plain JSON values before any write."""

    output: list[dict[str, Any]]
    content: str
    usage: dict[str, Any] | None
    status: str
    error: Any
    timings: dict[str, Any] | None
    model: str | None
    follow_ups: list[str]


class Store(ChatStore, Protocol):
    """What the server needs from persistence; the engine only uses the `ChatStore` part."""

    async def close(self) -> None: ...

    async def create_user(self, name: str, *, is_admin: bool = False) -> User: ...

    async def user_named(self, name: str) -> User | None: ...

    async def create_api_key(self, user_id: str, *, name: str = "") -> tuple[ApiKey, str]: ...

    async def create_api_key_with_value(
        self, user_id: str, key: str, *, name: str = ""
    ) -> ApiKey: ...

    async def user_for_key(self, key: str) -> User | None: ...

    async def list_api_keys(self, user_id: str | None = None) -> list[ApiKey]: ...

    async def revoke_api_key(self, key_id: str) -> bool: ...

    async def count_users(self) -> int: ...

    async def create_chat(
        self,
        user_id: str,
        *,
        title: str | None = None,
        model: str | None = None,
        chat_id: str | None = None,
    ) -> Chat: ...

    async def get_chat(self, chat_id: str, *, user_id: str) -> Chat | None: ...

    async def list_chats(
        self, user_id: str, *, limit: int = 50, offset: int = 0
    ) -> tuple[list[Chat], int]: ...

    async def delete_chat(self, chat_id: str, *, user_id: str) -> bool: ...

    async def update_chat(
        self, chat_id: str, *, title: str | None = None, tags: list[str] | None = None
    ) -> None: ...

    async def add_message(self, chat_id: str, message: Mapping[str, Any]) -> str: ...

    async def get_messages(self, chat_id: str) -> list[StoredMessage]: ...


def utc_now() -> datetime:
    """The default clock; stores take a `clock` argument so tests can fix time."""
    return datetime.now(UTC)


Clock = Callable[[], datetime]
"""Returns timezone-aware UTC datetimes."""


def generate_key() -> str:
    """A new plaintext key: `tr-` + 40 url-safe characters (240 random bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(30)


def hash_key(key: str) -> str:
    """Keys are stored only as this sha256 hex digest; they are random, so no salt is needed."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_matches(stored_hash: str, key: str) -> bool:
    """Constant-time comparison so response timing says nothing about the stored hash."""
    return hmac.compare_digest(stored_hash.encode("ascii"), hash_key(key).encode("ascii"))


def _json_copy(value: Any) -> Any:
    """A deep, JSON-only copy; raises TypeError (orjson's error) for anything else."""
    return orjson.loads(orjson.dumps(value))


def _dict_or_none(turn: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = _json_copy(turn.get(key))
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"turn[{key!r}] must be an object or None, not {type(value).__name__}")
    return value


def turn_fields(turn: Mapping[str, Any]) -> TurnFields:
    """Validate a turn up front, so a bad value fails before anything is written."""
    status = turn.get("status", "completed")
    if status not in TURN_STATUSES:
        raise ValueError(f"unknown turn status {status!r}; expected one of {sorted(TURN_STATUSES)}")
    output = _json_copy(list(turn.get("output") or []))
    model = turn.get("model")
    return TurnFields(
        output=output,
        content=str(turn.get("content") or ""),
        usage=_dict_or_none(turn, "usage"),
        status=status,
        error=_json_copy(turn.get("error")),
        timings=_dict_or_none(turn, "timings"),
        model=None if model is None else str(model),
        follow_ups=[str(f) for f in _json_copy(list(turn.get("follow_ups") or []))],
    )


def message_content(message: Mapping[str, Any]) -> tuple[str, Any]:
    """The role and a JSON copy of the content of a user/system message being added."""
    role = message.get("role")
    if role not in ("user", "system", "assistant"):
        raise ValueError(f"add_message takes user, system or assistant messages, not {role!r}")
    content = _json_copy(message.get("content", ""))
    if not isinstance(content, str | list):
        raise TypeError("message content must be a string or a list of content parts")
    return str(role), content


def history_messages(messages: list[StoredMessage]) -> list[Message]:
    """Chat Completions history: stored user/system messages, assistant turns expanded.

    An assistant turn becomes its items replayed by `to_chat_messages` (tool calls
    and results included); a turn without items falls back to its text, and a turn
    with neither is left out (providers reject empty assistant messages).
    """
    history: list[Message] = []
    for message in messages:
        if message.role != "assistant":
            history.append({"role": message.role, "content": message.content})
            continue
        expanded = to_chat_messages(message.output) if message.output else []
        if expanded:
            history.extend(expanded)
        elif message.content:
            history.append({"role": "assistant", "content": message.content})
    return history


def __getattr__(name: str) -> Any:
    """Import backends on first use: `SQLStore` needs SQLAlchemy, `MemoryStore` does not."""
    if name == "MemoryStore":
        from toolrelay.adapters.stores.memory import MemoryStore

        return MemoryStore
    if name in ("SQLStore", "upgrade"):
        from toolrelay.adapters.stores import sql

        return getattr(sql, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
