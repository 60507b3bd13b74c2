"""What toolrelay writes in Chat Completions form: chunks, the completion, a turn's answer.

One builder per object (`chunk`, `chunk_choice`, `completion`, `tool_call`)
serves the server's answers and the test doubles' fake upstreams alike;
`ChunkWriter` is the same chunk pre-encoded for the hot path (a test holds
the two byte-equal). `ChatStream` turns a turn's events into the streamed
answer; `completion_for` is the non-streamed one. Both take their finish
reason, tool calls and errors from `answer.turn_answer`, and nothing else.

Extension (ours, ignored by OpenAI clients): a capped turn's answer carries
`"toolrelay": {"status": "capped", "error": "<the cap error>"}` beside its
`finish_reason: length`, on the completion and on the streamed finish chunk;
`toolrelay_events` streams the loop's other events as `choices: []` chunks
under the key `toolrelay`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

import orjson

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.answer import TurnAnswer, final_answer
from toolrelay.core.formats.sse import DONE, dumps, sse_data
from toolrelay.core.ids import new_id
from toolrelay.core.items import Item

__all__ = [
    "EXTENSION_KEY",
    "ChatStream",
    "ChunkWriter",
    "answer_message",
    "chunk",
    "chunk_choice",
    "completion",
    "completion_for",
    "completion_id",
    "openai_usage",
    "tool_call",
]

EXTENSION_KEY: Final = "toolrelay"


def completion_id() -> str:
    """`chatcmpl-<24 hex>`, the id shape OpenAI uses."""
    return new_id("chatcmpl").replace("_", "-")


def tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """One entry of a message's `tool_calls`; missing arguments are `{}`."""
    function = {"name": name, "arguments": arguments or "{}"}
    return {"id": call_id, "type": "function", "function": function}


def _item_call(item: Item) -> dict[str, Any]:
    return tool_call(item.get("call_id"), item.get("name"), item.get("arguments"))


def chunk_choice(delta: Mapping[str, Any], finish: str | None = None) -> dict[str, Any]:
    """The single choice of a chunk."""
    return {"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish}


def chunk(
    id: str, created: int, model: str, choices: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """A `chat.completion.chunk`; `extra` adds top-level keys after `choices`."""
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    }
    body.update(extra)
    return body


def completion(
    message: Mapping[str, Any],
    finish_reason: str,
    *,
    model: str,
    id: str | None = None,
    created: int | None = None,
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A non-streamed `chat.completion`; `usage` only when given, `extra` at top level."""
    body: dict[str, Any] = {
        "id": id or completion_id(),
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": [
            {"index": 0, "message": dict(message), "logprobs": None, "finish_reason": finish_reason}
        ],
    }
    if usage is not None:
        body["usage"] = dict(usage)
    body.update(extra)
    return body


def openai_usage(usage: Mapping[str, Any]) -> dict[str, int]:
    """A turn's usage (Responses names) as Chat Completions usage."""
    prompt = int(usage.get("input_tokens") or 0)
    completion_tokens = int(usage.get("output_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": int(usage.get("total_tokens") or prompt + completion_tokens),
    }


def answer_message(answer: TurnAnswer) -> dict[str, Any]:
    """The assistant message of a non-streamed answer."""
    message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
    if answer.reasoning:
        message["reasoning_content"] = answer.reasoning
    if answer.tool_calls:
        message["tool_calls"] = [_item_call(c) for c in answer.tool_calls]
    return message


def _extension(answer: TurnAnswer) -> dict[str, Any]:
    if answer.notice is None:
        return {}
    return {EXTENSION_KEY: {"status": answer.status, "error": answer.notice}}


def completion_for(answer: TurnAnswer, model: str) -> dict[str, Any]:
    """The non-streamed answer (the caller answers `answer.failure` with an error instead)."""
    return completion(
        answer_message(answer),
        answer.finish_reason,
        model=model,
        usage=openai_usage(answer.usage),
        **_extension(answer),
    )


def error_frame(answer: TurnAnswer) -> bytes:
    """A failed streamed answer's last frame before `[DONE]` (OpenAI's in-stream error)."""
    error = {"message": answer.failure, "type": "upstream_error", "code": answer.status}
    return sse_data({"error": error})


class ChunkWriter:
    """SSE frames of one streamed answer's chunks; the shared head is encoded once."""

    __slots__ = ("_head",)

    def __init__(self, model: str, *, id: str | None = None, created: int | None = None) -> None:
        when = int(time.time()) if created is None else created
        self._head = (
            b'{"id":'
            + orjson.dumps(id or completion_id())
            + b',"object":"chat.completion.chunk","created":'
            + str(when).encode()
            + b',"model":'
            + orjson.dumps(model)
            + b',"choices":'
        )

    def delta(self, delta: Mapping[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        """A chunk with one choice; `extra` adds top-level keys."""
        body = self._head + dumps([chunk_choice(delta, finish)])
        for key, value in extra.items():
            body += b"," + orjson.dumps(key) + b":" + dumps(value)
        return b"data: " + body + b"}\n\n"

    def extra(self, key: str, value: Any) -> bytes:
        """A chunk with no choice, carrying `key` (usage, our extension)."""
        return b"data: " + self._head + b"[]," + orjson.dumps(key) + b":" + dumps(value) + b"}\n\n"


class ChatStream:
    """A turn's events -> its streamed Chat Completions answer (sans-IO).

    `start()` is the first frame; `feed(event)` returns the frames for one
    event (often none) and sets `done` at the turn's final event.
    """

    __slots__ = ("_chunks", "_events", "_text_item", "_usage", "done")

    def __init__(self, model: str, *, include_usage: bool = False, events: bool = False) -> None:
        self._chunks = ChunkWriter(model)
        self._usage = include_usage
        self._events = events
        self._text_item: str | None = None
        self.done = False

    def start(self) -> bytes:
        return self._chunks.delta({"role": "assistant", "content": ""})

    def feed(self, event: Event) -> bytes:
        kind, data = event.type, event.data
        if kind == ev.OUTPUT_TEXT_DELTA:
            delta = data["delta"]
            if data["item_id"] != self._text_item:
                if self._text_item is not None:  # message items join as `output_text` does
                    delta = "\n\n" + delta
                self._text_item = data["item_id"]
            return self._chunks.delta({"content": delta})
        if kind == ev.REASONING_TEXT_DELTA:
            return self._chunks.delta({"reasoning_content": data["delta"]})
        if kind == ev.CHAT_COMPLETION and data.get("done"):
            self.done = True
            return self.finish(final_answer(data))
        if self._events and kind not in ev.DELTA_EVENTS:
            return self._chunks.extra(EXTENSION_KEY, event.to_dict())
        return b""

    def finish(self, answer: TurnAnswer) -> bytes:
        """The closing frames: calls, the finish chunk, usage, `[DONE]` (or the error)."""
        if answer.failure is not None:
            return error_frame(answer) + DONE
        out = b""
        if answer.finish_reason == "tool_calls":
            calls = [{"index": n, **_item_call(c)} for n, c in enumerate(answer.tool_calls)]
            out += self._chunks.delta({"tool_calls": calls})
        out += self._chunks.delta({}, answer.finish_reason, **_extension(answer))
        if self._usage:
            out += self._chunks.extra("usage", openai_usage(answer.usage))
        return out + DONE
