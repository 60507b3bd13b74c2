"""The IPC framing without sockets: bytes in, messages out, however the bytes are cut."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrelay.adapters.events.ipc import frames
from toolrelay.adapters.events.ipc.frames import MAX_FRAME, FrameError, FrameReader, frame

MESSAGES: list[list[Any]] = [
    [1, "pub", "chat_1", {"type": "t", "data": {"delta": "x" * 70_000}}],
    [2, "ping"],
    [3, "e", 2**62, {"type": "t", "data": {"s": "\u2603", "n": [1.5, None, True]}}],
    [4, None],
]


@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 20), max_size=30))
def test_any_cutting_of_the_stream_yields_the_same_messages(cuts: list[int]) -> None:
    stream = b"".join(frame(m) for m in MESSAGES)
    points = sorted({c % (len(stream) + 1) for c in cuts})
    reader = FrameReader()
    got: list[Any] = []
    for start, end in zip([0, *points], [*points, len(stream)], strict=True):
        got += reader.feed(stream[start:end])
    assert got == MESSAGES


def test_a_large_frame_fed_byte_by_byte_is_read_once_complete() -> None:
    payload = frame(MESSAGES[0])
    reader = FrameReader()
    assert all(reader.feed(payload[i : i + 1]) == [] for i in range(len(payload) - 1))
    assert reader.feed(payload[-1:]) == [MESSAGES[0]]


@pytest.mark.parametrize(
    "data",
    [(MAX_FRAME + 1).to_bytes(4, "big"), b"\x00\x00\x00\x03{x}", b"\x00\x00\x00\x02\xff\xfe"],
    ids=["over the limit", "not json", "not utf-8"],
)
def test_a_malformed_frame_raises(data: bytes) -> None:
    with pytest.raises(FrameError):
        FrameReader().feed(frame([1, "ping"]) + data)


def test_an_oversized_message_is_refused_before_it_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(frames, "MAX_FRAME", 100)  # a real one would take 256 MiB
    frame([1, "pub", "c", {"type": "t", "data": {"blob": "x" * 50}}])
    with pytest.raises(ValueError, match="limit"):
        frame([1, "pub", "c", {"type": "t", "data": {"blob": "x" * 100}}])
