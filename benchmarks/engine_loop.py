"""CPU per conversation through `Relay`, against hand-written loops on httpx2 and aiohttp.

Every contender talks to the same fake upstream, in its own process, over a
real socket: pre-rendered Chat Completions SSE, one event per chunk, PACE_S
apart (so a read is an event, as when a model streams). A scenario is (tool
rounds, argument chunks per call, text chunks of the final answer). The
hand-written loops are the least a loop can do on each library: stream, split
lines, `orjson.loads`, append text and arguments, call the tool, repeat.
Targets (issue 25): `Relay.run` at or below 0.8x the httpx2 loop, in
instructions; its ratio to the aiohttp loop is reported beside it.

CPU time on a shared machine moves by ±30 % between runs; instruction counts
do not. `python -m benchmarks.engine_loop --callgrind` runs each contender
under `valgrind --tool=callgrind` with only the measured conversations
instrumented (they run inside a ctypes callback, and callgrind collects only
within `ffi_call`), after warm-up conversations on the same event loop and
client; the upstream is another process, never counted.
`BENCH_BEFORE_SRC=<checkout>/src` adds another tree in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import orjson

from toolrelay import OpenAIChat, Relay, RunLimits, tool
from toolrelay.testing.fake_server import FakeModelServer, RecordedRequest, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks, render_sse

SCENARIOS = ((1, 10, 50), (3, 40, 400), (1, 20, 5000), (20, 10, 20))
KINDS = ("httpx2", "aiohttp", "run", "stream")
PACE_S = 0.0002
ROOT = Path(__file__).resolve().parents[1]
PATH = "/v1/chat/completions"


@tool
async def lookup(q: str, n: int = 0) -> str:
    """Look something up (async: every loop calls it inline, on the event loop)."""
    return f"result for {q}"


def bodies(rounds: int, arg_chunks: int, text_chunks: int) -> list[list[bytes]]:
    """One pre-rendered body per model call, already cut into events."""
    args = orjson.dumps({"q": "x" * (4 * arg_chunks), "n": 1}).decode()
    out = []
    for r in range(rounds):
        args_r = args.replace('"n":1', f'"n":{r}')
        call = ToolCallSpec("lookup", args_r, id=f"call_{r}")
        out.append(render_sse(chat_chunks(tool_calls=[call], args_pieces=arg_chunks)))
    out.append(render_sse(chat_chunks(text=[f"w{i} " for i in range(text_chunks)])))
    return [[e + b"\n\n" for e in body.split(b"\n\n") if e] for body in out]


def serve_upstream(scenario: tuple[int, int, int]) -> None:
    """The upstream process: answers the round the request is at (its tool messages)."""
    replies = bodies(*scenario)

    def answer(request: RecordedRequest) -> SSEReply:
        round_no = sum(1 for m in request.json["messages"] if m.get("role") == "tool")
        return SSEReply(replies[round_no], done=False, delay=PACE_S)

    server = FakeModelServer()
    server.set_default(answer)
    server.start()
    sys.stdout.write(f"{server.port}\n")
    sys.stdout.flush()
    while True:  # the parent kills us; keep the request log from growing meanwhile
        time.sleep(1)
        server.requests.clear()


@contextlib.contextmanager
def upstream(scenario: tuple[int, int, int]) -> Iterator[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    command = [sys.executable, "-m", "benchmarks.engine_loop", "--upstream"]
    command.append(",".join(map(str, scenario)))
    process = subprocess.Popen(command, stdout=subprocess.PIPE, env=env)
    try:
        assert process.stdout is not None
        yield f"http://127.0.0.1:{int(process.stdout.readline())}"
    finally:
        process.terminate()
        process.wait(15)


class Turn:
    """What a hand-written loop keeps of one model answer: text and calls by index."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}

    def line(self, line: bytes) -> None:
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            return
        delta = orjson.loads(line[6:])["choices"][0]["delta"]
        if delta.get("content"):
            self.text.append(delta["content"])
        for tc in delta.get("tool_calls") or ():
            call = self.calls.setdefault(tc["index"], {"id": tc.get("id"), "name": "", "args": []})
            fn = tc.get("function") or {}
            call["name"] = fn.get("name") or call["name"]
            call["args"].append(fn.get("arguments") or "")

    async def next_messages(self) -> list[dict[str, Any]]:
        """The assistant message and the tool results, the tools called inline."""
        assistant: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self.text) or None,
            "tool_calls": [],
        }
        results = []
        for call in self.calls.values():
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
        return [assistant, *results]


async def httpx2_loop(client: httpx2.AsyncClient, url: str) -> str:
    """A minimal native tool loop on httpx2: no events, no items, no validation."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    while True:
        turn = Turn()
        body = {"model": "m", "messages": messages, "stream": True}
        async with client.stream("POST", url, json=body) as response:
            async for line in response.aiter_lines():
                turn.line(line.encode())
        if not turn.calls:
            return "".join(turn.text)
        messages += await turn.next_messages()


async def aiohttp_loop(session: aiohttp.ClientSession, url: str) -> str:
    """The same loop on aiohttp (its stream reader splits the lines)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    while True:
        turn = Turn()
        body = {"model": "m", "messages": messages, "stream": True}
        async with session.post(url, data=orjson.dumps(body), headers=JSON) as response:
            async for line in response.content:
                turn.line(line.rstrip(b"\r\n"))
        if not turn.calls:
            return "".join(turn.text)
        messages += await turn.next_messages()


JSON = {"content-type": "application/json"}
Conversations = Callable[[int], Coroutine[Any, Any, None]]


async def loops(
    kind: str, base: str
) -> tuple[Conversations, Callable[[], Coroutine[Any, Any, Any]]]:
    """`conversations(n)` on one long-lived client or relay, and its `close()`."""
    url = base + PATH
    if kind == "httpx2":
        client = httpx2.AsyncClient(timeout=None)

        async def on_httpx2(n: int) -> None:
            for _ in range(n):
                await httpx2_loop(client, url)

        return on_httpx2, client.aclose
    if kind == "aiohttp":
        session = aiohttp.ClientSession()

        async def on_aiohttp(n: int) -> None:
            for _ in range(n):
                await aiohttp_loop(session, url)

        return on_aiohttp, session.close
    relay = Relay(
        OpenAIChat(base_url=base, model="m"), [lookup], limits=RunLimits(max_iterations=64)
    )

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


def callgrind_child(kind: str, base: str, measured: int) -> None:
    """Two warm-up conversations, then `measured` inside `ffi_call` (the instrumented part)."""
    loop = asyncio.new_event_loop()
    conversations, close = loop.run_until_complete(loops(kind, base))
    loop.run_until_complete(conversations(2))
    callback = ctypes.CFUNCTYPE(None)(lambda: loop.run_until_complete(conversations(measured)))
    callback()
    loop.run_until_complete(close())
    loop.close()


def instructions(src: str, kind: str, base: str, measured: int) -> float:
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
        base,
        str(measured),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found, done.stderr[-2000:]
    return int(found.group(1)) / measured


def run_callgrind(
    trees: dict[str, str], scenarios: tuple[tuple[int, int, int], ...], jobs: int
) -> None:
    print("\nengine loop: instructions per conversation (callgrind), over real sockets")
    print(
        f"{'rounds×args×text':<18}{'tree':<8}{'httpx2':>9}{'aiohttp':>9}"
        f"{'run/httpx2':>12}{'run/aiohttp':>13}{'stream/httpx2':>15}"
    )
    for scenario in scenarios:
        measured = max(1, 4000 // (scenario[0] * scenario[1] + scenario[2]))
        with upstream(scenario) as base, ThreadPoolExecutor(jobs) as pool:
            counts = {
                (name, kind): pool.submit(instructions, src, kind, base, measured)
                for name, src in trees.items()
                for kind in KINDS
            }
            label = "×".join(map(str, scenario))
            for name in trees:
                hx, aio, ours, streamed = (counts[name, k].result() for k in KINDS)
                print(
                    f"{label:<18}{name:<8}{hx / 1e6:>8.2f}M{aio / 1e6:>8.2f}M"
                    f"{ours / hx:>11.3f}×{ours / aio:>12.3f}×{streamed / hx:>14.3f}×",
                    flush=True,
                )
                label = ""


def cpu_ms(kind: str, base: str, conversations: int) -> float:
    """Process CPU time per conversation, in ms, on a warm client."""

    async def timed() -> float:
        run, close = await loops(kind, base)
        await run(1)  # warm: connection, imports
        start = time.process_time()
        await run(conversations)
        spent = time.process_time() - start
        await close()
        return spent

    return asyncio.run(timed()) * 1000 / conversations


def run(*, quick: bool = False) -> None:
    repeat = 3 if quick else 9
    print(
        "\nengine loop: CPU ms per conversation over real sockets, Relay against hand-written "
        "httpx2 and aiohttp loops (best of several)"
    )
    print(
        f"{'rounds×args×text':<18}{'httpx2':>8}{'aiohttp':>9}{'run':>8}{'stream':>8}"
        f"{'run/httpx2':>12}{'run/aiohttp':>13}"
    )
    for scenario in SCENARIOS:
        conversations = max(1, 2000 // (scenario[0] * scenario[1] + scenario[2]))
        best = dict.fromkeys(KINDS, float("inf"))
        with upstream(scenario) as base:
            for _ in range(repeat):  # interleaved, so machine noise hits all alike
                for kind in KINDS:
                    best[kind] = min(best[kind], cpu_ms(kind, base, conversations))
        hx, aio, ours, streamed = (best[k] for k in KINDS)
        label = "×".join(map(str, scenario))
        print(
            f"{label:<18}{hx:>8.2f}{aio:>9.2f}{ours:>8.2f}{streamed:>8.2f}"
            f"{ours / hx:>11.2f}×{ours / aio:>12.2f}×",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine_loop")
    parser.add_argument("--callgrind", action="store_true", help="count instructions")
    parser.add_argument("--rows", help="scenarios as r×a×t,… (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="valgrinds at once")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--upstream", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        rounds, arg_chunks, text_chunks = (int(x) for x in args.upstream.split(","))
        serve_upstream((rounds, arg_chunks, text_chunks))
        return
    if args.child:
        kind, base, measured = args.child
        callgrind_child(kind, base, int(measured))
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


if __name__ == "__main__":
    main()
