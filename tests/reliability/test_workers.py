"""`toolrelay serve --workers 2` for real: two spawned processes on one port, one chat lock.

The in-process two-worker test (tests/server/test_backends.py) picks which
worker gets each request; here uvicorn spawns the workers from the settings
the parent checked, and the kernel spreads fresh connections over them.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from benchmarks.harness import ADMIN_KEY, ServerProcess, write_config

from tests.patience import HANG
from tests.reliability.conftest import REDIS_URL
from tests.server.test_chats_api import new_chat, read_events
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"
READY = b"Application startup complete."


def _wait_for_workers(server: ServerProcess, count: int) -> None:
    deadline = time.monotonic() + 3 * HANG  # spawning imports everything twice, under load
    while server.log.read_bytes().count(READY) < count:
        assert time.monotonic() < deadline, server.log.read_text()[-3000:]
        time.sleep(0.1)


def test_two_spawned_workers_answer_and_share_one_turn_per_chat(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    config = write_config(
        tmp_path / "toolrelay.toml",
        upstream.base_url,
        admin_key=ADMIN_KEY,
        data_dir=str(tmp_path / "data"),
        events_url=REDIS_URL,
        local=False,
    )
    with ServerProcess(config, tmp_path / "server.log", args=["--workers", "2"]) as server:
        _wait_for_workers(server, 2)
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        upstream.route(CHAT, SSEReply(chat_chunks(text=["Hello ", "there."])))
        body = {"model": "fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        streamed = httpx.post(server.base_url + CHAT, json=body, headers=headers, timeout=30)
        assert streamed.status_code == 200 and "data: [DONE]" in streamed.text
        assert '"content":"Hello "' in streamed.text
        stalled = SSEReply(chat_chunks(text=["partial ", "words ", "end"]), stall_after=3)
        upstream.route(CHAT, stalled)
        with server.client() as client:
            chat_id = new_chat(client, model="fake")
            posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
            assert posted.status_code == 202
            seen = read_events(client, chat_id, last=0, limit=3)
            assert any(e["type"] == "response.output_text.delta" for _, e in seen)
        for _ in range(6):  # fresh connections: the kernel hands them to either worker
            with server.client() as other:
                busy = other.post(f"/api/chats/{chat_id}/messages", json={"content": "again"})
                assert busy.status_code == 409, busy.text
        with server.client() as other:
            assert other.post(f"/api/chats/{chat_id}/cancel").json() == {"cancelled": True}
            rest = read_events(other, chat_id, last=seen[-1][0])
            assert rest[-1][1]["type"] == "chat:completion"
            assert "chat:tasks:cancel" in [e["type"] for _, e in rest]
