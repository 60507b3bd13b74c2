"""CPU per conversation through `Relay.run`, against a hand-written httpx2 + orjson loop.

Both talk to the same in-process fake upstream: an httpx2 `MockTransport`
serving pre-rendered Chat Completions SSE, one event per network read. A
scenario is (tool rounds, argument chunks per call, text chunks of the final
answer). The baseline is the least a loop can do: stream, split lines,
`orjson.loads`, append text and arguments, call the tool, repeat. Target
(issue 15): Relay ≤ 0.8× the baseline.

CPU time on a shared machine moves by ±30 % between runs; instruction counts
do not. `python -m benchmarks.engine_loop --callgrind` runs each contender
under `valgrind --tool=callgrind` with only the measured conversations
instrumented (they run inside a ctypes callback, and callgrind collects only
within `ffi_call`), after warm-up conversations on the same event loop and
client; `BENCH_BEFORE_SRC=<checkout>/src` adds another tree in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
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


def transport(replies: list[list[bytes]]) -> httpx2.MockTransport:
    async def handler(request: httpx2.Request) -> httpx2.Response:
        sent = orjson.loads(request.content)
        round_no = sum(1 for m in sent["messages"] if m.get("role") == "tool")
        pieces = replies[round_no]

        async def stream() -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=stream())

    return httpx2.MockTransport(handler)


async def baseline(client: httpx2.AsyncClient) -> str:
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
    async with httpx2.AsyncClient(transport=transport(replies)) as client:
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


ROOT = Path(__file__).resolve().parents[1]
KINDS = ("baseline", "run", "stream")


async def _loops(
    kind: str, replies: list[list[bytes]]
) -> tuple[Callable[[int], Coroutine[Any, Any, None]], Callable[[], Coroutine[Any, Any, None]]]:
    """`conversations(n)` on one long-lived client or relay, and its `close()`."""
    if kind == "baseline":
        client = httpx2.AsyncClient(transport=transport(replies))

        async def base(n: int) -> None:
            for _ in range(n):
                await baseline(client)

        return base, client.aclose
    model = OpenAIChat(
        base_url="http://fake", model="m", http=HTTPOptions(transport=transport(replies))
    )
    relay = Relay(model, [lookup], limits=RunLimits(max_iterations=64))

    async def relayed(n: int) -> None:
        for _ in range(n):
            if kind == "run":
                result = await relay.run("go")
                assert result.status == "completed", result.error
            else:
                async for event in relay.stream("go"):
                    last = event
                assert last.data.get("status") == "completed"

    return relayed, relay.aclose


def callgrind_child(kind: str, scenario: tuple[int, int, int], measured: int) -> None:
    """Two warm-up conversations, then `measured` inside `ffi_call` (the instrumented part)."""
    replies = bodies(*scenario)
    loop = asyncio.new_event_loop()
    conversations, close = loop.run_until_complete(_loops(kind, replies))
    loop.run_until_complete(conversations(2))
    callback = ctypes.CFUNCTYPE(None)(lambda: loop.run_until_complete(conversations(measured)))
    callback()
    loop.run_until_complete(close())
    loop.close()


def instructions(src: str, kind: str, scenario: tuple[int, int, int], measured: int) -> float:
    """Instructions per conversation, counted by callgrind in a fresh process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(ROOT)]), "PYTHONHASHSEED": "0"}
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        "--collect-atstart=no",
        "--toggle-collect=ffi_call",
        sys.executable,
        "-m",
        "benchmarks.engine_loop",
        "--child",
        kind,
        ",".join(map(str, scenario)),
        str(measured),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found, done.stderr[-2000:]
    return int(found.group(1)) / measured


def run_callgrind(
    trees: dict[str, str], scenarios: tuple[tuple[int, int, int], ...], jobs: int
) -> None:
    print(
        "\nengine loop: instructions per conversation (callgrind), ratio to the hand-written loop"
    )
    print(f"{'rounds×args×text':<18}{'tree':<8}{'baseline':>10}{'run':>8}{'stream':>8}")
    with ThreadPoolExecutor(jobs) as pool:  # each valgrind is its own process
        counts = {
            (scenario, name, kind): pool.submit(
                instructions,
                src,
                kind,
                scenario,
                max(1, 4000 // (scenario[0] * scenario[1] + scenario[2])),
            )
            for scenario in scenarios
            for name, src in trees.items()
            for kind in KINDS
        }
        for scenario in scenarios:
            label = "×".join(map(str, scenario))
            for name in trees:
                base, ours, streamed = (counts[scenario, name, k].result() for k in KINDS)
                print(
                    f"{label:<18}{name:<8}{base / 1e6:>9.2f}M"
                    f"{ours / base:>7.3f}×{streamed / base:>7.3f}×",
                    flush=True,
                )
                label = ""


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine_loop")
    parser.add_argument("--callgrind", action="store_true", help="count instructions")
    parser.add_argument("--rows", help="scenarios as r×a×t,… (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="valgrinds at once")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, scenario, measured = args.child
        rounds, arg_chunks, text_chunks = (int(x) for x in scenario.split(","))
        callgrind_child(kind, (rounds, arg_chunks, text_chunks), int(measured))
        return
    scenarios = SCENARIOS
    if args.rows:
        scenarios = tuple(
            (int(r), int(a), int(t))
            for r, a, t in (row.replace("x", "×").split("×") for row in args.rows.split(","))
        )
    if not args.callgrind:
        run()
        return
    trees = {"ours": str(ROOT / "src")}
    if os.environ.get("BENCH_BEFORE_SRC"):
        trees["before"] = os.environ["BENCH_BEFORE_SRC"]
    run_callgrind(trees, scenarios, args.jobs)


def run(*, quick: bool = False) -> None:
    repeat = 3 if quick else 9
    print("\nengine loop: CPU ms per conversation, Relay.run vs a hand-written httpx2+orjson loop")
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


if __name__ == "__main__":
    main()
