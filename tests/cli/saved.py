"""Reading what the CLI saved, straight from the SQLite file of a test's data directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from toolrelay.adapters.stores import Chat, StoredMessage
from toolrelay.adapters.stores.sql import SQLStore


def saved(data_dir: Path) -> list[tuple[Chat, list[StoredMessage]]]:
    """Every chat of the CLI's owner, newest first, with its messages."""

    async def read() -> list[tuple[Chat, list[StoredMessage]]]:
        store = await SQLStore.open(f"sqlite+aiosqlite:///{data_dir / 'toolrelay.db'}")
        try:
            owner = await store.user_named("admin")
            assert owner is not None and owner.is_admin
            chats, _ = await store.list_chats(owner.id)
            return [(c, await store.get_messages(c.id)) for c in chats]
        finally:
            await store.close()

    return asyncio.run(read())
