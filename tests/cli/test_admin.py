"""`toolrelay db upgrade`, `keys create|list|revoke` and `serve`, on a temp SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolrelay.adapters.stores import User
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.cli.main import app
from toolrelay.config import Registry


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def owner(url: str, key: str) -> User | None:
    async def look() -> User | None:
        store = await SQLStore.open(url)
        try:
            return await store.user_for_key(key)
        finally:
            await store.close()

    return asyncio.run(look())


def test_db_upgrade_twice_is_fine(db_url: str, tmp_path: Path) -> None:
    for _ in range(2):
        result = invoke("db", "upgrade", "--database-url", db_url)
        assert result.exit_code == 0, result.output
        assert result.stderr == f"database is up to date: {db_url}\n"
    assert (tmp_path / "x.db").is_file()


def test_db_vacuum_turns_incremental_auto_vacuum_on(db_url: str, tmp_path: Path) -> None:
    import sqlite3

    missing = invoke("db", "vacuum", "--database-url", db_url)
    assert missing.exit_code == 1 and "no SQLite database" in missing.stderr
    assert invoke("db", "upgrade", "--database-url", db_url).exit_code == 0
    with sqlite3.connect(tmp_path / "x.db", isolation_level=None) as connection:
        connection.execute("PRAGMA auto_vacuum=NONE")  # as a file made before it was on
        connection.execute("VACUUM")
    result = invoke("db", "vacuum", "--database-url", db_url)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"vacuumed {db_url}: ")
    assert result.stderr.endswith("bytes; incremental auto-vacuum is on\n")
    with sqlite3.connect(tmp_path / "x.db") as connection:
        assert connection.execute("PRAGMA auto_vacuum").fetchone() == (2,)


def test_db_upgrade_hides_a_password() -> None:
    from toolrelay.cli.admin import _redact

    assert _redact("postgresql+asyncpg://me:secret@db/x") == "postgresql+asyncpg://me:***@db/x"


def test_keys_create_prints_the_key_alone_on_stdout_once(db_url: str) -> None:
    result = invoke("keys", "create", "--name", "laptop", "--user", "ann", "--database-url", db_url)
    assert result.exit_code == 0, result.output
    key = result.stdout.strip()
    assert result.stdout == key + "\n" and len(key) >= 32
    assert "not shown again" in result.stderr
    assert "for user 'ann'" in result.stderr
    user = owner(db_url, key)
    assert user is not None and user.name == "ann" and user.is_admin is False


def test_keys_create_admin(db_url: str) -> None:
    result = invoke("keys", "create", "--admin", "--database-url", db_url)
    assert result.exit_code == 0, result.output
    user = owner(db_url, result.stdout.strip())
    assert user is not None and user.name == "admin" and user.is_admin is True
    assert "for admin user 'admin'" in result.stderr


def test_keys_list_then_revoke(db_url: str) -> None:
    created = invoke("keys", "create", "--name", "ci", "--user", "bot", "--database-url", db_url)
    key = created.stdout.strip()
    key_id = created.stderr.split("created key ", 1)[1].split()[0]
    invoke("keys", "create", "--admin", "--name", "ops", "--database-url", db_url)

    listed = invoke("keys", "list", "--database-url", db_url)
    assert listed.exit_code == 0, listed.output
    assert listed.stderr == f"database: {db_url.removeprefix('sqlite+aiosqlite:///')}\n"
    header, row, admin_row = listed.stdout.splitlines()
    assert header.split("\t") == ["id", "key", "name", "user", "role", "created", "revoked"]
    fields = row.split("\t")
    # the key's last 4 characters tell it apart from the others; nothing more of it is kept
    assert fields[:5] == [key_id, f"tr-…{key[-4:]}", "ci", "bot", "user"]
    assert fields[1] != admin_row.split("\t")[1]
    assert admin_row.split("\t")[2:5] == ["ops", "admin", "admin"]
    assert key not in listed.stdout  # the key itself is never shown again

    revoked = invoke("keys", "revoke", key_id, "--database-url", db_url)
    assert revoked.exit_code == 0, revoked.output
    assert revoked.stdout == f"revoked {key_id}\n"
    assert owner(db_url, key) is None
    after = invoke("keys", "list", "--database-url", db_url).stdout.splitlines()[1].split("\t")
    assert len(after) == 7 and after[6] != ""

    again = invoke("keys", "revoke", key_id, "--database-url", db_url)
    assert again.exit_code == 1
    assert f"no active key {key_id!r}" in again.stderr


def test_keys_list_on_an_empty_database(db_url: str) -> None:
    assert invoke("db", "upgrade", "--database-url", db_url).exit_code == 0
    result = invoke("keys", "list", "--database-url", db_url)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr.endswith("no API keys\n")


@pytest.mark.parametrize("command", [["keys", "list"], ["keys", "revoke", "key_x"]])
def test_keys_commands_that_read_never_create_a_database(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "elsewhere" / "toolrelay.db"
    result = invoke(*command, "--database-url", f"sqlite+aiosqlite:///{missing}")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: no database at {missing}: nothing has been saved")
    assert not missing.parent.exists()


def test_keys_create_says_whose_key_it_is(db_url: str, tmp_path: Path) -> None:
    result = invoke("keys", "create", "--database-url", db_url)
    assert result.exit_code == 2
    assert result.stderr == (
        "error: say whose key it is: --user NAME (a user) or --admin (an administrator)\n"
    )
    assert not (tmp_path / "x.db").exists()


def test_the_data_dir_from_the_environment_is_used(tmp_path: Path) -> None:
    env: dict[str, str | None] = {
        "TOOLRELAY_DATA_DIR": str(tmp_path / "data"),
        "TOOLRELAY_DATABASE_URL": None,
        "DATABASE_URL": None,
        "TOOLRELAY_CONFIG": None,
    }
    result = invoke("keys", "create", "--user", "ann", env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"database: {tmp_path / 'data' / 'toolrelay.db'}\n")
    db_file = tmp_path / "data" / "toolrelay.db"
    assert db_file.is_file()
    assert owner(f"sqlite+aiosqlite:///{db_file}", result.stdout.strip()) is not None


def test_serve_runs_uvicorn_with_the_settings_and_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "toolrelay.toml"
    config.write_text('host = "0.0.0.0"\nport = 9123\nlocal = false\n')  # no embedded model
    calls: list[tuple[Any, dict[str, Any]]] = []

    def create_app(settings: Any, *, registry: Registry, tune_gc: bool) -> Any:
        assert isinstance(registry, Registry)  # built before the server starts
        assert tune_gc  # the server's own process: its collector is set for serving
        return ("app", settings.port)

    monkeypatch.setattr("toolrelay.server.app.create_app", create_app)  # the rest stays real
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: calls.append((app, kw)))
    logs: list[tuple[Any, ...]] = []
    monkeypatch.setattr("toolrelay.server.logs.configure_logging", lambda *a, **kw: logs.append(a))

    one = ["--workers", "1"]  # one process: uvicorn.run with the app (several: workers' tests)
    assert invoke("serve", "--config", str(config), *one).exit_code == 0
    flags = ["--port", "8001", "--host", "::1", "--log-level", "debug", "--log-format", "json"]
    assert invoke("serve", "--config", str(config), *one, *flags).exit_code == 0
    quiet = {"log_config": None, "log_level": "info"}
    assert calls == [
        (("app", 9123), {"host": "0.0.0.0", "port": 9123, **quiet}),
        (("app", 8001), {"host": "::1", "port": 8001, "log_config": None, "log_level": "debug"}),
    ]
    assert logs == [("INFO", "pretty"), ("DEBUG", "json")]
    assert invoke("serve", "--config", str(config), "--log-level", "loud").exit_code == 2


def test_serve_with_a_bad_config_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "toolrelay.toml"
    config.write_text("port = 'many'\n")
    result = invoke("serve", "--config", str(config))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "port" in result.stderr


def test_keys_for_the_same_user_and_role_share_the_user(db_url: str) -> None:
    first = invoke("keys", "create", "--user", "ann", "--database-url", db_url).stdout.strip()
    second = invoke("keys", "create", "--user", "ann", "--database-url", db_url).stdout.strip()
    admin = invoke("keys", "create", "--user", "ann", "--admin", "--database-url", db_url)
    one, two, three = (owner(db_url, k) for k in (first, second, admin.stdout.strip()))
    assert one is not None and two is not None and three is not None
    assert one.id == two.id and not one.is_admin
    assert three.id != one.id and three.is_admin
