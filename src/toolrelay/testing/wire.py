"""Builders for realistic upstream bodies: OpenAI Chat Completions, Responses API, Ollama.

This module owns the *shape* of what real model servers send, so that tests
everywhere build their fixtures from one place instead of hand-writing JSON.
Each builder returns plain dicts (this is the wire edge) and mirrors the
documented format field for field: `chat.completion.chunk` objects as the
OpenAI API streams them (first chunk carries `role`, a tool call's first
fragment carries `id`/`type`/`name` with empty `arguments`, a final chunk
carries `finish_reason`, an optional usage chunk has `choices: []`),
Responses API stream events with `type` and `sequence_number`, and Ollama
`/api/chat` NDJSON lines. It must not do I/O.

The objects themselves (chunks, completions, `response` objects, numbered
events, SSE frames) come from `toolrelay.core.formats`, the renderers the
server answers with, so a fake upstream and our own answers cannot drift apart.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from toolrelay.core.formats.chat_completions.render import (
    chunk,
    chunk_choice,
    completion,
    tool_call,
)
from toolrelay.core.formats.responses.render import EventSequence, response_object
from toolrelay.core.formats.sse import DONE, dumps, sse_data, sse_event

__all__ = [
    "ToolCallSpec",
    "chat_chunks",
    "chat_completion",
    "dumps",
    "ollama_lines",
    "render_ndjson",
    "render_responses_sse",
    "render_sse",
    "responses_events",
    "split_pieces",
]

FIXED_CREATED = 1_700_000_000
"""A fixed `created` timestamp so rendered bodies are reproducible byte for byte."""


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call a fake model makes; `arguments` may be a string (sent verbatim) or a mapping."""

    name: str
    arguments: str | Mapping[str, Any]
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as the model would emit them: a string, never re-encoded if already one."""
        if isinstance(self.arguments, str):
            return self.arguments
        return dumps(self.arguments).decode()


def _hex_id(prefix: str, sep: str = "_") -> str:
    return f"{prefix}{sep}{os.urandom(12).hex()}"


def split_pieces(text: str, pieces: int) -> list[str]:
    """Cut `text` into `pieces` near-equal fragments (at least one; empty text gives [""])."""
    count = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), count)
    out: list[str] = []
    start = 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def _as_pieces(text: str | Sequence[str]) -> list[str]:
    return [text] if isinstance(text, str) else list(text)


# --------------------------------------------------------------------------- chat completions


def chat_chunks(
    *,
    text: str | Sequence[str] = (),
    reasoning: Sequence[str] = (),
    tool_calls: Sequence[ToolCallSpec] = (),
    args_pieces: int = 1,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str = "fake-model",
    reasoning_field: str = "reasoning_content",
    completion_id: str | None = None,
    created: int = FIXED_CREATED,
) -> list[dict[str, Any]]:
    """A streamed Chat Completions response as `chat.completion.chunk` dicts.

    Order is reasoning, then text, then tool calls (index 0, 1, …), then the
    finish chunk, then (if `usage`) a usage chunk with empty `choices`; when
    usage is requested every earlier chunk carries `"usage": null`, as OpenAI
    does with `stream_options.include_usage`.
    """
    cid = completion_id or _hex_id("chatcmpl", "-")
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": "", "refusal": None}]
    deltas += [{reasoning_field: piece} for piece in reasoning]
    deltas += [{"content": piece} for piece in _as_pieces(text)]
    for index, call in enumerate(tool_calls):
        deltas += _tool_call_deltas(index, call, args_pieces)
    if finish_reason is None:
        finish_reason = "tool_calls" if tool_calls else "stop"

    extra: dict[str, Any] = {"system_fingerprint": None}
    if usage is not None:
        extra["usage"] = None

    chunks = [chunk(cid, created, model, [chunk_choice(delta)], **extra) for delta in deltas]
    chunks.append(chunk(cid, created, model, [chunk_choice({}, finish_reason)], **extra))
    if usage is not None:
        chunks.append(chunk(cid, created, model, [], **extra | {"usage": dict(usage)}))
    return chunks


def _tool_call_deltas(index: int, call: ToolCallSpec, args_pieces: int) -> list[dict[str, Any]]:
    """First fragment: id, type, name and `""` arguments; then the arguments in pieces."""
    head = {
        "index": index,
        "id": call.id or _hex_id("call"),
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }
    out: list[dict[str, Any]] = [{"tool_calls": [head]}]
    for piece in split_pieces(call.arguments_json(), args_pieces):
        out.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    return out


def chat_completion(
    *,
    text: str | None = None,
    tool_calls: Sequence[ToolCallSpec] = (),
    reasoning: str | None = None,
    usage: Mapping[str, Any] | None = None,
    finish_reason: str | None = None,
    model: str = "fake-model",
    reasoning_field: str = "reasoning_content",
    completion_id: str | None = None,
    created: int = FIXED_CREATED,
) -> dict[str, Any]:
    """A non-streaming `chat.completion` object; `usage` is included only when given."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text,
        "refusal": None,
        "annotations": [],
    }
    if reasoning is not None:
        message[reasoning_field] = reasoning
    if tool_calls:
        message["tool_calls"] = [
            tool_call(call.id or _hex_id("call"), call.name, call.arguments_json())
            for call in tool_calls
        ]
    if finish_reason is None:
        finish_reason = "tool_calls" if tool_calls else "stop"
    return completion(
        message,
        finish_reason,
        model=model,
        id=completion_id or _hex_id("chatcmpl", "-"),
        created=created,
        usage=usage,
        system_fingerprint=None,
    )


def render_sse(chunks: Iterable[Mapping[str, Any]], done: bool = True) -> bytes:
    """`data: <json>\\n\\n` per chunk, then `data: [DONE]\\n\\n` (WHATWG SSE, OpenAI framing)."""
    body = b"".join(sse_data(c) for c in chunks)
    return body + (DONE if done else b"")


# --------------------------------------------------------------------------- responses API


class _Seq(EventSequence):
    """Numbers events and keeps them, in order."""

    __slots__ = ("events",)

    def __init__(self) -> None:
        super().__init__()
        self.events: list[dict[str, Any]] = []

    def emit(self, type_: str, **fields: Any) -> None:
        self.events.append(self.event(type_, **fields))


def _response_object(
    response_id: str, model: str, created: int, status: str, output: list[dict[str, Any]]
) -> dict[str, Any]:
    return response_object(
        response_id, model=model, created=created, status=status, output=output, store=True
    )


def _emit_reasoning(seq: _Seq, index: int, summary: Sequence[str]) -> dict[str, Any]:
    item_id = _hex_id("rs")
    seq.emit(
        "response.output_item.added",
        output_index=index,
        item={"id": item_id, "type": "reasoning", "summary": []},
    )
    where = {"item_id": item_id, "output_index": index, "summary_index": 0}
    seq.emit(
        "response.reasoning_summary_part.added", **where, part={"type": "summary_text", "text": ""}
    )
    for piece in summary:
        seq.emit("response.reasoning_summary_text.delta", **where, delta=piece)
    full = "".join(summary)
    seq.emit("response.reasoning_summary_text.done", **where, text=full)
    seq.emit(
        "response.reasoning_summary_part.done", **where, part={"type": "summary_text", "text": full}
    )
    item = {"id": item_id, "type": "reasoning", "summary": [{"type": "summary_text", "text": full}]}
    seq.emit("response.output_item.done", output_index=index, item=item)
    return item


def _emit_message(seq: _Seq, index: int, pieces: Sequence[str]) -> dict[str, Any]:
    item_id = _hex_id("msg")
    head = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant"}
    seq.emit("response.output_item.added", output_index=index, item=head | {"content": []})
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    seq.emit(
        "response.content_part.added",
        **where,
        part={"type": "output_text", "text": "", "annotations": []},
    )
    for piece in pieces:
        seq.emit("response.output_text.delta", **where, delta=piece, logprobs=[])
    full = "".join(pieces)
    part = {"type": "output_text", "text": full, "annotations": []}
    seq.emit("response.output_text.done", **where, text=full, logprobs=[])
    seq.emit("response.content_part.done", **where, part=part)
    item = head | {"status": "completed", "content": [part]}
    seq.emit("response.output_item.done", output_index=index, item=item)
    return item


def _emit_function_call(seq: _Seq, index: int, call: ToolCallSpec, pieces: int) -> dict[str, Any]:
    item_id = _hex_id("fc")
    head = {
        "id": item_id,
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": call.id or _hex_id("call"),
        "name": call.name,
    }
    seq.emit("response.output_item.added", output_index=index, item=head)
    args = call.arguments_json()
    where = {"item_id": item_id, "output_index": index}
    for piece in split_pieces(args, pieces):
        seq.emit("response.function_call_arguments.delta", **where, delta=piece)
    seq.emit("response.function_call_arguments.done", **where, arguments=args, name=call.name)
    item = head | {"status": "completed", "arguments": args}
    seq.emit("response.output_item.done", output_index=index, item=item)
    return item


def responses_events(
    *,
    text: str | Sequence[str] = (),
    reasoning_summary: Sequence[str] = (),
    function_calls: Sequence[ToolCallSpec] = (),
    usage: Mapping[str, Any] | None = None,
    response_id: str | None = None,
    model: str = "fake-model",
    args_pieces: int = 1,
    created: int = FIXED_CREATED,
) -> list[dict[str, Any]]:
    """A streamed Responses API response: created, in_progress, items, completed.

    Items come in the order reasoning (if a summary is given), message (if
    text is given), then function calls; `response.completed` repeats the
    full `output` and carries `usage` (null when not given).
    """
    rid = response_id or _hex_id("resp")
    seq = _Seq()
    seq.emit("response.created", response=_response_object(rid, model, created, "in_progress", []))
    seq.emit(
        "response.in_progress", response=_response_object(rid, model, created, "in_progress", [])
    )
    output: list[dict[str, Any]] = []
    if reasoning_summary:
        output.append(_emit_reasoning(seq, len(output), reasoning_summary))
    pieces = _as_pieces(text)
    if pieces:
        output.append(_emit_message(seq, len(output), pieces))
    for call in function_calls:
        output.append(_emit_function_call(seq, len(output), call, args_pieces))
    final = _response_object(rid, model, created, "completed", output)
    final["usage"] = dict(usage) if usage is not None else None
    seq.emit("response.completed", response=final)
    return seq.events


def render_responses_sse(events: Iterable[Mapping[str, Any]]) -> bytes:
    """`event: <type>\\ndata: <json>\\n\\n` per event; the Responses API sends no `[DONE]`."""
    return b"".join(sse_event(str(e["type"]), e) for e in events)


# --------------------------------------------------------------------------- ollama


DEFAULT_OLLAMA_COUNTS: Mapping[str, int] = {
    "total_duration": 1_000_000_000,
    "load_duration": 1_000_000,
    "prompt_eval_count": 10,
    "prompt_eval_duration": 100_000_000,
    "eval_count": 20,
    "eval_duration": 800_000_000,
}


def ollama_lines(
    *,
    text: str | Sequence[str] = (),
    thinking: Sequence[str] = (),
    tool_calls: Sequence[ToolCallSpec] = (),
    done_reason: str = "stop",
    counts: Mapping[str, int] = DEFAULT_OLLAMA_COUNTS,
    model: str = "fake-model",
    created_at: str = "2024-01-01T00:00:00.000000Z",
) -> list[dict[str, Any]]:
    """Ollama `/api/chat` streaming lines: thinking, text, tool calls (whole, object args), done.

    Ollama sends each tool call complete in one line with `arguments` as a
    JSON object (not a string); `id` is included only when the spec has one.
    """

    def line(message: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": model,
            "created_at": created_at,
            "message": {"role": "assistant", "content": ""} | message,
            "done": False,
        }

    out = [line({"thinking": piece}) for piece in thinking]
    out += [line({"content": piece}) for piece in _as_pieces(text)]
    for index, call in enumerate(tool_calls):
        out.append(line({"tool_calls": [_ollama_call(index, call)]}))
    final = line({})
    final |= {"done": True, "done_reason": done_reason, **counts}
    out.append(final)
    return out


def _ollama_call(index: int, call: ToolCallSpec) -> dict[str, Any]:
    arguments: Any = call.arguments
    if isinstance(arguments, str):
        arguments = orjson.loads(arguments) if arguments else {}
    body: dict[str, Any] = {"function": {"index": index, "name": call.name, "arguments": arguments}}
    if call.id is not None:
        body["id"] = call.id
    return body


def render_ndjson(lines: Iterable[Mapping[str, Any]]) -> bytes:
    """One compact JSON object per line, each ending in `\\n`."""
    return b"".join(dumps(line) + b"\n" for line in lines)
