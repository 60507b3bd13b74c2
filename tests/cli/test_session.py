"""`toolrelay chat` with no prompt on a terminal: an interactive session on a real pty.

Driven like a person at a shell would: lines typed, Ctrl-C typed (the terminal
driver turns it into SIGINT), against the fake model server on a socket.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.terminal import Terminal
from toolrelay.adapters.stores import StoredMessage
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.testing import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CLI = [sys.executable, "-m", "toolrelay.cli.main"]


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


@pytest.fixture
def terminal(server: FakeModelServer) -> Iterator[Terminal]:
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm", "PYTHONUNBUFFERED": "1"}
    term = Terminal([*CLI, "chat", "--base-url", server.base_url, "--model", "m"], env)
    try:
        yield term
    finally:
        term.close()


def saved_messages(data_dir: Path) -> list[StoredMessage]:
    async def read() -> list[StoredMessage]:
        store = await SQLStore.open(f"sqlite+aiosqlite:///{data_dir / 'toolrelay.db'}")
        try:
            owner = await store.user_named("admin")
            assert owner is not None
            [chat], _ = await store.list_chats(owner.id)
            return await store.get_messages(chat.id)
        finally:
            await store.close()

    return asyncio.run(read())


def test_ctrl_c_stops_the_turn_not_the_session(
    server: FakeModelServer, terminal: Terminal, data_dir: Path
) -> None:
    server.script(
        SSEReply(chat_chunks(text=["first part", " never sent"]), stall_after=2),
        SSEReply(chat_chunks(text="Second answer.")),
        SSEReply(chat_chunks(text="From the other model.")),
    )
    terminal.expect("new conversation")
    terminal.expect("› ")
    terminal.type("tell me\r")
    terminal.expect("first part")  # streaming, then the upstream stalls
    terminal.type("\x03")
    terminal.expect("cancelled")
    assert server.wait_for_connections(0)  # the stalled upstream response was closed
    terminal.expect("› ")
    terminal.type("go on\r")
    terminal.expect("Second answer.")
    terminal.type("/model other\r")
    terminal.expect("model: other")
    terminal.type("and now?\r")
    terminal.expect("From the other model.")
    terminal.type("/exit\r")
    assert terminal.wait() == 0, terminal.output

    second = server.requests[1].json["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"] == "first part"  # the cancelled turn's partial answer
    assert server.requests[2].json["model"] == "other"
    messages = saved_messages(data_dir)
    assert [(m.role, m.status) for m in messages] == [
        ("user", None),
        ("assistant", "cancelled"),
        ("user", None),
        ("assistant", "completed"),
        ("user", None),
        ("assistant", "completed"),
    ]
    assert messages[-1].model == "other"
    history = (data_dir / "chat_history").read_text()
    assert "tell me" in history and "/model other" in history


def test_ctrl_d_and_an_unknown_command(server: FakeModelServer, terminal: Terminal) -> None:
    terminal.expect("› ")
    terminal.type("/what\r")
    terminal.expect("unknown command /what")
    # Ctrl-D only while the next prompt reads keys: typed in between, the tty is back in
    # cooked mode, where ^D ends a pending line and is then gone, so the session waits on
    terminal.expect("› ")
    terminal.type("\x04")
    assert terminal.wait() == 0, terminal.output
    assert server.requests == []


def test_the_prompt_history_of_an_earlier_session_comes_back_with_up(
    server: FakeModelServer, data_dir: Path
) -> None:
    data_dir.mkdir()
    (data_dir / "chat_history").write_text("an old question\n")
    server.script(SSEReply(chat_chunks(text="Answered again.")))
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm", "PYTHONUNBUFFERED": "1"}
    term = Terminal([*CLI, "chat", "--base-url", server.base_url, "--model", "m"], env)
    try:
        term.expect("› ")
        term.type("\x1b[A")  # the up arrow
        term.expect("an old question")
        term.type("\r")
        term.expect("Answered again.")
        term.type("/exit\r")
        assert term.wait() == 0, term.output
    finally:
        term.close()
    assert server.requests[0].json["messages"] == [{"role": "user", "content": "an old question"}]
