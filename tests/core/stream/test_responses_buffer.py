"""core.stream.responses_buffer: the continuation hot path is really taken."""

from __future__ import annotations

from typing import Any

from toolrelay.core.items import as_items, raw_items
from toolrelay.core.stream.responses_buffer import DeltaBuffer

_KIND = "response.output_text.delta"


def text_delta(text: str, index: int = 0, part: int = 0) -> dict[str, Any]:
    return {
        "type": "response.output_text.delta",
        "output_index": index,
        "content_index": part,
        "delta": text,
    }


def test_more_of_the_same_part_continues_without_looking_at_the_items() -> None:
    items = [{"type": "message", "content": [{"type": "output_text", "text": "a"}]}]
    buffer = DeltaBuffer()
    assert buffer.take(text_delta("b"), _KIND, items)
    # the hot path: same event type, item and part as the last delta; `items` is not read
    assert buffer.take(text_delta("c"), _KIND, [])
    assert not buffer.take(text_delta("d", part=1), _KIND, [])  # another part: the full check
    assert raw_items(buffer.fold(as_items(items)))[0]["content"][0]["text"] == "abc"
