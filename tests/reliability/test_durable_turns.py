"""Durable turns with real processes (issue 26): kill -9 the worker running a turn while
a tool runs or a call waits for approval; the turn goes on from its checkpoint.

`serve --workers 2` on both deployments (SQLite with the bus the parent hosts, and
PostgreSQL with Redis): the dead worker's replacement has its slot and takes the turn
back at start. Every chat ends `completed` with the expected answer, a tool that is
not idempotent never runs twice, and a client that resumes with its `Last-Event-ID`
gets the rest with no gap and no duplicate. PostgreSQL + Redis with two separate
servers: the survivor takes the dead one's turn over once its lease runs out.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import httpx2
import pytest
from benchmarks.harness import ADMIN_KEY, ServerProcess, write_config

from tests.patience import HANG
from tests.reliability.conftest import REDIS_URL, database
from tests.reliability.test_crash import wait_for
from tests.reliability.test_resume import follow
from tests.reliability.two_workers import two_workers
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.testing.fake_server import FakeModelServer, RecordedRequest, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

CHAT = "/v1/chat/completions"
TOOLS = str(Path(__file__).parent / "durable_tools.py")
BACKENDS = [
    pytest.param(("sqlite", None), id="sqlite-ipc"),
    pytest.param(
        ("postgres", REDIS_URL),
        id="postgres-redis",
        marks=[pytest.mark.postgres, pytest.mark.redis],
    ),
]
INTERRUPTED = "may or may not have taken effect"


def runs(folder: Path, name: str) -> int:
    path = folder / f"{name}.runs"
    return len(path.read_text().split()) if path.exists() else 0


def tool_results(request: RecordedRequest) -> list[str]:
    return [str(m.get("content")) for m in request.json["messages"] if m.get("role") == "tool"]


def check_stream(before: list[tuple[int, dict[str, Any]]], after: list[tuple[int, Any]]) -> None:
    """The events a client had, then what it got resuming with the last id: ids in order,
    no duplicate (a finished turn's deltas are dropped by the bus after its save, by
    design: docs/events.md), the resumed turn's final event there."""
    seqs = [seq for seq, _ in before + after]
    assert seqs == sorted(set(seqs)), seqs
    types = [e["type"] for _, e in after]
    assert "chat:turn:resumed" in types
    done = [e for _, e in after if e["type"] == "chat:completion" and e["data"].get("done")]
    assert done and done[-1]["data"]["status"] == "completed"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["charge", "fetch"])
def test_a_worker_killed_while_a_tool_runs(
    backend: tuple[str, str | None], name: str, tmp_path: Path, upstream: FakeModelServer
) -> None:
    folder = tmp_path / "marks"
    folder.mkdir()
    upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec(name, {"where": str(folder)})])),
        SSEReply(chat_chunks(text=["All ", "done."])),
    )
    settings: dict[str, Any] = {"tools": [TOOLS], "checkpoint_s": 0.05, "turn_lease_s": 600}
    with two_workers(tmp_path, upstream, *backend, **settings) as workers:
        first = workers.ready()
        with workers.server.client() as client:
            chat_id = new_chat(client, model="fake")
            posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
            assert posted.status_code == 202
            runner = workers.worker_of(posted)
            wait_for(lambda: runs(folder, name) == 1, "the tool running")
            before = read_events(client, chat_id, last=0, limit=3)[1:]  # past the snapshot
        os.kill(runner, signal.SIGKILL)
        (folder / "release").touch()
        workers.wait_ready(1, besides=first)
        with workers.server.client() as client:
            after = follow(client, chat_id, before[-1][0])
            check_stream(before, after)
            assert wait_saved(client, chat_id)["content"] == "All done."
        if name == "fetch":  # idempotent: run again, its result read by the model
            assert runs(folder, name) == 2
            assert tool_results(upstream.requests[-1]) == ["fetch done"]
        else:  # never twice: the model is told it may or may not have happened
            assert runs(folder, name) == 1
            (result,) = tool_results(upstream.requests[-1])
            assert INTERRUPTED in result


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_killed_while_a_turn_is_paused_for_approval(
    backend: tuple[str, str | None], tmp_path: Path, upstream: FakeModelServer
) -> None:
    folder = tmp_path / "marks"
    folder.mkdir()
    (folder / "release").touch()
    upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("wire", {"where": str(folder)})])),
        SSEReply(chat_chunks(text=["Wired."])),
    )
    settings: dict[str, Any] = {"tools": [TOOLS], "checkpoint_s": 0.05, "turn_lease_s": 600}
    with two_workers(tmp_path, upstream, *backend, **settings) as workers:
        first = workers.ready()
        with workers.server.client() as client:
            chat_id = new_chat(client, model="fake")
            posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
            runner = workers.worker_of(posted)
            asked = _approval(client, chat_id, after=0)
        os.kill(runner, signal.SIGKILL)
        workers.wait_ready(1, besides=first)
        with workers.server.client() as client:  # saved paused: any worker takes the answer
            answer = {"id": asked[1], "approved": True}
            wait_for(
                lambda: (
                    client.post(f"/api/chats/{chat_id}/tool-results", json=answer).status_code
                    == 202
                ),
                "the answer taken",
            )
            assert wait_saved(client, chat_id)["content"] == "Wired."
        assert runs(folder, "wire") == 1


def _approval(client: httpx2.Client, chat_id: str, *, after: int) -> tuple[int, str]:
    """The seq and call id of the first `tool:approval` after `after`."""
    url = f"/api/chats/{chat_id}/events"
    with client.stream("GET", url, headers={"Last-Event-ID": str(after)}) as response:
        from toolrelay.events import ChatStreamReader

        decoder = ChatStreamReader()
        for chunk in response.iter_bytes():
            for frame_id, whole in decoder.feed(chunk):
                event = whole.to_dict()
                if event["type"] == "tool:approval":
                    return int(frame_id or 0), str(event["data"]["id"])
    raise AssertionError("no approval asked")


@pytest.mark.postgres
@pytest.mark.redis
def test_another_server_takes_over_once_the_lease_runs_out(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    """Two servers on one PostgreSQL and Redis; the one running a turn is killed for
    good: the other takes the turn over when its lease expires and finishes it."""
    folder = tmp_path / "marks"
    folder.mkdir()
    upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("fetch", {"where": str(folder)})])),
        SSEReply(chat_chunks(text=["Taken ", "over."])),
    )
    with database("postgres", tmp_path) as url:
        servers = []
        for name in ("a", "b"):
            config = write_config(
                tmp_path / f"{name}.toml",
                upstream.base_url,
                admin_key=ADMIN_KEY,
                data_dir=str(tmp_path / f"data-{name}"),
                database_url=url,
                events_url=REDIS_URL,
                local=False,
                tools=[TOOLS],
                checkpoint_s=0.05,
                turn_lease_s=2,
            )
            servers.append(ServerProcess(config, tmp_path / f"{name}.log"))
        first, second = servers
        first.start()
        second.start()
        try:
            with first.client() as client:
                chat_id = new_chat(client, model="fake")
                posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
                assert posted.status_code == 202
                wait_for(lambda: runs(folder, "fetch") == 1, "the tool running")
                before = read_events(client, chat_id, last=0, limit=3)[1:]
            first.kill()
            (folder / "release").touch()
            with second.client() as client:
                after = follow(client, chat_id, before[-1][0])
                check_stream(before, after)
                assert wait_saved(client, chat_id)["content"] == "Taken over."
            assert runs(folder, "fetch") == 2
        finally:
            second.stop()
            first.stop()


LOAD_CHATS = 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_hundred_chats_survive_a_worker_killed_mid_run(
    backend: tuple[str, str | None], tmp_path: Path, upstream: FakeModelServer
) -> None:
    """200 chats streaming at once over 2 workers; one worker is SIGKILLed while every
    answer is mid-stream (held by the fake model) and replaced: 200 completed answers."""
    gate = threading.Event()
    words = ["Every ", "answer ", "arrives ", "whole."]
    upstream.set_default(SSEReply(chat_chunks(text=words), holds={2: gate}))
    settings: dict[str, Any] = {"checkpoint_s": 1, "turn_lease_s": 600}
    with two_workers(tmp_path, upstream, *backend, **settings) as workers:
        first = workers.ready()
        served: dict[int, int] = {}
        with workers.server.client() as client:
            chats = [new_chat(client, model="fake") for _ in range(LOAD_CHATS)]
        for chat_id in chats:  # fresh connections: the kernel spreads them over both
            with workers.server.client() as client:
                posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
                assert posted.status_code == 202
                pid = workers.worker_of(posted)
                served[pid] = served.get(pid, 0) + 1
        assert set(served) == first, served
        wait_for(lambda: len(upstream.requests) >= LOAD_CHATS, "every answer streaming", 4 * HANG)
        victim = max(served, key=lambda pid: served[pid])
        os.kill(victim, signal.SIGKILL)
        gate.set()
        workers.wait_ready(1, besides=first)
        with workers.server.client() as client:
            for chat_id in chats:
                assert wait_saved(client, chat_id)["content"] == "".join(words)


def test_a_paused_turn_holds_nothing_and_is_answered_after_a_restart(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    """A turn waiting for an approval is saved `paused`: no turn runs (no task, no lease);
    the server is killed and restarted, the answer resumes it; a second paused turn whose
    answer does not come within `pause_timeout_s` ends failed, saying why."""
    folder = tmp_path / "marks"
    folder.mkdir()
    (folder / "release").touch()
    upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("wire", {"where": str(folder)})])),
        SSEReply(chat_chunks(text=["Wired ", "after ", "a ", "restart."])),
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("wire", {"where": str(folder)})])),
    )
    with database("sqlite", tmp_path) as url:
        config = write_config(
            tmp_path / "toolrelay.toml",
            upstream.base_url,
            admin_key=ADMIN_KEY,
            data_dir=str(tmp_path / "data"),
            database_url=url,
            local=False,
            tools=[TOOLS],
            turn_lease_s=1,
        )
        server = ServerProcess(config, tmp_path / "server.log")
        server.start()
        try:
            with server.client() as client:
                chat_id = new_chat(client, model="fake")
                client.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
                _, call_id = _approval(client, chat_id, after=0)
                wait_for(lambda: not _snapshot(client, chat_id)["running"], "the turn paused")
                assert _snapshot(client, chat_id)["messages"][-1]["status"] == "in_progress"
            server.kill()
            server.start()
            with server.client() as client:
                answer = {"id": call_id, "approved": True}
                posted = client.post(f"/api/chats/{chat_id}/tool-results", json=answer)
                assert posted.status_code == 202, posted.text
                assert wait_saved(client, chat_id)["content"] == "Wired after a restart."
                again = client.post(f"/api/chats/{chat_id}/tool-results", json=answer)
                assert again.status_code == 409  # nothing waits for it any more
            assert runs(folder, "wire") == 1
            server.stop()
            config.write_text(
                config.read_text().replace(
                    "turn_lease_s = 1", "turn_lease_s = 1\npause_timeout_s = 0.5"
                )
            )
            server.start()
            with server.client() as client:
                client.post(f"/api/chats/{chat_id}/messages", json={"content": "again"})
                _approval(client, chat_id, after=0)
                failed = wait_saved(client, chat_id, status="failed")
                assert "pause_timeout" in str(failed["error"])
            assert runs(folder, "wire") == 1
        finally:
            server.stop()


def _snapshot(client: httpx2.Client, chat_id: str) -> dict[str, Any]:
    (_, first), *_ = read_events(client, chat_id, limit=1)
    assert first["type"] == "chat:snapshot"
    return dict(first["data"])
