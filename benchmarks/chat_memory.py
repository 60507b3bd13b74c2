"""Memory per active streamed chat: toolrelay against the pass-through proxies, by tracemalloc.

Every server runs under `benchmarks.traced` (tracemalloc on): the aiohttp and
httpx2 proxies (`benchmarks/proxy.py`) and `toolrelay serve --workers 1`. The fake
upstream (in this process) streams an answer and stalls after a few tokens,
so N chats stay open mid-answer. For each server: a warm-up of whole answers,
then what Python holds (the baseline), then N streams opened and read until
their first tokens arrived, then what Python holds again. Printed: KiB per
active chat for each, its ratio to the aiohttp proxy's (target, issue 25: at
most 2x), and the allocation sites that grew most in toolrelay, per file
(what holds a chat's memory). Memory C code allocates itself (aiohttp's
parser buffers) is not traced, for the proxy and toolrelay alike.
`BENCH_BEFORE_SRC=/path/to/other/src` adds that checkout as `before`, measured in
the same run (as `server_load` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from benchmarks.load_client import FIRST_TOKEN, request_bytes, wave
from benchmarks.server_load import (
    BODY,
    FLOOR,
    KEY,
    PATH,
    PROXIES,
    ROOT,
    free_port,
    toolrelay_env,
    wait_http,
)
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

N = 200
WORDS = [f"tok{i} " for i in range(40)]


async def _open(port: int, request: bytes) -> asyncio.StreamWriter:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    seen = b""
    while FIRST_TOKEN not in seen:
        data = await reader.read(65536)
        if not data:
            raise RuntimeError("the server closed a stream before its first token")
        seen += data
    return writer


def _held(pid: int, out: Path) -> dict[str, object]:
    out.unlink(missing_ok=True)
    Path(f"{out}.ask").touch()
    deadline = time.monotonic() + 900  # a snapshot of a busy heap takes minutes under load
    while not out.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("no tracemalloc report")
        time.sleep(0.05)
    report: dict[str, object] = orjson.loads(out.read_bytes())
    return report


def measure(
    pid: int, port: int, headers: dict[str, str], out: Path, n: int
) -> tuple[float, list[tuple[str, int]]]:
    """KiB per active chat, and the sites that grew most (site, bytes)."""
    base = _held(pid, out)

    async def hold() -> tuple[dict[str, object], list[asyncio.StreamWriter]]:
        request = request_bytes(port, PATH, BODY, headers)
        writers = await asyncio.gather(*(_open(port, request) for _ in range(n)))
        await asyncio.sleep(0.5)  # let what follows the first token settle
        return await asyncio.to_thread(_held, pid, out), list(writers)

    async def run() -> dict[str, object]:
        held, writers = await hold()
        for writer in writers:
            writer.transport.abort()
        return held

    held = asyncio.run(run())
    per_chat = (int(held["traced"]) - int(base["traced"])) / n / 1024  # type: ignore[call-overload]
    before = {t["where"]: t["bytes"] for t in base["files"]}  # type: ignore[attr-defined]
    grew = sorted(
        ((t["where"], t["bytes"] - before.get(t["where"], 0)) for t in held["files"]),  # type: ignore[attr-defined]
        key=lambda x: -x[1],
    )
    own = [(t["where"], t["bytes"]) for t in held["ours"][:6]]  # type: ignore[attr-defined]
    return per_chat, grew[:10] + [("toolrelay's own: " + w, b) for w, b in own]


@contextlib.contextmanager
def traced(kind: list[str], env: dict[str, str], out: Path) -> Iterator[int]:
    command = [sys.executable, "-m", "benchmarks.traced", str(out), *kind]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        yield process.pid
    finally:
        process.kill()  # streams stalled for an hour: no graceful shutdown to wait for
        process.wait(30)


def run(*, quick: bool = False) -> None:
    n = 100 if quick else N
    whole = SSEReply(chat_chunks(text=WORDS))
    stalled = SSEReply(chat_chunks(text=WORDS), stall_after=6, stall_for=3600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRELAY_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    results: dict[str, tuple[float, list[tuple[str, int]]]] = {}
    with FakeModelServer() as upstream, tempfile.TemporaryDirectory() as data:
        base_url = upstream.base_url
        contenders = {
            library: (["proxy", "{port}", base_url, library], env, {}) for library in PROXIES
        }
        checkouts = {"toolrelay": str(ROOT / "src")}
        if os.environ.get("BENCH_BEFORE_SRC"):
            checkouts["before"] = os.environ["BENCH_BEFORE_SRC"]
        for name, src in checkouts.items():
            contenders[name] = (
                ["toolrelay", "serve", "--workers", "1"],
                {
                    **toolrelay_env(env, src, tempfile.mkdtemp(dir=data), 0, base_url),
                    "TOOLRELAY_LIMITS__COALESCE_MS": "0",  # as in server_load
                },
                {"authorization": f"Bearer {KEY}"},
            )
        for name, (kind, child_env, headers) in contenders.items():
            port = free_port()
            kind = [k.replace("{port}", str(port)) for k in kind]
            child_env = {**child_env, "TOOLRELAY_PORT": str(port)}
            out = Path(data) / f"{name}.json"
            with traced(kind, child_env, out) as pid:
                wait_http(f"http://127.0.0.1:{port}/healthz", limit=900)  # tracemalloc: slow start
                upstream.set_default(whole)
                asyncio.run(wave(port, PATH, 20, BODY, headers))  # warm up
                upstream.set_default(stalled)
                results[name] = measure(pid, port, headers, out, n)
                upstream.set_default(whole)
    floor = results[FLOOR][0]
    print(f"\nmemory per active streamed chat (tracemalloc, {n} chats open mid-answer)")
    print(f"{'':<12}{'KiB/chat':>10}{'over aiohttp':>14}")
    for name, (per_chat, _) in results.items():
        note = "   (target: at most 2x)" if name == "toolrelay" else ""
        print(f"{name:<12}{per_chat:>10.1f}{per_chat / floor:>13.2f}x{note}")
    print("toolrelay: the files whose allocations grew most, then its own largest sites, KiB/chat")
    for where, grown in results["toolrelay"][1]:
        short = where.replace(str(ROOT / "src") + "/", "").split("site-packages/")[-1]
        print(f"  {grown / n / 1024:8.2f}  {short}")
