"""`toolrelay db upgrade` and `toolrelay keys create|list|revoke`.

Owns the operator's commands: they find the database (`--database-url`, else
the settings), call the store, and print. The store (`adapters.stores.sql`)
and the settings are imported lazily so `toolrelay chat` stays quick; without
the server extra the commands say what to install.
A created API key is printed once, on stdout alone (so `$(toolrelay keys
create)` captures it); everything else about it goes to stderr.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from toolrelay.cli.extras import SERVER, require
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.adapters.stores.sql import SQLStore

__all__ = ["db_app", "fail", "keys_app"]

T = TypeVar("T")

db_app = typer.Typer(help="The database.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys.", no_args_is_help=True)

DatabaseURL = Annotated[
    str | None,
    typer.Option(
        "--database-url", help="Default: the settings' (TOOLRELAY_DATA_DIR, DATABASE_URL)."
    ),
]
ConfigPath = Annotated[Path | None, typer.Option("--config", help="A toolrelay.toml.")]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print `error: message` on stderr; the caller raises the returned `Exit`."""
    Console(stderr=True, soft_wrap=True).print(Text.assemble(("error:", "red"), f" {message}"))
    return typer.Exit(code)


def database_url(url: str | None, config: Path | None = None) -> str:
    """The flag wins; otherwise the settings' URL (SQLite under the data dir by default)."""
    if url:
        return url
    from toolrelay.config.settings import load_settings

    return load_settings(config).database_url


def _with_store(
    url: str | None, config: Path | None, work: Callable[[SQLStore], Awaitable[T]]
) -> T:
    """Open the store (migrating it), run `work`, close it; config errors exit 2."""
    try:
        require("toolrelay keys", "server", SERVER)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    from toolrelay.adapters.stores.sql import SQLStore

    async def run() -> T:
        store = await SQLStore.open(database_url(url, config))
        try:
            return await work(store)
        finally:
            await store.close()

    try:
        return asyncio.run(run())
    except ConfigError as exc:
        raise fail(str(exc)) from None


@db_app.command("upgrade")
def db_upgrade(url: DatabaseURL = None, config: ConfigPath = None) -> None:
    """Migrate the database to the latest schema (safe to run again)."""
    try:
        require("toolrelay db", "server", SERVER)
        target = database_url(url, config)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    from toolrelay.adapters.stores.sql import upgrade

    upgrade(target)
    Console(stderr=True, soft_wrap=True).print(
        f"database is up to date: {_redact(target)}", markup=False, highlight=False
    )


@keys_app.command("create")
def keys_create(
    name: Annotated[str, typer.Option("--name", help="A label for the key.")] = "",
    user: Annotated[str, typer.Option("--user", help="Name of the new key's user.")] = "admin",
    admin: Annotated[bool, typer.Option("--admin", help="The user is an administrator.")] = False,
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """An API key for the user of that name and role (created if none); shown once."""

    async def work(store: SQLStore) -> tuple[str, str, str]:
        account = await store.user_named(user)
        if account is None or account.is_admin != admin:  # never hand out more, or less, power
            account = await store.create_user(user, is_admin=admin)
        record, key = await store.create_api_key(account.id, name=name)
        return record.id, account.id, key

    key_id, user_id, key = _with_store(url, config, work)
    err = Console(stderr=True, soft_wrap=True)
    role = "admin " if admin else ""
    err.print(
        f"created key {key_id} for {role}user {user!r} ({user_id})", markup=False, highlight=False
    )
    err.print("[yellow]store this key now: it is not shown again[/]")
    Console(soft_wrap=True).print(key, highlight=False, markup=False)


@keys_app.command("list")
def keys_list(
    user_id: Annotated[str | None, typer.Option("--user-id", help="Only this user's keys.")] = None,
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """List API keys as tab-separated lines (prefixes only: keys are stored hashed)."""

    async def work(store: SQLStore) -> list[tuple[str, ...]]:
        return [
            (k.id, k.prefix + "…", k.name, k.user_id, _when(k.created_at), _when(k.revoked_at))
            for k in await store.list_api_keys(user_id)
        ]

    rows = _with_store(url, config, work)
    if not rows:
        Console(stderr=True, soft_wrap=True).print("no API keys")
        return
    for row in [("id", "prefix", "name", "user", "created", "revoked"), *rows]:
        typer.echo("\t".join(row))


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id, as `keys list` shows it.")],
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """Revoke an API key; requests with it are refused from now on."""

    async def work(store: SQLStore) -> bool:
        return await store.revoke_api_key(key_id)

    if not _with_store(url, config, work):
        raise fail(f"no active key {key_id!r}", code=1)
    Console().print(f"revoked {key_id}", highlight=False)


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else ""


def _redact(url: str) -> str:
    """A URL without its password, for printing."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
