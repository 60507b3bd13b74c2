"""N concurrent streamed chats through `/v1/chat/completions`, against the upstream alone.

The fast fake upstream runs in its own process and streams CHUNKS text chunks
per chat, INTERVAL apart, so all N chats are active at once. For each N the
same client first streams N chats straight from the upstream (the baseline),
then N through toolrelay (a separate `toolrelay serve` process, SQLite,
in-process events). Reported: time to first token p50 / p99 straight from
the upstream and through toolrelay, the p50 added, content chunks per second
delivered (toolrelay merges deltas within 20 ms, so fewer, larger chunks),
server CPU per chat (from /proc), and server memory per active chat (peak
RSS during the run over idle RSS, divided by N). Client, upstream and server
share the machine's cores, so at high N the client's own load shows in both
columns. `cut` counts chats whose text did not arrive whole (through
toolrelay / straight from the upstream): it should stay 0/0.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

CHUNKS = 40
INTERVAL = 0.02
KEY = "tr-benchmark-key-0123456789abcdef"
BODY = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


EXPECTED = "".join(f"tok{i} " for i in range(CHUNKS))


async def one_chat(
    client: httpx.AsyncClient, url: str, headers: dict[str, str]
) -> tuple[float, int, bool]:
    """TTFT, content chunks received, and whether the whole text arrived."""
    start = time.perf_counter()
    first = 0.0
    pieces: list[str] = []
    async with client.stream("POST", url, json=BODY, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            choices = orjson.loads(line[6:]).get("choices") or [{}]
            content = (choices[0].get("delta") or {}).get("content")
            if content:
                pieces.append(content)
                if not first:
                    first = time.perf_counter() - start
    return first, len(pieces), "".join(pieces) == EXPECTED


async def wave(url: str, n: int, headers: dict[str, str], pid: int | None) -> dict[str, float]:
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        cpu0 = cpu_seconds(pid) if pid else 0.0
        peak = 0
        done = False

        async def sample() -> None:
            nonlocal peak
            while not done and pid:
                peak = max(peak, rss_kib(pid))
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        start = time.perf_counter()
        results = await asyncio.gather(*(one_chat(client, url, headers) for _ in range(n)))
        elapsed = time.perf_counter() - start
        done = True
        await sampler
    ttfts = sorted(r[0] for r in results)
    return {
        "p50": statistics.median(ttfts),
        "p99": ttfts[min(len(ttfts) - 1, int(len(ttfts) * 0.99))],
        "chunks_per_s": sum(r[1] for r in results) / elapsed,
        "cpu_ms": (cpu_seconds(pid) - cpu0) * 1000 / n if pid else 0.0,
        "peak_kib": float(peak),
        "incomplete": float(sum(1 for r in results if not r[2])),
    }


def run(*, quick: bool = False) -> None:
    sizes = (50, 200) if quick else (50, 200, 1000)
    up_port, tr_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    upstream = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.upstream", str(up_port), str(CHUNKS), str(INTERVAL)],
        stdout=subprocess.PIPE,
        env=env,
    )
    with tempfile.TemporaryDirectory() as data:
        routes = [{"name": "fake", "base_url": f"http://127.0.0.1:{up_port}", "model": "m"}]
        server_env = {
            **env,
            "TOOLRELAY_DATA_DIR": data,
            "TOOLRELAY_ADMIN_KEY": KEY,
            "TOOLRELAY_PORT": str(tr_port),
            "TOOLRELAY_MODELS": orjson.dumps(routes).decode(),
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "toolrelay.cli.main", "serve"],
            env=server_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert upstream.stdout is not None and upstream.stdout.readline().strip() == b"ready"
            wait_http(f"http://127.0.0.1:{tr_port}/healthz")
            _report(sizes, up_port, tr_port, server.pid)
        finally:
            server.terminate()
            upstream.terminate()
            server.wait(10)
            upstream.wait(10)


def _report(sizes: tuple[int, ...], up_port: int, tr_port: int, pid: int) -> None:
    direct = f"http://127.0.0.1:{up_port}/v1/chat/completions"
    relayed = f"http://127.0.0.1:{tr_port}/v1/chat/completions"
    auth = {"Authorization": f"Bearer {KEY}"}
    asyncio.run(wave(relayed, 10, auth, pid))  # warm up: imports, pools, key cache
    idle = rss_kib(pid)
    print(
        f"\nserver: N concurrent streamed chats, {CHUNKS} chunks each, {INTERVAL * 1000:.0f} ms apart"
    )
    print(
        f"{'N':>6}{'TTFT p50/p99 upstream':>24}{'via toolrelay':>18}{'added p50':>11}"
        f"{'chunks/s':>10}{'CPU ms/chat':>13}{'KiB/chat':>10}{'cut':>5}"
    )
    for n in sizes:
        base = asyncio.run(wave(direct, n, {}, None))
        ours = asyncio.run(wave(relayed, n, auth, pid))
        cut = f"{ours['incomplete']:.0f}/{base['incomplete']:.0f}"  # via toolrelay / upstream
        added50 = (ours["p50"] - base["p50"]) * 1000
        per_chat = max(0.0, ours["peak_kib"] - idle) / n
        upstream = f"{base['p50'] * 1000:.0f} / {base['p99'] * 1000:.0f} ms"
        relayed_ms = f"{ours['p50'] * 1000:.0f} / {ours['p99'] * 1000:.0f} ms"
        print(
            f"{n:>6}{upstream:>24}{relayed_ms:>18}{added50:>9.0f}ms"
            f"{ours['chunks_per_s']:>10.0f}{ours['cpu_ms']:>13.2f}{per_chat:>10.1f}{cut:>5}"
        )
