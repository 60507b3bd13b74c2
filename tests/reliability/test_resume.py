"""Resuming a chat's event stream with ids the server never issued, and idle channels."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.reliability.conftest import BACKENDS, database, events_url
from tests.reliability.test_turn_lock import services
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from toolrelay.adapters.events.memory import MemoryBus
from toolrelay.events import ChatStreamReader
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"
WORDS = ["one ", "two ", "three ", "four ", "five"]


def answer_seen(events: list[tuple[int, dict[str, Any]]]) -> str:
    """The latest answer as the client saw it: its deltas, or a snapshot taken after it ended."""
    deltas = [e["data"]["delta"] for _, e in events if e["type"] == "response.output_text.delta"]
    if deltas:
        return "".join(deltas)
    snapshots = [e["data"] for _, e in events if e["type"] == "chat:snapshot"]
    last = snapshots[-1]["messages"][-1] if snapshots else {}
    return str(last.get("content")) if last.get("status") == "completed" else ""


def read_until_end(
    client: httpx2.Client, chat_id: str, last: int, limit: float = 60
) -> list[tuple[int, dict[str, Any]]]:
    """`read_events` that fails instead of hanging: keep-alives let it check a deadline."""
    out: list[tuple[int, dict[str, Any]]] = []
    decoder = ChatStreamReader()
    deadline = time.monotonic() + limit
    url = f"/api/chats/{chat_id}/events"
    with client.stream("GET", url, headers={"Last-Event-ID": str(last)}) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            out += [(int(i or 0), e.to_dict()) for i, e in decoder.feed(chunk)]
            if time.monotonic() > deadline:
                raise AssertionError(f"the stream did not end: {out}")
    return out


def follow(client: httpx2.Client, chat_id: str, last: int) -> list[tuple[int, dict[str, Any]]]:
    """Like a browser's EventSource: reconnect with the last id until the answer is known."""
    seen: list[tuple[int, dict[str, Any]]] = []
    for _ in range(5):
        batch = read_until_end(client, chat_id, last)
        seen += batch
        last = batch[-1][0] if batch else last
        final = [e for _, e in batch if e["type"] == "chat:completion" and e["data"].get("done")]
        if final or answer_seen(batch):
            return seen
    raise AssertionError(f"the turn's final event never came: {seen}")


def first_event_after(client: httpx2.Client, chat_id: str, after: int) -> dict[str, Any]:
    """The first event of a stream resumed with `?after=`."""
    decoder = ChatStreamReader()
    url = f"/api/chats/{chat_id}/events"
    with client.stream("GET", url, params={"after": after}) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            for _frame_id, whole in decoder.feed(chunk):
                return dict(whole.to_dict())
    raise AssertionError("the stream ended with no event")


@pytest.mark.parametrize("backend", BACKENDS[:3])
@pytest.mark.parametrize("past_end", [50, 2**64])
def test_an_id_past_the_end_gets_a_snapshot_and_the_whole_next_turn(
    backend: tuple[str, str], past_end: int, tmp_path: Path, upstream: FakeModelServer
) -> None:
    store_kind, bus_kind = backend
    upstream.route(CHAT, SSEReply(chat_chunks(text="first")), SSEReply(chat_chunks(text=WORDS)))
    with database(store_kind, tmp_path) as url:
        settings = make_settings(
            tmp_path, upstream, database_url=url, events_url=events_url(bus_kind)
        )
        with (
            ServerThread(settings) as base_url,
            Running(base_url, upstream, settings).client() as c,
        ):
            chat_id = new_chat(c, model="fake")
            c.post(f"/api/chats/{chat_id}/messages", json={"content": "q1"})
            last = read_events(c, chat_id)[-1][0]
            wait_saved(c, chat_id)
            stale = last + past_end  # from a client of another life of this chat, say
            resumed = read_events(c, chat_id, last=stale, limit=1)
            assert resumed[0][1]["type"] == "chat:snapshot"
            assert first_event_after(c, chat_id, stale)["type"] == "chat:snapshot"
            c.post(f"/api/chats/{chat_id}/messages", json={"content": "q2"})
            assert answer_seen(follow(c, chat_id, stale)) == "".join(WORDS)


def test_the_memory_bus_frees_the_channels_of_chats_only_looked_at(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    settings = make_settings(tmp_path, upstream)
    thread = ServerThread(settings)
    with thread as base_url, Running(base_url, upstream, settings).client() as client:
        bus = services(thread).bus
        assert isinstance(bus, MemoryBus)
        for _ in range(60):
            chat_id = new_chat(client, model="fake")
            assert read_events(client, chat_id, limit=1)[0][1]["type"] == "chat:snapshot"
        deadline = time.monotonic() + 10  # the server sees each client leave on its own time
        while bus.channel_count() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert bus.channel_count() == 0
