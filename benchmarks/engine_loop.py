"""CPU per conversation through `Relay.run`, against a hand-written httpx + orjson loop.

Both talk to the same in-process fake upstream: an httpx `MockTransport`
serving pre-rendered Chat Completions SSE, one event per network read. A
scenario is (tool rounds, argument chunks per call, text chunks of the final
answer). The baseline is the least a loop can do: stream, split lines,
`orjson.loads`, append text and arguments, call the tool, repeat. Target
(issue 3): Relay ≤ 1.5× the baseline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from toolrelay import OpenAIChat, Relay, RunLimits, tool
from toolrelay.adapters.models import HTTPOptions
from toolrelay.testing.wire import ToolCallSpec, chat_chunks, render_sse

SCENARIOS = ((1, 10, 50), (3, 40, 400), (1, 20, 5000), (20, 10, 20))


@tool
async def lookup(q: str, n: int = 0) -> str:
    """Look something up (async: both loops call it inline, on the event loop)."""
    return f"result for {q}"


def bodies(rounds: int, arg_chunks: int, text_chunks: int) -> list[list[bytes]]:
    """One pre-rendered body per model call, already cut into per-event reads."""
    args = orjson.dumps({"q": "x" * (4 * arg_chunks), "n": 1}).decode()
    out = []
    for r in range(rounds):
        args_r = args.replace('"n":1', f'"n":{r}')
        call = ToolCallSpec("lookup", args_r, id=f"call_{r}")
        out.append(render_sse(chat_chunks(tool_calls=[call], args_pieces=arg_chunks)))
    out.append(render_sse(chat_chunks(text=[f"w{i} " for i in range(text_chunks)])))
    return [[e + b"\n\n" for e in body.split(b"\n\n") if e] for body in out]


def transport(replies: list[list[bytes]]) -> httpx.MockTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        sent = orjson.loads(request.content)
        round_no = sum(1 for m in sent["messages"] if m.get("role") == "tool")
        pieces = replies[round_no]

        async def stream() -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())

    return httpx.MockTransport(handler)


async def baseline(client: httpx.AsyncClient) -> str:
    """A minimal native tool loop: no events, no items, no validation."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    while True:
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        body = {"model": "m", "messages": messages, "stream": True}
        async with client.stream("POST", "http://fake/v1/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = orjson.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content"):
                    text.append(delta["content"])
                for tc in delta.get("tool_calls") or ():
                    call = calls.setdefault(
                        tc["index"], {"id": tc.get("id"), "name": "", "args": []}
                    )
                    fn = tc.get("function") or {}
                    call["name"] = fn.get("name") or call["name"]
                    call["args"].append(fn.get("arguments") or "")
        if not calls:
            return "".join(text)
        assistant = {"role": "assistant", "content": "".join(text) or None, "tool_calls": []}
        results = []
        for call in calls.values():
            arguments = "".join(call["args"])
            assistant["tool_calls"].append(
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": arguments},
                }
            )
            content = await lookup.fn(**orjson.loads(arguments))
            results.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        messages += [assistant, *results]


async def base_runs(replies: list[list[bytes]], conversations: int) -> None:
    async with httpx.AsyncClient(transport=transport(replies)) as client:
        for _ in range(conversations):
            await baseline(client)


async def relay_runs(replies: list[list[bytes]], conversations: int) -> None:
    model = OpenAIChat(
        base_url="http://fake", model="m", http=HTTPOptions(transport=transport(replies))
    )
    relay = Relay(model, [lookup], limits=RunLimits(max_iterations=64))
    for _ in range(conversations):
        result = await relay.run("go")
        assert result.status == "completed", result.error
    await relay.aclose()


async def stream_runs(replies: list[list[bytes]], conversations: int) -> None:
    """The same through `Relay.stream`, every event consumed (what a UI pays)."""
    model = OpenAIChat(
        base_url="http://fake", model="m", http=HTTPOptions(transport=transport(replies))
    )
    relay = Relay(model, [lookup], limits=RunLimits(max_iterations=64))
    for _ in range(conversations):
        async for event in relay.stream("go"):
            last = event
        assert last.data.get("status") == "completed"
    await relay.aclose()


def cpu_ms(run: Any, replies: list[list[bytes]], conversations: int, repeat: int) -> float:
    """Best-of-`repeat` process CPU time per conversation, in ms."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        asyncio.run(run(replies, conversations))
        best = min(best, time.process_time() - start)
    return best * 1000 / conversations


def run(*, quick: bool = False) -> None:
    repeat = 3 if quick else 9
    print("\nengine loop: CPU ms per conversation, Relay.run vs a hand-written httpx+orjson loop")
    print(
        f"{'rounds×args×text':<18}{'baseline ms':>12}{'run ms':>8}{'ratio':>7}"
        f"{'stream ms':>11}{'ratio':>7}"
    )
    for rounds, arg_chunks, text_chunks in SCENARIOS:
        replies = bodies(rounds, arg_chunks, text_chunks)
        conversations = max(1, 2000 // (rounds * arg_chunks + text_chunks))
        b = o = s = float("inf")
        for _ in range(repeat):  # interleaved, so machine noise hits all alike
            b = min(b, cpu_ms(base_runs, replies, conversations, 1))
            o = min(o, cpu_ms(relay_runs, replies, conversations, 1))
            s = min(s, cpu_ms(stream_runs, replies, conversations, 1))
        label = f"{rounds}×{arg_chunks}×{text_chunks}"
        print(f"{label:<18}{b:>12.3f}{o:>8.3f}{o / b:>6.2f}×{s:>11.3f}{s / b:>6.2f}×")
