"""`toolrelay db upgrade` and `toolrelay keys create|list|revoke`.

Owns the operator's commands: they find the database (`--database-url`, else
the settings), call the store, and print. The store (`adapters.stores.sql`)
and the settings are imported lazily so `toolrelay chat` stays quick; without
the server extra the commands say what to install.
A created API key is printed once, on stdout alone (so `$(toolrelay keys
create)` captures it); everything else about it goes to stderr.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from toolrelay.cli.extras import SERVER, require
from toolrelay.cli.store import OWNER, database_url, with_store
from toolrelay.errors import ConfigError

if TYPE_CHECKING:
    from toolrelay.adapters.stores.sql import SQLStore

__all__ = ["db_app", "fail", "keys_app"]

T = TypeVar("T")

db_app = typer.Typer(
    help="The database.",
    no_args_is_help=True,
    epilog="Examples:\n\n  toolrelay db upgrade\n\n  toolrelay db vacuum",
)
KEYS_EXAMPLES = """Examples:

  toolrelay keys create --user ann --name laptop     # prints the key once, on stdout

  toolrelay keys create --admin

  export TOOLRELAY_KEY=$(toolrelay keys create --user ci)

  toolrelay keys list

  toolrelay keys revoke key_0a1b…
"""

keys_app = typer.Typer(help="API keys.", no_args_is_help=True, epilog=KEYS_EXAMPLES)

DatabaseURL = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        metavar="URL",
        help="Default: the settings' (DATABASE_URL, else toolrelay.db in TOOLRELAY_DATA_DIR, "
        "~/.toolrelay).",
    ),
]
ConfigPath = Annotated[
    Path | None, typer.Option("--config", metavar="FILE", help="A toolrelay.toml.")
]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print `error: message` on stderr; the caller raises the returned `Exit`."""
    Console(stderr=True, soft_wrap=True).print(Text.assemble(("error:", "red"), f" {message}"))
    return typer.Exit(code)


def _with_store(
    url: str | None,
    config: Path | None,
    work: Callable[[SQLStore], Awaitable[T]],
    *,
    create: bool = False,
) -> T:
    """Open the store (migrating it; only `create` makes a missing SQLite file), say which
    one on stderr, run `work`, close it; configuration errors exit 2."""
    err = Console(stderr=True, soft_wrap=True)

    def say(message: str) -> None:
        err.print(message, markup=False, highlight=False)

    try:
        return with_store(url, config, work, create=create, what="toolrelay keys", say=say)
    except ConfigError as exc:
        raise fail(str(exc)) from None


@db_app.command(
    "upgrade",
    epilog="Examples:\n\n  toolrelay db upgrade\n\n"
    "  toolrelay db upgrade --database-url postgresql://me@127.0.0.1/toolrelay",
)
def db_upgrade(url: DatabaseURL = None, config: ConfigPath = None) -> None:
    """Migrate the database to the latest schema (safe to run again)."""
    try:
        require("toolrelay db", "server", SERVER)
        target = database_url(url, config)  # creating it is this command's job
    except ConfigError as exc:
        raise fail(str(exc)) from None
    from toolrelay.adapters.stores.sql import upgrade

    upgrade(target)
    Console(stderr=True, soft_wrap=True).print(
        f"database is up to date: {_redact(target)}", markup=False, highlight=False
    )


@keys_app.command("create", epilog=KEYS_EXAMPLES)
def keys_create(
    user: Annotated[
        str | None,
        typer.Option("--user", metavar="NAME", help="The key's user (created if none)."),
    ] = None,
    admin: Annotated[
        bool,
        typer.Option("--admin", help="The user is an administrator (alone: the user 'admin')."),
    ] = False,
    name: Annotated[str, typer.Option("--name", metavar="LABEL", help="A label for the key.")] = "",
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """Create an API key for a user (--user NAME) or an administrator (--admin); shown once."""
    if user is None and not admin:
        raise fail("say whose key it is: --user NAME (a user) or --admin (an administrator)")
    owner = user if user is not None else OWNER

    async def work(store: SQLStore) -> tuple[str, str, str]:
        account = await store.user_named(owner)
        if account is None or account.is_admin != admin:  # never hand out more, or less, power
            account = await store.create_user(owner, is_admin=admin)
        record, key = await store.create_api_key(account.id, name=name)
        return record.id, account.id, key

    key_id, user_id, key = _with_store(url, config, work, create=True)
    err = Console(stderr=True, soft_wrap=True)
    role = "admin " if admin else ""
    err.print(
        f"created key {key_id} for {role}user {owner!r} ({user_id})", markup=False, highlight=False
    )
    err.print("[yellow]store this key now: it is not shown again[/]")
    Console(soft_wrap=True).print(key, highlight=False, markup=False)


@keys_app.command(
    "list", epilog="Examples:\n\n  toolrelay keys list\n\n  toolrelay keys list | grep ann"
)
def keys_list(
    user_id: Annotated[
        str | None, typer.Option("--user-id", metavar="ID", help="Only this user's keys.")
    ] = None,
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """List API keys as tab-separated lines: each key as `tr-…a1B2` (its last 4 characters;
    keys are stored hashed, older keys show none)."""

    async def work(store: SQLStore) -> list[tuple[str, ...]]:
        users = {u.id: u for u in await store.list_users()}
        rows: list[tuple[str, ...]] = []
        for k in await store.list_api_keys(user_id):
            who = users.get(k.user_id)
            name = who.name if who is not None else k.user_id
            role = "admin" if who is not None and who.is_admin else "user"
            created, revoked = _when(k.created_at), _when(k.revoked_at)
            rows.append((k.id, k.prefix + "…" + k.tail, k.name, name, role, created, revoked))
        return rows

    rows = _with_store(url, config, work)
    if not rows:
        Console(stderr=True, soft_wrap=True).print("no API keys")
        return
    for row in [("id", "key", "name", "user", "role", "created", "revoked"), *rows]:
        typer.echo("\t".join(row))


@keys_app.command("revoke", epilog="Examples:\n\n  toolrelay keys revoke key_0a1b…")
def keys_revoke(
    key_id: Annotated[
        str, typer.Argument(metavar="KEY_ID", help="The key's id, as 'keys list' shows it.")
    ],
    url: DatabaseURL = None,
    config: ConfigPath = None,
) -> None:
    """Revoke an API key; requests with it are refused from now on."""

    async def work(store: SQLStore) -> bool:
        return await store.revoke_api_key(key_id)

    if not _with_store(url, config, work):
        raise fail(f"no active key {key_id!r}", code=1)
    Console().print(f"revoked {key_id}", highlight=False)


@db_app.command(
    "vacuum",
    epilog="Examples:\n\n  toolrelay db vacuum\n\n"
    "  toolrelay db vacuum --database-url sqlite:///data/toolrelay.db",
)
def db_vacuum(url: DatabaseURL = None, config: ConfigPath = None) -> None:
    """Give a SQLite file's free space back, and turn on incremental auto-vacuum.

    Databases made by this version have it already (deleted chats give their space back
    as they go); an older file needs this once, with no server writing to it. PostgreSQL
    is left to its autovacuum.
    """
    try:
        require("toolrelay db", "server", SERVER)
        target = database_url(url, config)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    from toolrelay.adapters.stores.sql_upkeep import vacuum

    try:
        sizes = vacuum(target)
    except (OSError, sqlite3.Error) as exc:
        raise fail(f"cannot vacuum {_redact(target)}: {exc}", code=1) from None
    err = Console(stderr=True, soft_wrap=True)
    if sizes is None:
        err.print("PostgreSQL: its autovacuum keeps the space; nothing to do", markup=False)
        return
    before, after = sizes
    err.print(
        f"vacuumed {_redact(target)}: {before:,} → {after:,} bytes; incremental auto-vacuum is on",
        markup=False,
        highlight=False,
    )


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else ""


def _redact(url: str) -> str:
    """A URL without its password, for printing."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
