"""Cancels racing chat turns on SQLite, with one worker and with two (issue 24, item 1).

Clients race in their own chats: post a short turn, cancel it, check that a plain
write still answers. Half the rounds cancel right after the 202 (the turn is
reading its history and recording its run), the other half as the answer's last
item arrives (the turn is being saved as completed): the moments where a turn
writes. Every turn must end `cancelled` or `completed` (a cancel that came
before the engine took the turn once left its row `in_progress` for good, and
the next post failed it as a dead server's), no write may fail and SIGTERM must
end the server.

Before `adapters/stores/whole.py`, a cancel landing at one point inside a write
abandoned the connection with SQLite's write lock held ("database is locked"
from then on). Only a few event-loop steps of a write do that, so races over
sockets hit them by chance: with the fix reverted this test failed in each of
four runs (both worker counts, twice), but it is no proof;
`test_cancelled_saves.py` is the deterministic guard, cancelling each write at
every step.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import httpx2
import pytest
from benchmarks.harness import ADMIN_KEY, ServerProcess, write_config

from tests.patience import HANG
from toolrelay.events import ChatStreamReader
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

RACES = 120
CLIENTS = 4
ANSWER = SSEReply(chat_chunks(text=["Yes", ",", " fine", "."]))


def _answered(client: httpx2.Client, chat_id: str, after: int) -> int:
    """Follow the chat's events from `after` until this turn's answer is complete (its
    message item done) or the turn ended; the last seq read."""
    decoder = ChatStreamReader()
    headers = {"Last-Event-ID": str(after)}
    with client.stream("GET", f"/api/chats/{chat_id}/events", headers=headers) as response:
        for chunk in response.iter_bytes():
            for frame_id, whole in decoder.feed(chunk):
                after = max(after, int(frame_id or 0))
                event = whole.to_dict()
                kind, data = event["type"], event["data"]
                item = data.get("item") or {}
                if kind == "response.output_item.done" and item.get("type") == "message":
                    return after
                if kind == "chat:completion" and data.get("done"):
                    return after
    return after


def _race(
    server: ServerProcess, rounds: int, seed: int, chats: list[str], errors: list[str]
) -> None:
    rng = random.Random(seed)
    with server.client(timeout=2 * HANG) as client:
        chat_id = client.post("/api/chats", json={"model": "fake"}).json()["id"]
        chats.append(chat_id)
        seen = 0
        for i in range(rounds):
            deadline = time.monotonic() + HANG
            while True:
                posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "q"})
                if posted.status_code != 409 or time.monotonic() > deadline:
                    break
                time.sleep(0.01)  # the cancelled turn is still being saved
            if posted.status_code != 202:
                errors.append(f"post {i}: {posted.status_code} {posted.text[:200]}")
                return
            if i % 2:  # lands while the turn reads its history, records its run
                time.sleep(rng.uniform(0, 0.005))
            else:  # lands while the turn is saved as completed
                seen = _answered(client, chat_id, seen)
                time.sleep(rng.uniform(0, 0.005))
            client.post(f"/api/chats/{chat_id}/cancel")
            written = client.post("/api/chats", json={"title": f"probe {i}"})
            if written.status_code != 201:
                errors.append(f"write {i}: {written.status_code} {written.text[:200]}")
                return


def _turns(server: ServerProcess, chats: list[str]) -> list[str]:
    """The status of every assistant turn, once none is in progress any more."""
    with server.client(timeout=2 * HANG) as client:
        deadline = time.monotonic() + HANG
        while True:
            statuses = [
                m["status"]
                for chat_id in chats
                for m in client.get(f"/api/chats/{chat_id}").json()["messages"]
                if m["role"] == "assistant"
            ]
            if "in_progress" not in statuses or time.monotonic() > deadline:
                return statuses
            time.sleep(0.05)


@pytest.mark.load
@pytest.mark.parametrize("workers", [1, 2])
def test_cancels_racing_turns_end_them_and_leave_sqlite_writable(
    workers: int, tmp_path: Path
) -> None:
    with FakeModelServer() as upstream:
        upstream.set_default(ANSWER)  # every turn gets its answer (a queue would run dry)
        config = write_config(
            tmp_path / "toolrelay.toml",
            upstream.base_url,
            admin_key=ADMIN_KEY,
            data_dir=str(tmp_path / "data"),
            database_url=f"sqlite+aiosqlite:///{tmp_path / 'races.db'}",
        )
        server = ServerProcess(config, tmp_path / "server.log", args=["--workers", str(workers)])
        with server:
            chats: list[str] = []
            errors: list[str] = []
            rounds = RACES // CLIENTS
            threads = [
                threading.Thread(target=_race, args=(server, rounds, seed, chats, errors))
                for seed in range(CLIENTS)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert errors == [], server.log.read_text()[-3000:]
            statuses = _turns(server, chats)
            assert len(statuses) == RACES
            assert set(statuses) <= {"cancelled", "completed"}, statuses
            assert server.process is not None
            server.process.terminate()  # SIGTERM: the server ends within its grace period
            assert server.process.wait(timeout=HANG) is not None
        log = server.log.read_text()
        assert "database is locked" not in log
