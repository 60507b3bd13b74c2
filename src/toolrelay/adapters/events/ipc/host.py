"""`BusHost`: one `MemoryBus` served over a Unix socket to the processes of one machine.

The parent of `serve --workers N` hosts it; workers reach it through `IpcBus`.
The bus runs on the host's own event loop in a background thread, so every
invariant of `toolrelay.adapters.events` holds across the workers exactly as it
does inside one process: all of them talk to the same `MemoryBus`, and its
calls never await between a check and its update.

A client's requests are answered in the callback that read them, in order (the
bus's calls never await), and each open stream (subscription or control
listener) has a task; the frames of one loop turn go out in one write. A client that
sends a malformed frame or request is dropped; the host and its other clients
go on. Subscriptions are credit-based (the client grants `window` events and
more as it consumes), so a slow reader holds at most that many events in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import aclosing
from types import TracebackType
from typing import Any, Final, TypeVar, cast

from toolrelay.adapters.events import clock_seq_base
from toolrelay.adapters.events.codec import event_body
from toolrelay.adapters.events.ipc.frames import FrameError, FrameReader, FrameWriter, frame
from toolrelay.adapters.events.memory import MemoryBus
from toolrelay.core.events import Event

__all__ = ["BusHost"]

log = logging.getLogger("toolrelay.bus")

_MAX_WINDOW: Final = 1 << 16

T = TypeVar("T")


class _Malformed(Exception):
    """A well-framed message that is not a request this host understands."""


class BusHost:
    """Serves one `MemoryBus` at `path` until `close()`; usable as a context manager."""

    def __init__(self, path: str | os.PathLike[str], *, bus: MemoryBus | None = None) -> None:
        """`bus` defaults to a `MemoryBus` numbering new channels from the clock (invariant 6),
        so seqs stay above an earlier host's after a restart."""
        self.path = os.fspath(path)
        self.bus = bus if bus is not None else MemoryBus(seq_base=clock_seq_base)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._peers: set[_Peer] = set()
        self._inode: int | None = None
        self._error: BaseException | None = None

    def start(self) -> BusHost:
        """Listen (returns once the socket accepts connections) or raise why not."""
        if self._thread is not None:
            raise RuntimeError("this BusHost was already started")
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="toolrelay-bus-host", daemon=True
        )
        self._thread.start()
        ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def close(self) -> None:
        """Drop every client (their calls fail, their streams end with an error), stop, unlink."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None or not thread.is_alive():
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._unlink()

    def client_count(self) -> int:
        """Connected clients (each `IpcBus` holds one connection, however busy it is)."""
        return len(self._peers)

    def __enter__(self) -> BusHost:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the host thread ----------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            try:
                self._server = loop.run_until_complete(self._listen(loop))
            except BaseException as exc:
                self._error = exc
                return
            finally:
                ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()

    async def _listen(self, loop: asyncio.AbstractEventLoop) -> asyncio.AbstractServer:
        _clear_stale(self.path)
        server = await loop.create_unix_server(lambda: _Peer(self), self.path)
        os.chmod(self.path, 0o600)  # the socket is as private as the data dir
        self._inode = os.stat(self.path).st_ino
        return server

    async def _shutdown(self) -> None:
        """Clients first: their streams must see the host go, not a finished turn."""
        if self._server is not None:
            self._server.close()
        tasks = [task for peer in list(self._peers) for task in peer.abort()]
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.bus.aclose()

    def _unlink(self) -> None:
        """Remove the socket file if it is still the one this host made."""
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)


def _clear_stale(path: str) -> None:
    """A socket file left by a host that died is removed; one that answers is refused."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"bus socket path {path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
        return
    finally:
        probe.close()
    raise OSError(f"another bus host is serving at {path}")


class _Stream:
    """A host-side subscription or listener: its task and the credit the client granted."""

    __slots__ = ("credit", "refilled", "task")

    def __init__(self, credit: int) -> None:
        self.credit = credit
        self.refilled = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class _Peer(asyncio.Protocol):
    """One client connection: frames in, requests run in order, replies and streams out."""

    def __init__(self, host: BusHost) -> None:
        self._host = host
        self._bus = host.bus
        self._reader = FrameReader()
        self._writer: FrameWriter | None = None
        self._streams: dict[int, _Stream] = {}
        self._transport: asyncio.Transport | None = None

    # -- transport callbacks -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, though not always an `asyncio.Transport` instance: uvloop's
        # UnixTransport (the loop of a uvicorn worker) is none
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._writer = FrameWriter(transport, asyncio.get_running_loop())
        self._host._peers.add(self)

    def data_received(self, data: bytes) -> None:
        """Requests are answered here, in order: the bus's calls never suspend (`_done`)."""
        try:
            for message in self._reader.feed(data):
                self._handle(message)
        except FrameError as exc:
            self._drop(str(exc))
        except _Malformed as exc:
            self._drop(f"a malformed request: {exc}")
        except Exception:  # a bug here must not leave the client waiting forever
            log.exception("bus host: a request failed; dropping its client")
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.abort()
        self._host._peers.discard(self)

    def abort(self) -> list[asyncio.Task[None]]:
        """Stop this client's streams and close its socket; returns the tasks to wait for."""
        tasks = [s.task for s in self._streams.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        if self._transport is not None:
            self._transport.abort()
        return tasks

    def _drop(self, reason: str) -> None:
        log.warning("bus host: dropping a client that sent %s", reason)
        self.abort()

    def _send(self, message: list[Any]) -> None:
        if self._writer is not None:
            self._writer.push(frame(message))

    # -- requests --------------------------------------------------------------

    def _handle(self, message: Any) -> None:
        if type(message) is not list or len(message) < 2:
            raise _Malformed("not an [id, op, ...] array")
        rid, op = message[0], message[1]
        handler = _OPS.get(op) if type(op) is str else None
        if type(rid) is not int or handler is None:
            raise _Malformed(f"id {rid!r}, op {op!r}")
        try:
            handler(self, rid, message)
        except (IndexError, TypeError, KeyError) as exc:
            raise _Malformed(f"{op}: {type(exc).__name__}: {exc}") from None

    def _publish(self, rid: int, m: list[Any]) -> None:
        body = m[3]
        kind, data = body["type"], body["data"]
        if type(kind) is not str or type(data) is not dict:
            raise _Malformed("pub: an event needs a string type and an object data")
        self._send([rid, _done(self._bus.publish(_channel(m), Event(kind, data)))])

    def _acquire(self, rid: int, m: list[Any]) -> None:
        self._send([rid, _done(self._bus.acquire(_channel(m), ttl=_number(m[3])))])

    def _renew(self, rid: int, m: list[Any]) -> None:
        self._send([rid, _done(self._bus.renew(_channel(m), ttl=_number(m[3])))])

    def _send_control(self, rid: int, m: list[Any]) -> None:
        if type(m[3]) is not dict:
            raise _Malformed("ctl: a control message must be an object")
        self._send([rid, _done(self._bus.send_control(_channel(m), m[3]))])

    def _ping(self, rid: int, m: list[Any]) -> None:
        self._send([rid, None])

    # -- streams ---------------------------------------------------------------

    def _subscribe(self, rid: int, m: list[Any]) -> None:
        channel, after, until_end, window = _channel(m), m[3], m[4], m[5]
        if type(after) is not int or type(until_end) is not bool or type(window) is not int:
            raise _Malformed("sub: after, until_end and window must be int, bool, int")
        stream = self._open(rid, min(max(window, 1), _MAX_WINDOW))
        stream.task = asyncio.get_running_loop().create_task(
            self._follow(rid, stream, channel, after, until_end)
        )

    def _listen(self, rid: int, m: list[Any]) -> None:
        stream = self._open(rid, 0)
        stream.task = asyncio.get_running_loop().create_task(self._relay(rid, stream, _channel(m)))

    def _open(self, rid: int, credit: int) -> _Stream:
        if rid in self._streams:
            raise _Malformed(f"stream id {rid} is already open")
        stream = self._streams[rid] = _Stream(credit)
        return stream

    def _unsubscribe(self, rid: int, m: list[Any]) -> None:
        """Late unsubscribes (the stream already ended) are normal: ignored."""
        stream = self._streams.pop(rid, None)
        if stream is not None and stream.task is not None:
            stream.task.cancel()

    def _more(self, rid: int, m: list[Any]) -> None:
        if type(m[2]) is not int or m[2] < 1:
            raise _Malformed("more: credit must be a positive int")
        stream = self._streams.get(rid)
        if stream is not None:
            stream.credit = min(stream.credit + m[2], _MAX_WINDOW)
            stream.refilled.set()

    async def _follow(
        self, rid: int, stream: _Stream, channel: str, after: int, until_end: bool
    ) -> None:
        """The bus's own subscription, so retained and live parts join as in one process."""
        with self._closing(rid, stream):
            subscription = self._bus.subscribe(channel, after=after, until_end=until_end)
            async with aclosing(subscription) as envelopes:
                async for envelope in envelopes:
                    while stream.credit <= 0:
                        stream.refilled.clear()
                        await stream.refilled.wait()
                    stream.credit -= 1
                    body = event_body(envelope.event, envelope.published_at)
                    self._send([rid, "e", envelope.seq, body])
            self._send([rid, "end"])

    async def _relay(self, rid: int, stream: _Stream, channel: str) -> None:
        with self._closing(rid, stream):
            async with aclosing(self._bus.control(channel)) as messages:
                async for message in messages:
                    self._send([rid, "c", message])
            self._send([rid, "end"])

    @contextlib.contextmanager
    def _closing(self, rid: int, stream: _Stream) -> Iterator[None]:
        """Forget the stream when it ends; a failure drops the client rather than stall it."""
        try:
            yield
        except Exception:
            log.exception("bus host: a stream failed; dropping its client")
            self.abort()
        finally:
            if self._streams.get(rid) is stream:
                del self._streams[rid]


def _on_channel(
    method: Callable[[MemoryBus, str], Coroutine[Any, Any, Any]],
) -> Callable[[_Peer, int, list[Any]], None]:
    """A handler for a request whose only argument is the channel."""

    def handle(peer: _Peer, rid: int, m: list[Any]) -> None:
        peer._send([rid, _done(method(peer._bus, _channel(m)))])

    return handle


def _done(call: Coroutine[Any, Any, T]) -> T:
    """The result of a `MemoryBus` call run to its end right here.

    Its calls (all but the two streams) never await: that is how it makes a
    check and its update one step (invariants 1 and 5). So the host answers
    in the callback that read the request, with no task per request.
    """
    try:
        call.send(None)
    except StopIteration as finished:
        result: T = finished.value
        return result
    call.close()
    raise RuntimeError("a MemoryBus call suspended; the bus host needs them not to")


def _channel(m: list[Any]) -> str:
    channel = m[2]
    if type(channel) is not str:
        raise _Malformed("the channel must be a string")
    return channel


def _number(value: Any) -> float:
    if type(value) not in (int, float):
        raise _Malformed("a ttl must be a number")
    return float(value)


_OPS: Final[dict[str, Callable[[_Peer, int, list[Any]], None]]] = {
    "pub": _Peer._publish,
    "begin": _on_channel(MemoryBus.begin),
    "end": _on_channel(MemoryBus.end),
    "pause": _on_channel(MemoryBus.pause),
    "acq": _Peer._acquire,
    "renew": _Peer._renew,
    "last": _on_channel(MemoryBus.last_seq),
    "start": _on_channel(MemoryBus.turn_start),
    "running": _on_channel(MemoryBus.turn_running),
    "forget": _on_channel(MemoryBus.forget),
    "ctl": _Peer._send_control,
    "ping": _Peer._ping,
    "sub": _Peer._subscribe,
    "listen": _Peer._listen,
    "unsub": _Peer._unsubscribe,
    "more": _Peer._more,
}
"""Request ops (see `frames` for the framing; `IpcBus` is the one client)."""
