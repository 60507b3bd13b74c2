"""Chat persistence: the `Store` API, its record types and the helpers both backends share.

Two backends implement `Store`: `SQLStore` (SQLAlchemy async, SQLite by default or
PostgreSQL, migrated with Alembic) and `MemoryStore` (dicts, for tests and library
users). This package stays free of SQLAlchemy so that `MemoryStore` works without the
`server` extra; the backends are imported lazily by name. The API and records are in
`base`, API-key hashing in `keys`, checking and converting values in `records`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolrelay.adapters.stores.base import (
    ApiKey,
    Chat,
    NewChat,
    NotFoundError,
    Spend,
    Store,
    StoredMessage,
    TurnFields,
    TurnRun,
    User,
)
from toolrelay.adapters.stores.keys import (
    KEY_PREFIX,
    generate_key,
    hash_key,
    key_matches,
    key_tail,
    public_prefix,
)
from toolrelay.adapters.stores.records import (
    Clock,
    history_messages,
    message_content,
    plain_json,
    turn_fields,
    utc_now,
)

if TYPE_CHECKING:
    from toolrelay.adapters.stores.memory import MemoryStore
    from toolrelay.adapters.stores.sql import SQLStore, upgrade

__all__ = [
    "KEY_PREFIX",
    "ApiKey",
    "Chat",
    "Clock",
    "MemoryStore",
    "NewChat",
    "NotFoundError",
    "SQLStore",
    "Store",
    "StoredMessage",
    "TurnFields",
    "Spend",
    "TurnRun",
    "User",
    "generate_key",
    "hash_key",
    "history_messages",
    "key_matches",
    "key_tail",
    "public_prefix",
    "message_content",
    "plain_json",
    "turn_fields",
    "upgrade",
    "utc_now",
]


def __getattr__(name: str) -> Any:
    """Import backends on first use: `SQLStore` needs SQLAlchemy, `MemoryStore` does not."""
    if name == "MemoryStore":
        from toolrelay.adapters.stores.memory import MemoryStore

        return MemoryStore
    if name in ("SQLStore", "upgrade"):
        from toolrelay.adapters.stores import sql

        return getattr(sql, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
