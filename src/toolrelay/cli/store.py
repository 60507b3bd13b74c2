"""The database the CLI shares with the server: finding it, opening it, its local owner.

Owns three rules every command that touches the data directory follows:
a command that only reads (`chats`, `keys list`, `chat -c`) refuses to open a
SQLite file that does not exist, instead of creating an empty database and
reporting "nothing" from the wrong place; `where(url)` names the database a
command opened (the file, or the URL without its password); and the CLI's
conversations belong to the user named `admin` (an administrator, created
without a key when missing), so they show up for the admin key on the server.

SQLAlchemy is imported only when a store is opened: `toolrelay chat` without
the server extra still works, it just does not save.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from toolrelay.cli.extras import SERVER, missing_extra, require
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.adapters.stores import User
    from toolrelay.adapters.stores.sql import SQLStore

__all__ = [
    "OWNER",
    "can_save",
    "database_url",
    "local_owner",
    "open_store",
    "sqlite_file",
    "where",
    "with_store",
]

T = TypeVar("T")

OWNER = "admin"
"""The CLI's conversations belong to the (oldest) user of this name."""


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory one)."""
    for scheme in ("sqlite+aiosqlite:///", "sqlite:///"):
        if url.startswith(scheme):
            name = url.removeprefix(scheme).split("?", 1)[0]
            return None if name in ("", ":memory:") else Path(name).expanduser()
    return None


def where(url: str) -> str:
    """What to call the database in a message: its file, or its URL without the password."""
    path = sqlite_file(url)
    if path is not None:
        return str(path)
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def can_save() -> bool:
    """Whether the server extra (SQLAlchemy and the SQLite driver) is installed."""
    return not missing_extra(SERVER)


async def open_store(url: str, *, create: bool, what: str = "toolrelay") -> SQLStore:
    """The store at `url`, migrated; `create=False` refuses a SQLite file that is missing."""
    require(what, "server", SERVER)
    path = sqlite_file(url)
    if not create and path is not None and not path.is_file():
        raise ConfigError(
            f"no database at {path}: nothing has been saved there yet "
            "(TOOLRELAY_DATA_DIR, DATABASE_URL or --database-url choose another)"
        )
    from toolrelay.adapters.stores.sql import SQLStore

    return await SQLStore.open(url)


async def local_owner(store: SQLStore, *, create: bool = True) -> User | None:
    """The user the CLI's conversations belong to; made (without a key) when `create`."""
    user = await store.user_named(OWNER)
    if user is None and create:
        user = await store.create_user(OWNER, is_admin=True)
    return user


def database_url(url: str | None, config: Path | None = None) -> str:
    """The flag wins; otherwise the settings' URL (SQLite under the data dir by default)."""
    if url:
        return url
    from toolrelay.config.settings import load_settings

    return load_settings(config).database_url


def with_store(
    url: str | None,
    config: Path | None,
    work: Callable[[SQLStore], Awaitable[T]],
    *,
    create: bool,
    what: str,
    say: Callable[[str], None] | None = None,
) -> T:
    """Open the database (`open_store`), tell `say` which one, run `work`, close it.

    Errors are `ConfigError`s for the command to print.
    """
    target = database_url(url, config)

    async def run() -> T:
        store = await open_store(target, create=create, what=what)
        if say is not None:
            say(f"database: {where(target)}")
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(run())
