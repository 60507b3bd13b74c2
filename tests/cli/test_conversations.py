"""`toolrelay chat` conversations: saved in the server's database, continued with -c / --cid.

The real command (typer's runner) against the fake model server on a socket,
saving into a SQLite file in the test's data directory.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.cli.saved import saved
from tests.patience import HANG
from tests.server.conftest import Running, ServerThread, make_settings
from toolrelay.adapters.stores import StoredMessage
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.cli.main import app
from toolrelay.server.app import ensure_admin_key
from toolrelay.testing import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


def chat(server: FakeModelServer, *args: str) -> Any:
    argv = ["chat", *args, "--base-url", server.base_url, "--model", "m"]
    return CliRunner().invoke(app, argv, catch_exceptions=False)


def roles_and_text(messages: list[StoredMessage]) -> list[tuple[str, Any]]:
    return [(m.role, m.content) for m in messages]


def test_a_chat_is_saved_with_its_title_model_and_turn(
    server: FakeModelServer, data_dir: Path
) -> None:
    server.script(SSEReply(chat_chunks(text="Paris.")))
    result = chat(server, "capital of France?", "--system", "Be brief.")
    assert result.exit_code == 0, result.output
    [(one, messages)] = saved(data_dir)
    assert one.title == "capital of France?" and one.model == "m"
    assert roles_and_text(messages) == [
        ("system", "Be brief."),
        ("user", "capital of France?"),
        ("assistant", "Paris."),
    ]
    assert messages[-1].status == "completed"


def test_continue_sends_the_saved_history_and_adds_to_the_same_chat(
    server: FakeModelServer, data_dir: Path
) -> None:
    server.script(SSEReply(chat_chunks(text="Paris.")), SSEReply(chat_chunks(text="Lyon.")))
    assert chat(server, "capital of France?").exit_code == 0
    result = chat(server, "-c", "and its second city?")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Lyon.\n"
    assert server.requests[1].json["messages"] == [
        {"role": "user", "content": "capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "and its second city?"},
    ]
    [(_, messages)] = saved(data_dir)
    assert [m.content for m in messages] == [
        "capital of France?",
        "Paris.",
        "and its second city?",
        "Lyon.",
    ]


def test_cid_continues_the_named_conversation_not_the_last(
    server: FakeModelServer, data_dir: Path
) -> None:
    server.script(
        SSEReply(chat_chunks(text="one")),
        SSEReply(chat_chunks(text="two")),
        SSEReply(chat_chunks(text="three")),
    )
    assert chat(server, "first").exit_code == 0
    assert chat(server, "second").exit_code == 0
    first = next(c for c, _ in saved(data_dir) if c.title == "first")
    result = chat(server, "--cid", first.id, "again")
    assert result.exit_code == 0, result.output
    assert [m["content"] for m in server.requests[2].json["messages"]] == ["first", "one", "again"]
    by_title = {c.title: [m.content for m in ms] for c, ms in saved(data_dir)}
    assert by_title == {"first": ["first", "one", "again", "three"], "second": ["second", "two"]}


def test_continue_without_a_database_says_so_and_creates_none(
    server: FakeModelServer, data_dir: Path
) -> None:
    result = chat(server, "-c", "hello?")
    assert result.exit_code == 2
    db = data_dir / "toolrelay.db"
    assert (
        result.stderr == f"error: no database at {db}: nothing has been saved there yet "
        "(TOOLRELAY_DATA_DIR, DATABASE_URL or --database-url choose another)\n"
    )
    assert not data_dir.exists()
    assert server.requests == []


def test_an_unknown_cid_is_a_usage_error(server: FakeModelServer, data_dir: Path) -> None:
    server.script(SSEReply(chat_chunks(text="ok")))
    assert chat(server, "hi").exit_code == 0
    result = chat(server, "--cid", "chat_nope", "hi")
    assert result.exit_code == 2
    assert f"no conversation 'chat_nope' in {data_dir / 'toolrelay.db'}" in result.stderr
    assert len(server.requests) == 1


def test_no_save_leaves_no_database(server: FakeModelServer, data_dir: Path) -> None:
    server.script(SSEReply(chat_chunks(text="ok")))
    result = chat(server, "hi", "--no-save")
    assert result.exit_code == 0, result.output
    assert not data_dir.exists()


def test_the_server_mints_its_first_key_for_the_owner_of_the_cli_chats(
    server: FakeModelServer, data_dir: Path
) -> None:
    """The CLI made the `admin` user (no key): the server's first start still prints a key,
    and that key's user owns the CLI's conversations."""
    server.script(SSEReply(chat_chunks(text="ok")))
    assert chat(server, "hi").exit_code == 0
    [(one, _)] = saved(data_dir)

    async def first_start() -> tuple[str | None, str | None, int]:
        store = await SQLStore.open(f"sqlite+aiosqlite:///{data_dir / 'toolrelay.db'}")
        try:
            key = await ensure_admin_key(store, None)
            again = await ensure_admin_key(store, None)
            user = await store.user_for_key(key or "")
            return (user.id if user else None), again, await store.count_users()
        finally:
            await store.close()

    owner, again, users = asyncio.run(first_start())
    assert owner == one.user_id
    assert again is None and users == 1


def test_an_unusable_data_dir_answers_without_saving(
    server: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TOOLRELAY_DATA_DIR", str(blocker / "data"))
    server.script(SSEReply(chat_chunks(text="still here")))
    result = chat(server, "hi")
    assert result.exit_code == 0, result.output
    assert result.stdout == "still here\n"
    assert result.stderr.startswith(
        f"not saving this conversation: cannot open {blocker / 'data' / 'toolrelay.db'}: "
    )


def test_without_the_server_extra_chat_answers_and_saves_nothing(
    server: FakeModelServer, data_dir: Path
) -> None:
    block = "import sys\nfor name in ('fastapi', 'uvicorn', 'sqlalchemy', 'aiosqlite'):\n"
    block += "    sys.modules[name] = None\nfrom toolrelay.cli.main import app\napp()"
    server.script(SSEReply(chat_chunks(text="no database needed")))
    argv = ["chat", "hi", "--base-url", server.base_url, "--model", "m"]
    done = subprocess.run(
        [sys.executable, "-c", block, *argv], capture_output=True, text=True, timeout=HANG
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no database needed\n"
    assert not data_dir.exists()


def test_the_server_and_the_cli_see_each_others_chats(
    server: FakeModelServer, tmp_path: Path, data_dir: Path
) -> None:
    """One database: the CLI's conversation is the admin's chat on the server (the admin key
    goes to the user the CLI made), and a chat made through the API is listed by the CLI."""
    server.script(SSEReply(chat_chunks(text="from the cli")))
    assert chat(server, "cli question").exit_code == 0
    settings = make_settings(tmp_path, server)
    assert settings.data_dir == data_dir
    with (
        ServerThread(settings) as base_url,
        Running(base_url, server, settings).client() as client,
    ):
        [listed] = client.get("/api/chats").json()["data"]
        assert listed["title"] == "cli question"
        messages = client.get(f"/api/chats/{listed['id']}").json()["messages"]
        assert [m["content"] for m in messages] == ["cli question", "from the cli"]
        made = client.post("/api/chats", json={"title": "made on the server"})
        assert made.status_code == 201, made.text
    rows = CliRunner().invoke(app, ["chats", "list"]).stdout.splitlines()[1:]
    assert sorted(row.split("\t")[3] for row in rows) == ["cli question", "made on the server"]
