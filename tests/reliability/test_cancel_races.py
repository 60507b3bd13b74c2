"""Post a short turn, cancel it a moment later, check that a plain write still answers:
1,000 times on SQLite, with one worker and with two (issue 24, item 1).

The cancel lands anywhere: before the turn starts, while it streams, while it
is being saved as completed, after. Before the fix a cancel inside the save
left SQLite's write lock held for good: from then on every write waited 30 s
and failed ("database is locked"), and SIGTERM did not stop the server. Here
every write answers, every turn ends (cancelled or completed, none left
`in_progress`) and SIGTERM ends the server. Several clients race at once, each
in its own chat, so the run stays short on a loaded machine.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from benchmarks.harness import ADMIN_KEY, ServerProcess, write_config

from tests.patience import HANG
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

RACES = 1_000
CLIENTS = 8
CHAT = "/v1/chat/completions"


def _race(
    server: ServerProcess, rounds: int, seed: int, chats: list[str], errors: list[str]
) -> None:
    rng = random.Random(seed)
    with server.client(timeout=2 * HANG) as client:
        chat_id = client.post("/api/chats", json={"model": "fake"}).json()["id"]
        chats.append(chat_id)
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
            time.sleep(rng.uniform(0, 0.04))
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
def test_a_thousand_cancels_racing_saves_leave_sqlite_writable(
    workers: int, tmp_path: Path
) -> None:
    with FakeModelServer() as upstream:
        upstream.route(CHAT, SSEReply(chat_chunks(text=["Yes", ",", " fine", "."])))
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
