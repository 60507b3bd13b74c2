"""A chat's event stream ends when its bus goes away, so the client reconnects.

The real inter-process bus: its host (a thread here, the parent process under
`serve --workers`) is closed while a turn streams. The SSE response must end (the
web page then reconnects with its Last-Event-ID), not send keep-alives forever.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat
from toolrelay.adapters.events.ipc import BusHost
from toolrelay.events import ChatStreamReader
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

CHAT = "/v1/chat/completions"


@pytest.fixture
def host() -> Iterator[BusHost]:
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:  # a short path: sockets need one
        bus_host = BusHost(Path(folder) / "bus.sock")
        bus_host.start()
        try:
            yield bus_host
        finally:
            bus_host.close()


def test_the_event_stream_ends_when_the_bus_goes_away(
    tmp_path: Path, upstream: FakeModelServer, host: BusHost
) -> None:
    stalled = SSEReply(chat_chunks(text=["partial ", "words ", "end"]), stall_after=3)
    upstream.route(CHAT, stalled)
    settings = make_settings(tmp_path, upstream, events_url=f"ipc://{host.path}")
    with ServerThread(settings) as base_url, Running(base_url, upstream, settings).client() as c:
        chat_id = new_chat(c, model="fake")
        assert c.post(f"/api/chats/{chat_id}/messages", json={"content": "go"}).status_code == 202
        types: list[str] = []
        decoder = ChatStreamReader()
        with c.stream("GET", f"/api/chats/{chat_id}/events") as response:
            for chunk in response.iter_bytes():  # a stream that never ends: ReadTimeout
                for _frame_id, whole in decoder.feed(chunk):
                    types.append(whole.to_dict()["type"])
                    if types[-1] == "response.output_text.delta" and types.count(types[-1]) == 1:
                        host.close()  # the bus goes away mid-turn
        assert "response.output_text.delta" in types
        assert "chat:completion" not in types  # it ended because the bus did, not the turn
