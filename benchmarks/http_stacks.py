"""The model path on each HTTP library: why the transport is aiohttp (docs/performance.md).

N streamed chat completions at once from the fake upstream (its own process,
CPU 1), read by a client in this process (CPU 0) through each library's
public streaming API, as a model client reads them: `aiohttp` (one
`ClientSession`, `content.readany()`), `httpx2` (one `AsyncClient`,
`aiter_raw()`), and `raw` (the benchmark's own asyncio client: the least any
client can add). Reported: the client's CPU per chat and time to the first
body chunk p50 / p99 added over `raw`'s (its own shown in brackets), the median
of ROUNDS rounds.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import aiohttp
import httpx2
import orjson

from benchmarks.load_client import percentile, wave
from benchmarks.server_load import (
    CHUNKS,
    CLIENT_CPUS,
    INTERVAL,
    ROOT,
    SERVER_CPUS,
    free_port,
    pinned,
)

ROUNDS = 3
BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
HEADERS = {"content-type": "application/json"}
Wave = Callable[[str, int], Awaitable[tuple[list[float], float]]]


async def aiohttp_wave(url: str, n: int) -> tuple[list[float], float]:
    connector = aiohttp.TCPConnector(limit=4096, limit_per_host=0, keepalive_timeout=30)
    session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(None))

    async def one() -> float:
        start = time.perf_counter()
        first = 0.0
        async with session.post(url, data=BODY, headers=HEADERS) as response:
            read = response.content.readany
            while await read():
                first = first or time.perf_counter() - start
        return first

    return await _timed(one, n, session.close)


async def httpx2_wave(url: str, n: int) -> tuple[list[float], float]:
    limits = httpx2.Limits(max_connections=4096, max_keepalive_connections=4096)
    client = httpx2.AsyncClient(timeout=None, limits=limits)

    async def one() -> float:
        start = time.perf_counter()
        first = 0.0
        async with client.stream("POST", url, content=BODY, headers=HEADERS) as response:
            async for _ in response.aiter_raw():
                first = first or time.perf_counter() - start
        return first

    return await _timed(one, n, client.aclose)


async def _timed(
    one: Callable[[], Awaitable[float]], n: int, close: Callable[[], Awaitable[None]]
) -> tuple[list[float], float]:
    """A warm-up of 20, then N at once: first-chunk times and CPU ms per chat."""
    await asyncio.gather(*(one() for _ in range(20)))
    cpu = time.process_time()
    firsts = await asyncio.gather(*(one() for _ in range(n)))
    spent = (time.process_time() - cpu) * 1000 / n
    await close()
    return list(firsts), spent


async def raw_wave(url: str, n: int) -> tuple[list[float], float]:
    port = int(url.split(":")[2].split("/")[0])
    cpu = time.process_time()
    samples = await wave(port, "/v1/chat/completions", n, BODY, {})
    return [s.ttfb for s in samples], (time.process_time() - cpu) * 1000 / n


WAVES: dict[str, Wave] = {"raw": raw_wave, "aiohttp": aiohttp_wave, "httpx2": httpx2_wave}


def run(*, quick: bool = False) -> None:
    sizes = (50, 200) if quick else (50, 200, 1000)
    rounds = 1 if quick else ROUNDS
    own = os.sched_getaffinity(0)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    command = [sys.executable, "-m", "benchmarks.upstream", str(port), str(CHUNKS), str(INTERVAL)]
    upstream = subprocess.Popen(command, stdout=subprocess.PIPE, env=env)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    print(
        f"\nHTTP client libraries on the model path: N streams of {CHUNKS} chunks at once, "
        f"median of {rounds} round(s)"
    )
    print(f"{'N':>6}  {'client':<9}{'added first chunk':>19}{'CPU ms':>8}")
    print(f"{'':>6}  {'':<9}{'p50 / p99 ms':>19}{'/chat':>8}")
    try:
        if pinned():
            os.sched_setaffinity(upstream.pid, CLIENT_CPUS)
            os.sched_setaffinity(0, SERVER_CPUS)
        assert upstream.stdout is not None and upstream.stdout.readline().strip() == b"ready"
        for n in sizes:
            _rows(url, n, rounds)
    finally:
        os.sched_setaffinity(0, own)
        upstream.terminate()
        upstream.wait(15)


def _rows(url: str, n: int, rounds: int) -> None:
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in WAVES}
    for turn in range(rounds):
        names = list(WAVES)
        names = names[turn % len(names) :] + names[: turn % len(names)]
        for name in names:
            firsts, cpu = asyncio.run(WAVES[name](url, n))
            found[name].append((percentile(firsts, 50), percentile(firsts, 99), cpu))
    med = {
        name: tuple(statistics.median(r[i] for r in runs) for i in range(3))
        for name, runs in found.items()
    }
    base = med["raw"]
    for name, (p50, p99, cpu) in med.items():
        added = f"{(p50 - base[0]) * 1000:.0f} / {(p99 - base[1]) * 1000:.0f}"
        spent = f"{cpu:.2f}"
        if name == "raw":  # its own times; its CPU includes checking the bodies: not shown
            added, spent = f"({p50 * 1000:.0f} / {p99 * 1000:.0f})", "-"
        print(f"{n if name == 'raw' else '':>6}  {name:<9}{added:>19}{spent:>8}")
