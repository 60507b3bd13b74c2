"""New chats while many others stream: do they wait behind the streams already flowing?

`server_load` starts every chat at once. Here N chats are started first and left
to stream (answers of CHUNKS chunks, INTERVAL apart: seconds long); once every
one of them has its first token, NEW more chats start at once, and their time to
first token (from their own start) is what is reported, p50 / p99, for the
fake upstream alone, the pass-through proxy (the floor) and toolrelay (and
`before` with `BENCH_BEFORE_SRC`), the same processes and pinning as
`server_load`, the contenders alternating per round, each round starting one
later (`server_load.rotated`; median of ROUNDS).
`flowing` is the median TTFT of the N background chats, for scale.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import Iterator

from benchmarks import server_load
from benchmarks.load_client import FIRST_TOKEN, percentile, request_bytes

CHUNKS = 150
INTERVAL = 0.02
NEW = 20
ROUNDS = 3


@contextlib.contextmanager
def long_answers() -> Iterator[None]:
    """`server_load.servers()` with an upstream answering CHUNKS chunks (it reads its module's
    settings when it starts the upstream)."""
    saved = server_load.CHUNKS, server_load.INTERVAL, server_load.EXPECTED
    server_load.CHUNKS, server_load.INTERVAL = CHUNKS, INTERVAL
    server_load.EXPECTED = "".join(f"tok{i} " for i in range(CHUNKS))
    try:
        yield
    finally:
        server_load.CHUNKS, server_load.INTERVAL, server_load.EXPECTED = saved


async def _chat(port: int, request: bytes, first: asyncio.Event | None = None) -> float:
    """One streamed chat read to its end; its TTFT (0.0 if no token came)."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ttft = 0.0
    try:
        writer.write(request)
        seen = b""
        while data := await reader.read(65536):
            if not ttft:
                seen = seen[-32:] + data
                if FIRST_TOKEN in seen:
                    ttft = time.perf_counter() - start
                    if first is not None:
                        first.set()
    finally:
        writer.close()
    return ttft


async def scenario(port: int, headers: dict[str, str], flowing: int) -> tuple[list[float], float]:
    """TTFTs of NEW chats started once `flowing` others stream; and the others' median TTFT."""
    request = request_bytes(port, server_load.PATH, server_load.BODY, headers)
    firsts = [asyncio.Event() for _ in range(flowing)]
    background = [asyncio.ensure_future(_chat(port, request, f)) for f in firsts]
    await asyncio.gather(*(f.wait() for f in firsts))  # all of them stream now
    new = await asyncio.gather(*(_chat(port, request) for _ in range(NEW)))
    old = await asyncio.gather(*background)
    return list(new), statistics.median(old)


def run(*, quick: bool = False) -> None:
    sizes = (200,) if quick else (200, 500)
    rounds = 1 if quick else ROUNDS
    own = os.sched_getaffinity(0)
    print(
        f"\nserver, new chats while others stream: {NEW} chats started once N others "
        f"stream ({CHUNKS} chunks {INTERVAL * 1000:.0f} ms apart); median of {rounds} round(s)"
    )
    print(f"{'N':>5}  {'':<10}{'new TTFT ms':>14}{'flowing':>9}  {'over aiohttp:':<16}p50   p99")
    print(f"{'':>5}  {'':<10}{'p50 / p99':>14}{'p50 ms':>9}")
    try:
        if server_load.pinned():
            os.sched_setaffinity(0, server_load.CLIENT_CPUS)
        with long_answers(), server_load.servers() as contenders:
            for n in sizes:
                _rows(n, rounds, contenders)
    finally:
        os.sched_setaffinity(0, own)


def _rows(n: int, rounds: int, contenders: list[server_load.Contender]) -> None:
    found: dict[str, list[tuple[float, float, float]]] = {c.name: [] for c in contenders}
    for turn in range(rounds):
        for c in server_load.rotated(contenders, turn):
            if c.pid:
                server_load.settled(c.pids())
            new, flowing = asyncio.run(scenario(c.port, c.headers, n))
            found[c.name].append((percentile(new, 50), percentile(new, 99), flowing))
    med = {
        name: tuple(statistics.median(r[i] for r in runs) for i in range(3))
        for name, runs in found.items()
    }
    proxy = med[server_load.FLOOR]
    for name, (p50, p99, flowing) in med.items():
        line = f"{n if name == 'upstream' else '':>5}  {name:<10}"
        line += f"{f'{p50 * 1000:.0f} / {p99 * 1000:.0f}':>14}{flowing * 1000:>9.0f}"
        if name not in ("upstream", server_load.FLOOR):
            line += f"  {'':<16}{p50 / proxy[0]:.2f}  {p99 / proxy[1]:.2f}"
        print(line)
