"""What recognising tool calls written as text costs (issue 14), µs per chunk.

Each row reads one body with `BodyReader` twice in the same run, alternating
(CPU time of this thread, best of N: the machine is shared and busy):
`text_tool_calls` off (no `text_tools`) and on (the tools offered). Plain text
with the feature on must cost the same as with it off (target ≤ 1.03×): the
content is known to be text at its first character, after which the plain
accumulator runs. A call written as text in 1-character chunks is the worst
case: it is held and checked character by character, then parsed once; a
200 KB call in 4-character chunks shows that holding costs the same per chunk
however much is held (no quadratic copying).
"""

from __future__ import annotations

import time

import orjson

from benchmarks.core_stream import READ, chat_body
from benchmarks.timing import interleaved
from toolrelay.core.stream.reader import BodyReader

TOOLS = ("search", "get_weather")
CALL = '```json\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n```'


def _sse(pieces: list[str]) -> bytes:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    out = [
        b"data: "
        + orjson.dumps({**base, "choices": [{"index": 0, "delta": {"content": p}}]})
        + b"\n\n"
        for p in pieces
    ]
    end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return b"".join(out) + b"data: " + orjson.dumps(end) + b"\n\ndata: [DONE]\n\n"


def text_body(chunks: int = 2000) -> bytes:
    """A plain answer: `chunks` text deltas of a word each."""
    return _sse([f"word{i} " for i in range(chunks)])


def call_body(repeat: int = 25) -> bytes:
    """Calls written as text, one character per chunk (`repeat` calls, one per line)."""
    return _sse(list("\n".join([CALL] * repeat)))


def long_call_body(size: int = 200_000, piece: int = 4) -> bytes:
    """One call whose argument is `size` characters, in `piece`-character chunks: the held
    text grows to 200 KB, so any per-chunk copy of it would show as a quadratic."""
    call = orjson.dumps({"name": "get_weather", "arguments": {"city": "x" * size}}).decode()
    return _sse([call[i : i + piece] for i in range(0, len(call), piece)])


def read(body: bytes, tools: tuple[str, ...]) -> int:
    reader = BodyReader("sse", text_tools=tools)
    n = 0
    for i in range(0, len(body), READ):
        n += len(reader.feed(body[i : i + READ]))
    return n + len(reader.finish())


def chunks_of(body: bytes) -> int:
    return body.count(b"\n\ndata: ")


def run(*, quick: bool = False) -> None:
    repeat = 5 if quick else 60
    print(
        "text tool calls: BodyReader CPU µs per chunk, feature off vs on (best of",
        repeat,
        "runs)",
    )
    print(f"{'body':<22}{'chunks':>8}{'off µs':>9}{'on µs':>9}{'ratio':>8}")
    bodies = (("plain text", text_body()), ("chat (mixed)", chat_body(2000)))
    worst = (("calls as text, 1 char", call_body()), ("200 KB call, 4 chars", long_call_body()))
    for name, body in (*bodies, *worst):
        best = interleaved(
            {"off": lambda b=body: read(b, ()), "on": lambda b=body: read(b, TOOLS)},  # type: ignore[misc]
            repeat,
            time.thread_time,
        )
        n = chunks_of(body)
        off, on = best["off"] / n * 1e6, best["on"] / n * 1e6
        print(f"{name:<22}{n:>8}{off:>9.2f}{on:>9.2f}{on / off:>7.2f}×")
