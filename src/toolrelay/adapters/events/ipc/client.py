"""`IpcBus`: the `EventBus` a worker uses to reach its machine's `BusHost`.

Every call and stream of one `IpcBus` shares one Unix socket, told apart by
request ids; a call costs one frame each way and one future, with no task of
its own, and the frames of one loop turn (many chats publishing) go out in one write. The socket opens on first use: a host that is not up yet is retried
for `connect_timeout` seconds (the parent starts it before its workers, but
need not have finished), then `BusUnavailable` says where it looked.

When the host goes away, pending and later calls raise `BusUnavailable` (a
`ConnectionError`) and live subscribers and listeners end with it, as the Redis
bus's do when Redis goes; the next call dials again, once, without the start-up
patience. `aclose` ends subscribers and listeners quietly, as `MemoryBus` does.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import AsyncGenerator
from typing import Any, Final, cast

from toolrelay.adapters.events import Envelope
from toolrelay.adapters.events.codec import body_envelope, event_body
from toolrelay.adapters.events.ipc.frames import (
    BusUnavailable,
    FrameError,
    FrameReader,
    FrameWriter,
    frame,
)
from toolrelay.core.events import Event

__all__ = ["IpcBus"]

_MAX_AFTER: Final = (1 << 63) - 1
"""Past every seq a bus issues; larger `after`s mean the same and stay a JSON int64."""

_CLOSED: Final = object()
"""Fed to streams by `aclose`: they finish without an error."""


class IpcBus:
    """An `EventBus` whose state lives in the `BusHost` listening at `path`."""

    def __init__(
        self, path: str | os.PathLike[str], *, connect_timeout: float = 5.0, window: int = 256
    ) -> None:
        """`window`: events a subscription may have in flight before it is read (flow control)."""
        self.path = os.fspath(path)
        self._connect_timeout = connect_timeout
        self._window = max(2, window)
        self._link: _Link | None = None
        self._lock = asyncio.Lock()
        self._dialled = False
        self._closed = False

    # -- calls ---------------------------------------------------------------

    async def publish(self, channel: str, event: Event) -> int:
        link = self._link or await self._connect()
        seq: int = await link.call("pub", channel, event_body(event))
        return seq

    async def begin(self, channel: str) -> int:
        link = self._link or await self._connect()
        start: int = await link.call("begin", channel)
        return start

    async def acquire(self, channel: str, *, ttl: float) -> int | None:
        link = self._link or await self._connect()
        start: int | None = await link.call("acq", channel, ttl)
        return start

    async def renew(self, channel: str, *, ttl: float) -> bool:
        link = self._link or await self._connect()
        return bool(await link.call("renew", channel, ttl))

    async def end(self, channel: str) -> None:
        link = self._link or await self._connect()
        await link.call("end", channel)

    async def pause(self, channel: str) -> None:
        link = self._link or await self._connect()
        await link.call("pause", channel)

    async def last_seq(self, channel: str) -> int:
        link = self._link or await self._connect()
        seq: int = await link.call("last", channel)
        return seq

    async def turn_start(self, channel: str) -> int:
        link = self._link or await self._connect()
        start: int = await link.call("start", channel)
        return start

    async def turn_running(self, channel: str) -> bool:
        link = self._link or await self._connect()
        return bool(await link.call("running", channel))

    async def forget(self, channel: str) -> None:
        link = self._link or await self._connect()
        await link.call("forget", channel)

    async def send_control(self, channel: str, message: dict[str, Any]) -> int:
        link = self._link or await self._connect()
        count: int = await link.call("ctl", channel, message)
        return count

    async def ping(self) -> None:
        """A round trip to the host; raises `BusUnavailable` when there is none."""
        link = self._link or await self._connect()
        await link.call("ping")

    # -- streams ---------------------------------------------------------------

    async def subscribe(
        self, channel: str, *, after: int = 0, until_end: bool = True
    ) -> AsyncGenerator[Envelope, None]:
        """The host's `MemoryBus.subscribe`, relayed; grants credit as events are read."""
        if self._closed:
            return
        link = self._link or await self._connect()
        after = min(max(after, 0), _MAX_AFTER)
        rid, stream = link.open("sub", channel, after, until_end, self._window)
        half = self._window // 2
        read = 0
        try:
            while True:
                item = stream.items.popleft() if stream.items else await stream.next()
                if type(item) is list:
                    if item[1] != "e":
                        return
                    yield body_envelope(item[2], item[3])
                    read += 1
                    if read == half:
                        link.send([rid, "more", read])
                        read = 0
                elif item is _CLOSED:
                    return
                else:
                    raise item
        finally:
            link.close(rid)

    async def control(self, channel: str) -> AsyncGenerator[dict[str, Any], None]:
        """Listens from the first `__anext__` (once the host has the request)."""
        if self._closed:
            return
        link = self._link or await self._connect()
        rid, stream = link.open("listen", channel)
        try:
            while True:
                item = await stream.next()
                if type(item) is list:
                    if item[1] != "c":
                        return
                    yield item[2]
                elif item is _CLOSED:
                    return
                else:
                    raise item
        finally:
            link.close(rid)

    async def aclose(self) -> None:
        """End streams quietly, fail pending calls, close the socket; the host keeps the bus."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            link, self._link = self._link, None
        if link is not None:
            await link.shut()

    # -- the connection ------------------------------------------------------------

    async def _connect(self) -> _Link:
        """Dial the host: patiently the first time, once after a lost connection."""
        async with self._lock:
            if self._closed:
                raise BusUnavailable(f"the bus at {self.path} is closed")
            if self._link is not None:
                return self._link
            loop = asyncio.get_running_loop()
            patience = 0.0 if self._dialled else self._connect_timeout
            deadline = loop.time() + patience
            pause = 0.005
            while True:
                try:
                    _, link = await loop.create_unix_connection(
                        lambda: _Link(self, loop), self.path
                    )
                    break
                except (FileNotFoundError, ConnectionRefusedError) as exc:
                    left = deadline - loop.time()
                    if left <= 0:
                        raise BusUnavailable(
                            f"no bus host at {self.path} ({exc.strerror}; waited {patience:g} s):"
                            " the parent `toolrelay serve` process hosts it"
                        ) from exc
                    await asyncio.sleep(min(pause, left))
                    pause = min(pause * 2, 0.1)
                except OSError as exc:
                    raise BusUnavailable(
                        f"cannot reach the bus host at {self.path}: {exc}"
                    ) from exc
            self._dialled = True
            self._link = link
            return link

    def _lost(self, link: _Link) -> None:
        if self._link is link:
            self._link = None


class _Stream:
    """Items the host sent for one subscription or listener, waiting to be read."""

    __slots__ = ("items", "waiter")

    def __init__(self) -> None:
        self.items: deque[Any] = deque()
        self.waiter: asyncio.Future[None] | None = None

    def feed(self, item: Any) -> None:
        self.items.append(item)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next(self) -> Any:
        while not self.items:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.items.popleft()


class _Link(asyncio.Protocol):
    """One socket to the host: routes replies to their futures and stream items to streams."""

    def __init__(self, bus: IpcBus, loop: asyncio.AbstractEventLoop) -> None:
        self._bus = bus
        self._loop = loop
        self._reader = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._writer: FrameWriter | None = None
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._streams: dict[int, _Stream] = {}
        self._next_id = 1
        self._error: str | None = None
        self._gone = loop.create_future()

    def call(self, op: str, *args: Any) -> asyncio.Future[Any]:
        """Send a request; the future gets its reply (or `BusUnavailable`)."""
        if self._error is not None:
            raise BusUnavailable(self._error)
        rid = self._next_id
        payload = frame([rid, op, *args])  # before registering: bad data raises here
        self._next_id = rid + 1
        future = self._calls[rid] = self._loop.create_future()
        self._writer.push(payload)  # type: ignore[union-attr]  # set when connected
        return future

    def open(self, op: str, *args: Any) -> tuple[int, _Stream]:
        """Start a stream; its items arrive in the returned `_Stream`."""
        if self._error is not None:
            raise BusUnavailable(self._error)
        rid = self._next_id
        self._next_id = rid + 1
        stream = self._streams[rid] = _Stream()
        self.send([rid, op, *args])
        return rid, stream

    def close(self, rid: int) -> None:
        """The reader is done with a stream; tells the host unless the stream had ended."""
        if self._streams.pop(rid, None) is not None:
            self.send([rid, "unsub"])

    def send(self, message: list[Any]) -> None:
        if self._error is None and self._writer is not None:
            self._writer.push(frame(message))

    async def shut(self) -> None:
        for stream in self._streams.values():
            stream.feed(_CLOSED)
        self._streams.clear()
        self._fail(f"the bus at {self._bus.path} is closed")
        if self._transport is not None:
            self._transport.abort()
        await self._gone

    # -- transport callbacks ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, though not always an `asyncio.Transport` instance: uvloop's
        # UnixTransport (the loop of a uvicorn worker) is none
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._writer = FrameWriter(transport, self._loop)

    def data_received(self, data: bytes) -> None:
        calls, streams = self._calls, self._streams
        try:
            for message in self._reader.feed(data):
                rid = message[0]
                future = calls.pop(rid, None)
                if future is not None:
                    if not future.done():
                        future.set_result(message[1])
                    continue
                stream = streams.get(rid)
                if stream is not None:
                    if message[1] not in ("e", "c"):
                        del streams[rid]  # ended by the host: no unsubscribe needed
                    stream.feed(message)
        except (FrameError, TypeError, IndexError, KeyError) as exc:
            self._fail(f"the bus host at {self._bus.path} sent a malformed frame: {exc}")
            if self._transport is not None:
                self._transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc is not None else ""
        self._fail(f"lost the bus host at {self._bus.path}{reason}")
        self._bus._lost(self)
        if not self._gone.done():
            self._gone.set_result(None)

    def _fail(self, reason: str) -> None:
        """Fail every pending call and stream with `reason`; later calls raise it too."""
        if self._error is not None:
            return
        self._error = reason
        calls, self._calls = self._calls, {}
        for future in calls.values():
            if not future.done():
                future.set_exception(BusUnavailable(reason))
        streams, self._streams = self._streams, {}
        for stream in streams.values():
            stream.feed(BusUnavailable(reason))
