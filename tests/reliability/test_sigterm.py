"""Issue 7 item 6: SIGTERM does not hang on SSE followers; running turns get a bounded grace.

The server runs as a child process under uvicorn. An SSE client following a
chat with no running turn used to keep the server in "Waiting for
connections to close" until the client left; now the stream ends at once
with a `server:shutdown` event telling the client to reconnect. A running
turn gets `shutdown_grace_s`, then is cancelled and saved `cancelled`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from tests.server.conftest import ADMIN_KEY, TOOLS
from tests.server.test_chats_api import new_chat
from tests.server.test_faults import closed_port
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.events import ChatStreamReader
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

LAUNCHER = Path(__file__).parent / "serve_settings.py"
HANG = 60.0  # a hang guard only: each wait ends on an event long before


def _free_port() -> int:
    return closed_port()


class Child:
    """The server in a child process; `stop()` sends SIGTERM and waits for the exit."""

    def __init__(self, tmp_path: Path, upstream: FakeModelServer) -> None:
        self.port = _free_port()
        self.database = tmp_path / "data" / "toolrelay.db"
        options = {
            "data_dir": str(tmp_path / "data"),
            "models": [{"name": "fake", "base_url": upstream.base_url, "model": "m"}],
            "tools": [str(TOOLS)],
            "admin_key": ADMIN_KEY,
            "shutdown_grace_s": 0.5,
        }
        config = tmp_path / "settings.json"
        config.write_bytes(orjson.dumps(options))
        root = Path(__file__).parents[2]
        env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'src'}"}
        self.process = subprocess.Popen(
            [sys.executable, str(LAUNCHER), str(config), str(self.port)], env=env
        )
        self.base_url = f"http://127.0.0.1:{self.port}"
        self._wait_ready()

    def _wait_ready(self) -> None:
        for _ in range(int(HANG / 0.05)):
            if self.process.poll() is not None:
                raise RuntimeError("the server exited at start-up")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                threading.Event().wait(0.05)
        raise RuntimeError("the server did not start")

    def client(self) -> httpx2.Client:
        return httpx2.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=HANG
        )

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=HANG)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("the server hung at SIGTERM") from None


@pytest.fixture
def child(tmp_path: Path) -> Iterator[Child]:
    with FakeModelServer() as upstream:
        server = Child(tmp_path, upstream)
        server.upstream = upstream  # type: ignore[attr-defined]
        try:
            yield server
        finally:
            if server.process.poll() is None:
                server.process.kill()
                server.process.wait()


def _follow(
    client: httpx2.Client, chat_id: str, seen: list[dict[str, Any]], ready: threading.Event
) -> None:
    decoder = ChatStreamReader()
    with client.stream("GET", f"/api/chats/{chat_id}/events") as response:
        for chunk in response.iter_bytes():
            for _frame_id, whole in decoder.feed(chunk):
                seen.append(whole.to_dict())
                ready.set()


def test_sigterm_ends_idle_sse_streams_with_a_reconnect_event(child: Child) -> None:
    with child.client() as client:
        chat_id = new_chat(client, model="fake")
        seen: list[dict[str, Any]] = []
        ready = threading.Event()
        reader = threading.Thread(target=_follow, args=(client, chat_id, seen, ready))
        reader.start()
        assert ready.wait(HANG)  # the snapshot arrived: the stream is open, no turn runs
        assert child.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
        reader.join(HANG)
        assert not reader.is_alive()
    assert [e["type"] for e in seen] == ["chat:snapshot", "server:shutdown"]
    assert seen[-1]["data"]["reconnect"] is True


def _stream_v1(client: httpx2.Client, seen: list[bytes]) -> None:
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        seen.extend(response.iter_bytes())


def test_sigterm_cancels_running_turns_after_the_grace(child: Child) -> None:
    """A chat turn and a /v1 stream, both stalled upstream: the grace bounds the stop."""
    upstream: FakeModelServer = child.upstream  # type: ignore[attr-defined]
    upstream.set_default(SSEReply(chat_chunks(text=["Half ", "an ", "answer"]), stall_after=3))
    with child.client() as client:
        chat_id = new_chat(client, model="fake")
        posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"})
        assert posted.status_code == 202
        streamed: list[bytes] = []
        v1 = threading.Thread(target=_stream_v1, args=(client, streamed))
        v1.start()
        assert upstream.wait_for_connections(2, timeout=HANG)
        assert child.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal it handled
        v1.join(HANG)
    assert b"Half " in b"".join(streamed)

    async def saved() -> dict[str, Any]:
        store = await SQLStore.open(f"sqlite+aiosqlite:///{child.database}")
        try:
            messages = await store.get_messages(chat_id)
        finally:
            await store.close()
        last = messages[-1]
        return {"status": last.status, "content": last.content}

    turn = asyncio.run(saved())
    assert turn["status"] == "cancelled"
    assert turn["content"].startswith("Half")


def test_a_v1_stream_cut_at_the_grace_ends_with_an_error_and_done(child: Child) -> None:
    """Issue 15: a /v1 stream cut by the shutdown used to just stop, like a whole answer
    whose end was lost; now its last frames say the server stopped, then `[DONE]`."""
    upstream: FakeModelServer = child.upstream  # type: ignore[attr-defined]
    upstream.set_default(SSEReply(chat_chunks(text=["Half ", "an ", "answer"]), stall_after=3))
    with child.client() as client:
        streamed: list[bytes] = []
        v1 = threading.Thread(target=_stream_v1, args=(client, streamed))
        v1.start()
        assert upstream.wait_for_connections(1, timeout=HANG)
        assert child.stop() in (0, -signal.SIGTERM)
        v1.join(HANG)
    frames = [f for f in b"".join(streamed).split(b"\n\n") if f]
    assert frames[-1] == b"data: [DONE]"
    error = orjson.loads(frames[-2].removeprefix(b"data: "))["error"]
    assert "shutting down" in error["message"]
    assert error["code"] == "cancelled"
    assert b"Half " in b"".join(frames[:-2])
