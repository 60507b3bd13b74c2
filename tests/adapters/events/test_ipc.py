"""The IPC bus beyond the shared contract: other processes, a host that goes, bad frames.

The contract tests (test_bus.py, test_leases.py) run on `IpcBus` with the host in
a thread of the test process; here the host also runs in a process of its own,
spawned, with real sockets between the processes.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.patience import HANG
from toolrelay.adapters.events import Envelope
from toolrelay.adapters.events.ipc import BusHost, BusUnavailable, IpcBus
from toolrelay.adapters.events.ipc.frames import frame
from toolrelay.core.events import Event

from . import ipc_procs
from .test_bus import CHAT, Collector, _send_until_listening, drain, note

pytestmark = pytest.mark.anyio

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def host(socket_dir: Path) -> Iterator[BusHost]:
    with BusHost(socket_dir / "bus.sock") as running:
        yield running


@pytest.fixture
async def bus(host: BusHost) -> Any:
    client = IpcBus(host.path, connect_timeout=HANG)
    yield client
    await client.aclose()


class HostProcess:
    """A `BusHost` in a spawned process (the parent of `serve --workers N`, in miniature)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._ready = SPAWN.Event()
        stop, self._stop = SPAWN.Pipe(duplex=False)
        self.process = SPAWN.Process(target=ipc_procs.host, args=(path, self._ready, stop))

    def __enter__(self) -> HostProcess:
        self.process.start()
        assert self._ready.wait(HANG), "the host process did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.close()
        self.process.join(HANG)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


async def test_two_worker_processes_race_for_a_lease_and_one_follows_the_others_turn(
    socket_dir: Path,
) -> None:
    path = str(socket_dir / "bus.sock")
    start = SPAWN.Barrier(2)
    first_seen = SPAWN.Event()
    results = SPAWN.Queue()
    with HostProcess(path):
        workers = [
            SPAWN.Process(target=ipc_procs.racer, args=(path, name, start, first_seen, results))
            for name in ("w1", "w2")
        ]
        for worker in workers:
            worker.start()
        reports = [await asyncio.to_thread(results.get, True, HANG) for _ in workers]
        for worker in workers:
            await asyncio.to_thread(worker.join, HANG)
            assert worker.exitcode == 0
    winners = [r for r in reports if r["won"]]
    losers = [r for r in reports if not r["won"]]
    assert len(winners) == 1 and len(losers) == 1
    won, lost = winners[0], losers[0]
    assert lost["boundary"] == won["boundary"]
    assert won["seqs"] == list(range(won["boundary"] + 1, won["boundary"] + 1 + ipc_procs.EVENTS))
    assert lost["seen"] == [(seq, str(i)) for i, seq in enumerate(won["seqs"])]


async def test_a_killed_host_process_ends_live_subscribers_and_pings_with_an_error(
    socket_dir: Path,
) -> None:
    path = str(socket_dir / "bus.sock")
    bus = IpcBus(path, connect_timeout=HANG)
    try:
        with HostProcess(path) as host:
            await bus.begin(CHAT)
            await bus.publish(CHAT, note("a"))
            subscriber = Collector()
            failure: list[BaseException] = []
            failed = anyio.Event()

            async def follow() -> None:
                try:
                    await subscriber.run(bus.subscribe(CHAT))
                except BusUnavailable as exc:
                    failure.append(exc)
                    failed.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await subscriber.wait_until(lambda: len(subscriber.items) == 1)
                assert host.process.pid is not None
                os.kill(host.process.pid, signal.SIGKILL)
                with anyio.fail_after(HANG):
                    await failed.wait()
        assert not subscriber.finished
        assert isinstance(failure[0], ConnectionError)
        with pytest.raises(BusUnavailable, match="no bus host"):
            await bus.ping()
        with pytest.raises(BusUnavailable):
            await bus.publish(CHAT, note("b"))
    finally:
        await bus.aclose()


async def test_a_client_that_dials_before_the_host_is_up_gets_through(socket_dir: Path) -> None:
    path = socket_dir / "bus.sock"
    bus = IpcBus(path, connect_timeout=HANG)
    try:
        pinging = asyncio.ensure_future(bus.ping())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not pinging.done()  # no socket yet: it waits, it does not fail
        with BusHost(path):
            with anyio.fail_after(HANG):
                await pinging
            assert await bus.publish(CHAT, note("a")) > 0
    finally:
        await bus.aclose()


async def test_no_host_is_a_clear_error_once_the_wait_is_over(socket_dir: Path) -> None:
    bus = IpcBus(socket_dir / "nobody.sock", connect_timeout=0.05)
    with anyio.fail_after(HANG), pytest.raises(BusUnavailable, match="no bus host at .*nobody"):
        await bus.ping()
    await bus.aclose()


async def test_closing_the_host_fails_streams_and_calls_and_a_new_host_is_dialled(
    host: BusHost, bus: IpcBus
) -> None:
    await bus.begin(CHAT)
    subscriber, listener = Collector(), Collector()
    errors: list[BaseException] = []

    async def run(collector: Collector, stream: Any) -> None:
        try:
            await collector.run(stream)
        except BusUnavailable as exc:
            errors.append(exc)

    with anyio.fail_after(HANG):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, subscriber, bus.subscribe(CHAT))
            tg.start_soon(run, listener, bus.control(CHAT))
            await _send_until_listening(bus, listener, CHAT)  # both registered with the host
            await bus.publish(CHAT, note("a"))
            await subscriber.wait_until(lambda: len(subscriber.items) == 1)
            await asyncio.to_thread(host.close)
    assert len(errors) == 2  # neither looks like a finished turn
    assert not subscriber.finished and not listener.finished
    with pytest.raises(BusUnavailable):
        await bus.turn_running(CHAT)
    with BusHost(host.path):  # the parent came back: the next call dials it
        assert await bus.turn_running(CHAT) is False


async def test_a_call_pending_when_the_host_drops_the_connection_fails(socket_dir: Path) -> None:
    path = str(socket_dir / "mute.sock")

    async def read_one_then_hang_up(reader: asyncio.StreamReader, writer: Any) -> None:
        size = int.from_bytes(await reader.readexactly(4), "big")
        await reader.readexactly(size)
        writer.close()

    server = await asyncio.start_unix_server(read_one_then_hang_up, path)
    bus = IpcBus(path)
    try:
        with anyio.fail_after(HANG), pytest.raises(BusUnavailable, match="lost the bus host"):
            await bus.publish(CHAT, note("a"))
    finally:
        await bus.aclose()
        server.close()


BAD_FRAMES = {
    "huge length": b"\xff\xff\xff\xff" + b"x" * 16,
    "not json": b"\x00\x00\x00\x05{nope",
    "not an array": frame({"id": 1}),  # type: ignore[arg-type]
    "unknown op": frame([1, "drop_database", CHAT]),
    "string id": frame(["1", "ping"]),
    "missing channel": frame([1, "pub"]),
    "event without data": frame([1, "pub", CHAT, {"type": "x"}]),
    "event data not an object": frame([1, "pub", CHAT, {"type": "x", "data": [1]}]),
    "ttl not a number": frame([1, "acq", CHAT, "60"]),
    "after not an int": frame([1, "sub", CHAT, "0", True, 8]),
    "stream id reused": frame([1, "listen", CHAT]) + frame([1, "listen", CHAT]),
}


@pytest.mark.parametrize("payload", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
async def test_a_malformed_frame_drops_that_client_only(
    host: BusHost, bus: IpcBus, payload: bytes
) -> None:
    start = await bus.begin(CHAT)
    reader, writer = await asyncio.open_unix_connection(host.path)
    try:
        with anyio.fail_after(HANG):
            writer.write(frame([7, "ping"]))
            assert await reader.readexactly(len(frame([7, None]))) == frame([7, None])
            writer.write(payload + frame([8, "ping"]))
            assert await reader.read() == b""  # hung up, with no answer after the bad frame
    finally:
        writer.close()
    assert await bus.publish(CHAT, note("still here")) == start + 1
    await bus.end(CHAT)
    assert [e.event for e in await drain(bus)] == [note("still here")]


async def test_events_round_trip_exactly(bus: IpcBus) -> None:
    events = [
        Event("chat:message", {"content": "héllo \u2603 \U0001f600 \x00"}),
        Event("chat:title", {}),
        Event(
            "x",
            {
                "nested": {"list": [1, -2, 3.25, None, True, "s"], "empty": {}},
                "big": 2**62,
                "float": 1e-300,
            },
        ),
    ]
    await bus.begin(CHAT)
    for event in events:
        await bus.publish(CHAT, event)
    await bus.end(CHAT)
    got = await drain(bus)
    assert [e.event for e in got] == events
    assert [type(e.event.data["nested"]["list"][2]) for e in got[2:]] == [float]
    assert all(isinstance(e.published_at, float) for e in got)


async def test_a_slow_reader_with_a_small_window_gets_every_event_in_order(
    host: BusHost,
) -> None:
    bus = IpcBus(host.path, window=4)
    try:
        await bus.begin(CHAT)
        seen: list[Envelope] = []
        async with aclosing(bus.subscribe(CHAT)) as events:
            for i in range(100):
                await bus.publish(CHAT, note(str(i)))
            await bus.end(CHAT)
            with anyio.fail_after(HANG):
                async for envelope in events:
                    seen.append(envelope)
                    await asyncio.sleep(0)
        assert [e.event for e in seen] == [note(str(i)) for i in range(100)]
    finally:
        await bus.aclose()


async def test_many_subscribers_and_calls_share_one_connection(host: BusHost, bus: IpcBus) -> None:
    start = await bus.begin(CHAT)
    collectors = [Collector() for _ in range(20)]
    async with anyio.create_task_group() as tg:
        for collector in collectors:
            tg.start_soon(collector.run, bus.subscribe(CHAT))
        await asyncio.gather(*(bus.publish(CHAT, note(str(i))) for i in range(30)))
        await bus.end(CHAT)
        for collector in collectors:
            await collector.wait_until(lambda c=collector: c.finished)  # type: ignore[misc]
    assert host.client_count() == 1
    for collector in collectors:
        assert [e.seq for e in collector.items] == list(range(start + 1, start + 31))


async def test_a_stale_socket_is_replaced_and_a_live_host_is_refused(socket_dir: Path) -> None:
    path = socket_dir / "bus.sock"
    with BusHost(path), pytest.raises(OSError, match="another bus host"):
        BusHost(path).start()
    assert not path.exists()  # close removed its socket
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a host that died without cleaning up leaves its socket behind
    stale.close()
    with BusHost(path):
        bus = IpcBus(path)
        await bus.ping()
        await bus.aclose()
    path.write_text("not a socket")
    with pytest.raises(FileExistsError, match="not a socket"):
        BusHost(path).start()
