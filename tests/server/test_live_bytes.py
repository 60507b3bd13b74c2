"""What a turn costs on the wire: the bytes of its event stream against its answer's text
(issue 31, item 6: at most 2x).

A real server, a real fake model streaming N words; the chat's SSE stream is read from
before the first word (the upstream holds its first piece until the reader is in) to the
turn's end (`chat:completion`), and every byte of it after the opening snapshot is
counted, with the default coalescing. It was 5.8x the text when the final event repeated
the items, 4.1-4.4x when `output_item.done` still repeated the text and each delta's
frame spent ~190 bytes around ~100 of text; now 1.5-1.8x (docs/scaling.md): the item's
`done` refers to the deltas this reader was sent, a delta's frame names neither its type
in `data` nor its place when unchanged, and deltas merge up to 32 chunks.
"""

from __future__ import annotations

import threading

import httpx2
import pytest

from tests.patience import HANG
from tests.server.conftest import Running
from tests.server.test_chats_api import CHAT, new_chat, wait_saved
from toolrelay.testing.fake_server import SSEReply
from toolrelay.testing.wire import chat_chunks

WORD = "token "


def _turn_bytes(running: Running, words: int) -> tuple[int, int, list[str]]:
    """(bytes of the turn's events, bytes of its text, the event types)."""
    release = threading.Event()
    text = [WORD] * words
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=text), holds={0: release}))
    answer = "".join(text)
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "talk"})
        sizes: list[int] = []
        types: list[str] = []
        timeout = httpx2.Timeout(HANG)
        with client.stream("GET", f"/api/chats/{chat_id}/events", timeout=timeout) as stream:
            frame = b""
            for chunk in stream.iter_bytes():
                frame += chunk
                while b"\n\n" in frame:
                    one, frame = frame.split(b"\n\n", 1)
                    sizes.append(len(one) + 2)
                    types.append(_type(one))
                    release.set()  # the reader is in (its snapshot came): the answer may go
        saved = wait_saved(client, chat_id)
    assert saved["content"] == answer
    assert types[0] == "chat:snapshot", types[:3]
    end = types.index("chat:completion") + 1  # a title may come after: not the answer's
    by_type: dict[str, int] = {}
    for kind, size in zip(types[1:end], sizes[1:end], strict=True):
        by_type[kind] = by_type.get(kind, 0) + size
    print(f"\n{words} words, bytes by event type: {by_type}")
    return sum(sizes[1:end]), len(answer.encode()), types[:end]


def _type(frame: bytes) -> str:
    """The frame's `event:` line (a delta's `data` carries no `type`)."""
    lines = frame.split(b"\n")
    return next((line[7:].decode() for line in lines if line.startswith(b"event: ")), "")


@pytest.mark.parametrize("words", [500, 5000])
def test_a_turns_live_bytes_stay_within_twice_its_text(running: Running, words: int) -> None:
    live, text, types = _turn_bytes(running, words)
    ratio = live / text
    print(f"{words} words: {live:,} bytes live for {text:,} of text: {ratio:.2f}x")
    assert types.count("response.output_item.done") == 1  # one item, done once
    assert ratio <= 2.0, f"{live:,} bytes live for {text:,} bytes of text ({ratio:.2f}x)"
