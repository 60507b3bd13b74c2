"""Publish cost per event: IpcBus and RedisBus against MemoryBus, measured in the same run.

Every streamed chunk of every chat is one `publish`, so this is on the hot path.
This process plays a worker; the `BusHost` runs in a spawned process (the parent
of `serve --workers N`, in miniature) and Redis at 127.0.0.1:6379 (its row is
left out when Redis is not there). A round is N publishes of a text delta:
by one chat (begin, publish, end) alone, by one chat with a live reader in the
worker ("1+r"), and by 8 chats at once, each with a reader ("8+r": a busy worker).
The contenders alternate round by round (noisy machine). Printed per event:
the worker's CPU time (process clock) and wall time, best round of R, with
their ratios to MemoryBus; and the server side's CPU, summed over all rounds
(the host process's threads from /proc/<pid>/task/*/schedstat; Redis from INFO,
shared with anything else using it).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as ProcessEvent
from pathlib import Path

from toolrelay.adapters.events import EventBus
from toolrelay.adapters.events.ipc import BusHost, IpcBus
from toolrelay.adapters.events.memory import MemoryBus
from toolrelay.core.events import OUTPUT_TEXT_DELTA, Event

REDIS_URL = "redis://127.0.0.1:6379/0"
SPAWN = multiprocessing.get_context("spawn")
ServerCpu = Callable[[], float]
SCENARIOS = ((1, False), (1, True), (8, True))
"""(chats publishing at once, each with a live reader or not)."""


def _serve(path: str, ready: ProcessEvent, stop: Connection) -> None:
    """The host process: serve until the benchmark closes its end of `stop`."""
    with BusHost(path):
        ready.set()
        stop.poll(None)


def _proc_cpu(pid: int) -> ServerCpu:
    """A process's CPU seconds so far: its threads' run time from /proc, in nanoseconds."""

    def read() -> float:
        total = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9

    return read


async def _chat(bus: EventBus, channel: str, events: list[Event], follow: bool) -> None:
    """One chat's turn: begin, publish every event, end; with a reader following it live."""
    await bus.begin(channel)
    reader = None
    if follow:

        async def drain() -> None:
            async for _ in bus.subscribe(channel):
                pass

        reader = asyncio.ensure_future(drain())
        await asyncio.sleep(0)  # subscribed before the first publish
    for event in events:
        await bus.publish(channel, event)
    await bus.end(channel)
    if reader is not None:
        await reader


async def _round(
    bus: EventBus, channel: str, events: list[Event], chats: int, follow: bool
) -> None:
    """`chats` chats at once share the events (a worker streaming several answers)."""
    share = len(events) // chats
    await asyncio.gather(
        *(
            _chat(bus, f"{channel}_{c}", events[c * share : (c + 1) * share], follow)
            for c in range(chats)
        )
    )


async def _contenders(path: str, prefix: str) -> dict[str, tuple[EventBus, ServerCpu | None]]:
    buses: dict[str, tuple[EventBus, ServerCpu | None]] = {"memory": (MemoryBus(), None)}
    buses["ipc"] = (IpcBus(path), None)
    try:
        from toolrelay.adapters.events.redis import RedisBus

        redis_bus = await RedisBus.connect(REDIS_URL, prefix=prefix)
    except Exception as exc:  # no Redis here: its row is left out
        print(f"  (no Redis at {REDIS_URL}: {type(exc).__name__}; its row is left out)")
        return buses
    import redis

    client = redis.Redis.from_url(REDIS_URL)

    def redis_cpu() -> float:
        info = client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    buses["redis"] = (redis_bus, redis_cpu)
    return buses


async def _measure(path: str, host_pid: int, events: int, rounds: int) -> None:
    prefix = f"toolrelay-bench:{secrets.token_hex(4)}:"
    buses = await _contenders(path, prefix)
    ipc_bus, _ = buses["ipc"]
    buses["ipc"] = (ipc_bus, _proc_cpu(host_pid))
    payload = [
        Event(OUTPUT_TEXT_DELTA, {"item_id": "msg_1", "output_index": 0, "delta": f"tok{i} "})
        for i in range(events)
    ]
    for bus, _ in buses.values():  # connect and warm up
        await _round(bus, "warm", payload[:50], 1, True)
    print(f"{'bus':<8}{'chats':<8}{'CPU µs':>9}{'×mem':>7}{'wall µs':>9}{'×mem':>7}{'srv µs':>9}")
    for chats, follow in SCENARIOS:
        cpu = dict.fromkeys(buses, float("inf"))
        wall = dict.fromkeys(buses, float("inf"))
        server = dict.fromkeys(buses, 0.0)
        for n in range(rounds):
            for name, (bus, server_cpu) in buses.items():
                channel = f"bench_{chats}_{follow}_{n}"
                srv0 = server_cpu() if server_cpu else 0.0
                c0, w0 = time.process_time(), time.perf_counter()
                await _round(bus, channel, payload, chats, follow)
                cpu[name] = min(cpu[name], time.process_time() - c0)
                wall[name] = min(wall[name], time.perf_counter() - w0)
                server[name] += (server_cpu() if server_cpu else 0.0) - srv0
        reader = f"{chats}{'+r' if follow else ''}"
        for name, (_, server_cpu) in buses.items():
            c_us, w_us = cpu[name] / events * 1e6, wall[name] / events * 1e6
            srv = f"{server[name] / (events * rounds) * 1e6:>9.1f}" if server_cpu else f"{'-':>9}"
            print(
                f"{name:<8}{reader:<8}{c_us:>9.1f}{cpu[name] / cpu['memory']:>6.1f}×"
                f"{w_us:>9.1f}{wall[name] / wall['memory']:>6.1f}×{srv}"
            )
    for bus, _ in buses.values():
        await bus.aclose()
    if "redis" in buses:
        import redis.asyncio as aioredis

        client = aioredis.Redis.from_url(REDIS_URL)
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


def run(*, quick: bool = False) -> None:
    events, rounds = (500, 3) if quick else (3000, 9)
    print(f"bus publish: per event, best of {rounds} rounds of {events} publishes")
    folder = tempfile.mkdtemp(prefix="trbench-")
    path = os.path.join(folder, "bus.sock")
    ready = SPAWN.Event()
    stop_reader, stop = SPAWN.Pipe(duplex=False)
    host = SPAWN.Process(target=_serve, args=(path, ready, stop_reader))
    host.start()
    try:
        if not ready.wait(60):
            raise RuntimeError("the bus host process did not start")
        assert host.pid is not None
        asyncio.run(_measure(path, host.pid, events, rounds))
    finally:
        stop.close()
        host.join(30)
        with contextlib.suppress(Exception):
            host.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    run()
