"""µs per chunk through framing + accumulator, against a bare `orjson.loads` floor.

Floor: split the same body into lines and `orjson.loads` each data line,
nothing else. Ours: `BodyReader` fed in 4 KiB network-sized reads, events
included. Process CPU time, so a busy machine's waits are not counted.
Target (issue 15): ≤ 2× the floor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import orjson

from benchmarks.timing import interleaved
from toolrelay.core.stream.reader import BodyReader

READ = 4096


def chat_body(chunks: int = 5000) -> bytes:
    """A chat-completions stream: reasoning, text, then 3 parallel tool calls."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    out: list[bytes] = []

    def emit(delta: dict[str, object], finish: str | None = None) -> None:
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        out.append(b"data: " + orjson.dumps(chunk) + b"\n\n")

    n_reason, n_text = chunks * 3 // 10, chunks * 5 // 10
    n_args = chunks - n_reason - n_text - 1
    for i in range(n_reason):
        emit({"reasoning_content": f"step {i} "})
    for i in range(n_text):
        emit({"content": f"word{i} "})
    calls = 3
    for c in range(calls):
        emit(
            {
                "tool_calls": [
                    {
                        "index": c,
                        "id": f"call_{c}",
                        "type": "function",
                        "function": {"name": "search", "arguments": ""},
                    }
                ]
            }
        )
    for i in range(n_args - calls):
        c = i % calls
        emit({"tool_calls": [{"index": c, "function": {"arguments": f'"k{i}":{i},'}}]})
    emit({}, "tool_calls")
    return b"".join(out) + b"data: [DONE]\n\n"


def responses_body(chunks: int = 5000) -> bytes:
    """A Responses API stream: reasoning summary, text and one function call."""
    out: list[bytes] = []
    seq = 0

    def emit(event: dict[str, object]) -> None:
        nonlocal seq
        event["sequence_number"] = seq
        seq += 1
        out.append(
            b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
        )

    emit(
        {
            "type": "response.created",
            "response": {"id": "resp_1", "status": "in_progress", "output": []},
        }
    )
    rs = {"type": "reasoning", "id": "rs_1", "summary": []}
    emit({"type": "response.output_item.added", "output_index": 0, "item": rs})
    emit(
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs_1",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        }
    )
    third = chunks // 3
    for i in range(third):
        emit(
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": "rs_1",
                "output_index": 0,
                "summary_index": 0,
                "delta": f"step {i} ",
            }
        )
    msg = {
        "type": "message",
        "id": "msg_1",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    emit({"type": "response.output_item.added", "output_index": 1, "item": msg})
    emit(
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
        }
    )
    for i in range(third):
        emit(
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 1,
                "content_index": 0,
                "delta": f"word{i} ",
            }
        )
    fc = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "search",
        "arguments": "",
        "status": "in_progress",
    }
    emit({"type": "response.output_item.added", "output_index": 2, "item": fc})
    for i in range(chunks - 2 * third):
        emit(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 2,
                "delta": f"k{i},",
            }
        )
    emit(
        {
            "type": "response.completed",
            "response": {
                "id": "resp_1",
                "status": "completed",
                "output": [],
                "usage": {"input_tokens": 10, "output_tokens": chunks, "total_tokens": 10 + chunks},
            },
        }
    )
    return b"".join(out)


def floor(body: bytes) -> int:
    n = 0
    for line in body.split(b"\n"):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            orjson.loads(line[6:])
            n += 1
    return n


def ours(body: bytes) -> int:
    reader = BodyReader("sse")
    n = 0
    for i in range(0, len(body), READ):
        n += len(reader.feed(body[i : i + READ]))
    n += len(reader.finish())
    return n


def run(*, quick: bool = False) -> None:
    repeat = 3 if quick else 15
    print("core stream: framing + accumulator, CPU µs per chunk (best of", repeat, "runs)")
    print(f"{'stream':<12}{'chunks':>8}{'floor µs':>10}{'ours µs':>10}{'ratio':>8}")
    for name, body in (("chat", chat_body()), ("responses", responses_body())):
        chunks = floor(body)
        contenders: dict[str, Callable[[], object]] = {
            "floor": partial(floor, body),
            "ours": partial(ours, body),
        }
        best = interleaved(contenders, repeat, clock=time.thread_time)
        f_us, o_us = best["floor"] / chunks * 1e6, best["ours"] / chunks * 1e6
        print(f"{name:<12}{chunks:>8}{f_us:>10.2f}{o_us:>10.2f}{o_us / f_us:>7.2f}×")
