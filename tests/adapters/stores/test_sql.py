"""SQL-only behaviour: migrations, what is really in the tables, SQLite pragmas."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import JSON, inspect, text
from sqlalchemy import column as sa_column
from sqlalchemy import table as sa_table
from sqlalchemy.engine import Connection
from sqlalchemy.exc import StatementError

from toolrelay.adapters.stores import Store, TurnFields, sql_messages
from toolrelay.adapters.stores.models import Base, UTCDateTime, modelled
from toolrelay.adapters.stores.sql import (
    MIGRATIONS_DIR,
    SQLStore,
    _alembic_config,
    create_engine,
    upgrade,
)

from .conftest import FakeClock

pytestmark = pytest.mark.anyio

TABLES = {
    "alembic_version",
    "api_keys",
    "chats",
    "messages",
    "revoked_sessions",
    "search_docs",
    "spend",
    "tool_outputs",
    "turn_runs",
    "user_valves",
    "users",
}


HEAD = "0011_run_lease"
WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def test_migrations_are_one_line_to_head() -> None:
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    assert script.get_heads() == [HEAD]
    revisions = list(script.walk_revisions())  # head first
    # one line: each revision follows the next older one, the oldest follows none
    assert [r.down_revision for r in revisions] == [r.revision for r in revisions[1:]] + [None]


async def test_upgrade_scrubs_secret_characters_from_stored_key_prefixes(sql_url: str) -> None:
    """Before 0002 a key's first 8 characters were stored; after it, only the `tr-` marker."""
    engine = create_engine(sql_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(lambda c: command.upgrade(_alembic_config(c), "0001_initial"))
            await connection.execute(
                text(
                    "INSERT INTO users (id, name, is_admin, created_at) VALUES ('u', 'a', :a, :t)"
                ),
                {"a": True, "t": WHEN},
            )
            for key_id, prefix in [("k1", "tr-AbCdE"), ("k2", "admin-se")]:
                await connection.execute(
                    text(
                        "INSERT INTO api_keys (id, user_id, name, prefix, key_hash, created_at)"
                        " VALUES (:id, 'u', '', :p, :h, :t)"
                    ),
                    {"id": key_id, "p": prefix, "h": key_id, "t": WHEN},
                )
        async with engine.begin() as connection:
            await connection.run_sync(lambda c: command.upgrade(_alembic_config(c), "head"))
            rows = await connection.execute(text("SELECT id, prefix FROM api_keys ORDER BY id"))
            assert [tuple(r) for r in rows] == [("k1", "tr-"), ("k2", "")]
    finally:
        await engine.dispose()


def _schema_state(connection: Connection) -> tuple[set[str], list[Any], list[Any]]:
    tables = {t for t in inspect(connection).get_table_names() if modelled(t, "table")}
    versions = list(connection.execute(text("SELECT version_num FROM alembic_version")))
    context = MigrationContext.configure(connection, opts={"include_name": modelled})
    diff = compare_metadata(context, Base.metadata)
    return tables, [tuple(v) for v in versions], diff


async def test_migrates_from_empty_and_again_is_a_no_op(sql_url: str) -> None:
    store = await SQLStore.open(sql_url)
    try:
        user = await store.create_user("alice")
        async with store.engine.connect() as connection:
            tables, versions, diff = await connection.run_sync(_schema_state)
        assert tables == TABLES
        assert versions == [(HEAD,)]
        assert diff == []  # the migration builds exactly the ORM's schema
    finally:
        await store.close()

    await anyio.to_thread.run_sync(upgrade, sql_url)  # the CLI's sync helper
    store = await SQLStore.open(sql_url)
    try:
        assert await store.count_users() == 1
        assert await store.user_for_key("nothing") is None
        async with store.engine.connect() as connection:
            tables, versions, _ = await connection.run_sync(_schema_state)
        assert (tables, versions) == (TABLES, [(HEAD,)])
        assert (await store.list_chats(user.id)) == ([], 0)
    finally:
        await store.close()


async def test_open_without_migrate_leaves_the_database_empty(sql_url: str) -> None:
    store = await SQLStore.open(sql_url, migrate=False)
    try:
        async with store.engine.connect() as connection:
            tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
        assert tables == set()
    finally:
        await store.close()


async def test_api_keys_are_stored_only_as_sha256(sql_store: SQLStore) -> None:
    store = sql_store
    alice = await store.create_user("alice")
    record, key = await store.create_api_key(alice.id)
    await store.create_api_key_with_value(alice.id, "admin-plain-value")
    async with store.engine.connect() as connection:
        rows = [tuple(r) for r in await connection.execute(text("SELECT * FROM api_keys"))]
    dump = repr(rows)
    assert key not in dump and key[8:] not in dump
    assert "admin-plain-value" not in dump
    stored = await _scalars(store, "SELECT key_hash FROM api_keys WHERE id = :id", id=record.id)
    assert stored == [(hashlib.sha256(key.encode()).hexdigest(),)]


async def _scalars(store: SQLStore, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    async with store.engine.connect() as connection:
        return [tuple(r) for r in await connection.execute(text(sql), params)]


async def test_delete_cascades_in_the_database(sql_store: SQLStore) -> None:
    store = sql_store
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    await store.add_message(chat.id, {"role": "user", "content": "hi"})
    await store.save_turn(chat.id, "msg_turn", {"output": [], "content": "x"})
    count = "SELECT count(*) FROM messages WHERE chat_id = :chat"
    assert await _scalars(store, count, chat=chat.id) == [(2,)]
    assert await store.delete_chat(chat.id, user_id=alice.id) is True
    assert await _scalars(store, count, chat=chat.id) == [(0,)]


async def test_timestamps_come_back_as_aware_utc(store: Store, clock: FakeClock) -> None:
    alice = await store.create_user("alice")
    assert alice.created_at == clock.current
    assert alice.created_at.utcoffset() == timedelta(0)
    chat = await store.create_chat(alice.id)
    fetched = await store.get_chat(chat.id, user_id=alice.id)
    assert fetched is not None and fetched.created_at.tzinfo is not None
    assert fetched.created_at == clock.current


async def test_sqlite_creates_directory_and_enables_wal_and_foreign_keys(tmp_path: Any) -> None:
    path = tmp_path / "a" / "b" / "db.sqlite"
    store = await SQLStore.open(f"sqlite+aiosqlite:///{path}")
    try:
        assert path.exists()
        assert await _scalars(store, "PRAGMA journal_mode") == [("wal",)]
        assert await _scalars(store, "PRAGMA foreign_keys") == [(1,)]
    finally:
        await store.close()


async def test_sqlite_in_memory_url_shares_one_database() -> None:
    store = await SQLStore.open("sqlite+aiosqlite://")
    try:
        user = await store.create_user("alice")
        chat = await store.create_chat(user.id)
        assert await store.get_chat(chat.id, user_id=user.id) == chat
    finally:
        await store.close()


async def test_failure_inside_the_transaction_rolls_everything_back(
    sql_store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bypass the up-front check so the write itself fails half-way through the transaction."""
    store = sql_store
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    await store.save_turn(chat.id, "msg_turn", {"output": [], "content": "kept"})
    before = await store.get_messages(chat.id)
    chat_before = await store.get_chat(chat.id, user_id=alice.id)

    def unchecked(turn: Any) -> TurnFields:
        return TurnFields(
            output=[],
            content="lost",
            usage=None,
            status="completed",
            error=None,
            timings={"bad": object()},
            model=None,
            follow_ups=[],
        )

    monkeypatch.setattr(sql_messages, "turn_fields", unchecked)
    with pytest.raises(StatementError) as caught:
        await store.save_turn(chat.id, "msg_turn", {})
    assert isinstance(caught.value.orig, TypeError)
    with pytest.raises(StatementError):
        await store.save_turn(chat.id, "msg_other", {})
    assert await store.get_messages(chat.id) == before
    assert await store.get_chat(chat.id, user_id=alice.id) == chat_before


def test_package_imports_lazily_without_sqlalchemy() -> None:
    code = (
        "import sys, toolrelay.adapters.stores as s\n"
        "assert 'sqlalchemy' not in sys.modules, 'sqlalchemy imported eagerly'\n"
        "from toolrelay.adapters.stores import MemoryStore, SQLStore, upgrade\n"
        "assert SQLStore.__module__ == 'toolrelay.adapters.stores.sql'\n"
        "assert MemoryStore.__module__ == 'toolrelay.adapters.stores.memory'\n"
        "print(upgrade.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "upgrade\n", "")


async def test_upgrade_indexes_chats_written_before_search_existed(
    sql_url: str, clock: FakeClock
) -> None:
    """0003 builds the search index of every message and title already in the database."""
    engine = create_engine(sql_url)
    chats = sa_table(
        "chats",
        *(sa_column(c) for c in ("id", "user_id", "title", "model")),
        sa_column("tags", JSON),
        sa_column("created_at", UTCDateTime),
        sa_column("updated_at", UTCDateTime),
    )
    messages = sa_table(
        "messages",
        *(sa_column(c) for c in ("id", "chat_id", "role")),
        *(sa_column(c, JSON) for c in ("content", "output", "follow_ups")),
        sa_column("created_at", UTCDateTime),
        sa_column("updated_at", UTCDateTime),
    )
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda c: command.upgrade(_alembic_config(c), "0002_key_prefix_scrub")
            )
            await connection.execute(
                text(
                    "INSERT INTO users (id, name, is_admin, created_at) VALUES ('u', 'a', :a, :t)"
                ),
                {"a": False, "t": WHEN},
            )
            rows: list[dict[str, Any]] = [
                {
                    "id": f"c{i}",
                    "user_id": "u",
                    "title": f"Old trip {i}",
                    "model": None,
                    "tags": [],
                    "created_at": clock(),
                    "updated_at": clock(),
                }
                for i in range(3)
            ]
            await connection.execute(chats.insert(), rows)
            content: list[Any] = ["Where is the Louvre?", [{"type": "text", "text": "Zürich"}]]
            await connection.execute(
                messages.insert(),
                [
                    {
                        "id": f"m{i}",
                        "chat_id": f"c{i}",
                        "role": "user",
                        "content": body,
                        "output": [],
                        "follow_ups": [],
                        "created_at": WHEN,
                        "updated_at": WHEN,
                    }
                    for i, body in enumerate(content)
                ],
            )
    finally:
        await engine.dispose()
    store = await SQLStore.open(sql_url)  # migrates to head
    try:
        found = {
            q: [c.id for c in (await store.list_chats("u", query=q))[0]]
            for q in ("louvre", "zurich", "old trip", "trip 2")
        }
        assert found == {
            "louvre": ["c0"],
            "zurich": ["c1"],
            "old trip": ["c2", "c1", "c0"],
            "trip 2": ["c2"],
        }
    finally:
        await store.close()
