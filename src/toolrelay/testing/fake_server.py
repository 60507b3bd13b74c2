"""A fake model server on a real socket, for tests and benchmarks.

This module owns a tiny HTTP/1.1 server (raw `asyncio` streams + `h11`) that
serves scripted replies in the real wire formats (SSE, NDJSON, JSON) and can
misbehave on purpose at the byte level: delay the first byte, stall mid-body
with the connection open, or abort the TCP connection mid-body. It runs its
own event loop in a background thread so that sync tests, async tests on any
loop and benchmarks can all point real clients (aiohttp, httpx2, the `openai` SDK) at
`base_url`.

Invariants:
1. A request always gets an answer: a scripted reply, the default, or a 500
   JSON error saying why (never a hang on a mis-scripted test).
2. Every request is recorded, in arrival order, before its reply is chosen.
3. A client that disconnects is noticed even while its reply is stalled, so
   `open_connections` returns to 0 without waiting out the stall.
4. `stop()` closes every connection and joins the thread; nothing outlives it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from typing import Any
from urllib.parse import urlsplit

import h11
import orjson

from toolrelay.testing.replies import (
    BodyReply,
    JSONReply,
    NDJSONReply,
    Plan,
    RawReply,
    RecordedRequest,
    Reply,
    SSEReply,
    error_plan,
    resolve,
)

__all__ = [
    "BodyReply",
    "FakeModelServer",
    "JSONReply",
    "NDJSONReply",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "SSEReply",
]

log = logging.getLogger(__name__)

_READ_SIZE = 65536


def _parse_json(body: bytes) -> Any:
    try:
        return orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        return None


class _Conn:
    """One client connection: the h11 state machine plus the stream pair it reads and writes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.h11 = h11.Connection(h11.SERVER)
        self.reader = reader
        self.writer = writer

    async def next_event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.h11.receive_data(await self.reader.read(_READ_SIZE))

    async def read_request(self) -> RecordedRequest | None:
        """The next full request, or None once the client has closed the connection."""
        event = await self.next_event()
        if isinstance(event, h11.ConnectionClosed):
            return None
        if not isinstance(event, h11.Request):
            raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}")
        chunks: list[bytes] = []
        while not isinstance(part := await self.next_event(), h11.EndOfMessage):
            if not isinstance(part, h11.Data):
                return None
            chunks.append(bytes(part.data))
        target = urlsplit(event.target.decode("latin-1"))
        body = b"".join(chunks)
        return RecordedRequest(
            method=event.method.decode("ascii"),
            path=target.path,
            query=target.query,
            headers={k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers},
            body=body,
            json=_parse_json(body),
        )

    async def send(self, plan: Plan) -> bool:
        """Write one reply; False if it deliberately dropped the connection."""
        if plan.ttfb_delay:
            await asyncio.sleep(plan.ttfb_delay)
        headers = list(plan.headers)
        if not plan.streamed and all(k != "content-length" for k, _ in headers):
            headers.append(("content-length", str(sum(len(p) for p in plan.pieces))))
        head = self.h11.send(h11.Response(status_code=plan.status, headers=headers)) or b""
        if not plan.streamed:  # one write: the fast path benchmarks rely on
            body = [self.h11.send(h11.Data(data=p)) or b"" for p in plan.pieces]
            tail = self.h11.send(h11.EndOfMessage()) or b""
            self.writer.write(b"".join([head, *body, tail]))
            await self.writer.drain()
            return True
        self.writer.write(head)
        await self.writer.drain()
        return await self._send_paced(plan)

    async def _send_paced(self, plan: Plan) -> bool:
        """One chunk per piece, with delay/stall/drop applied between pieces."""
        for index in range(len(plan.pieces) + 1):
            if index == plan.drop_after:
                self.writer.transport.abort()  # no terminating chunk: a truncated body
                return False
            if index == plan.stall_after:
                await asyncio.sleep(plan.stall_for)
            if (hold := plan.holds.get(index)) is not None:
                # short waits in a thread: a client hanging up cancels this between two
                while not await asyncio.to_thread(hold.wait, 0.2):
                    pass
            if index == len(plan.pieces):
                break
            if index and plan.delay:
                await asyncio.sleep(plan.delay)
            self.writer.write(self.h11.send(h11.Data(data=plan.pieces[index])) or b"")
            await self.writer.drain()
        self.writer.write(self.h11.send(h11.EndOfMessage()) or b"")
        await self.writer.drain()
        return True

    async def send_watching(self, plan: Plan) -> bool:
        """Send while watching for the client to hang up (so stalls end when the client leaves)."""
        sending = asyncio.create_task(self.send(plan))
        watching = asyncio.create_task(self.reader.read(_READ_SIZE))
        try:
            await asyncio.wait({sending, watching}, return_when=asyncio.FIRST_COMPLETED)
            if watching.done():
                data = watching.result()
                self.h11.receive_data(data)  # pipelined bytes are kept; b"" records EOF
                if not data:
                    return False
            return await sending
        finally:
            for task in (sending, watching):
                task.cancel()
            await asyncio.gather(sending, watching, return_exceptions=True)


async def _cancel_other_tasks() -> None:
    """Cancel every other task of the server's loop until none is left.

    A connection accepted just before shutdown has a handler task that has not
    run yet (so it is in no set of ours): all of the loop's tasks are taken.
    """
    current = asyncio.current_task()
    while others := [task for task in asyncio.all_tasks() if task is not current]:
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)


class FakeModelServer:
    """A scripted HTTP model server on 127.0.0.1 in a background thread; see the module doc."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, backlog: int = 1024) -> None:
        """`backlog`: connections waiting to be accepted; asyncio's 100 drops the SYNs of a
        larger burst, and their 1 s retransmits would pass for a slow proxy in benchmarks."""
        self.host = host
        self.port = port
        self.backlog = backlog
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._routes: dict[str, deque[Reply]] = {}
        self._default: Reply | None = None
        self._open = 0
        self.accepted = 0
        """Client connections accepted so far (a reused connection counts once)."""
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transports: set[asyncio.WriteTransport] = set()
        self._startup_error: BaseException | None = None

    def script(self, *replies: Reply) -> None:
        """Queue replies for any path; each request pops the next one."""
        with self._lock:
            self._queue.extend(replies)

    def route(self, path: str, *replies: Reply) -> None:
        """Queue replies for one path; these win over `script()` while any are left."""
        with self._lock:
            self._routes.setdefault(path, deque()).extend(replies)

    def set_default(self, reply: Reply | None) -> None:
        """Serve `reply` whenever the queues are empty (None: answer 500 "no scripted reply")."""
        with self._lock:
            self._default = reply

    def reset(self) -> None:
        """Forget queued replies, the default and recorded requests (between benchmark rounds)."""
        with self._lock:
            self._queue.clear()
            self._routes.clear()
            self._default = None
            self.requests.clear()

    @property
    def open_connections(self) -> int:
        """Client connections currently open."""
        return self._open

    def wait_for_connections(self, count: int = 0, timeout: float = 30.0) -> bool:
        """Poll until `open_connections == count`; the server sees a client's close asynchronously."""
        deadline = time.monotonic() + timeout
        while self._open != count:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    @property
    def base_url(self) -> str:
        """`http://HOST:PORT` with no path; clients add `/v1/...` themselves."""
        if self._thread is None:
            raise RuntimeError("FakeModelServer is not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        """Bind and start serving; returns once the port is known."""
        if self._thread is not None:
            raise RuntimeError("FakeModelServer is already started")
        ready = threading.Event()
        self._startup_error = None
        thread = threading.Thread(target=self._run, args=(ready,), name="fake-model-server")
        thread.daemon = True
        thread.start()
        ready.wait()
        if self._startup_error is not None:
            thread.join()
            raise RuntimeError("FakeModelServer failed to start") from self._startup_error
        self._thread = thread

    def stop(self) -> None:
        """Close every connection, stop the loop and join the thread. Idempotent."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        self._thread = None
        self._loop = None

    def __enter__(self) -> FakeModelServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            server = loop.run_until_complete(
                asyncio.start_server(self._handle, self.host, self.port, backlog=self.backlog)
            )
        except BaseException as exc:
            self._startup_error = exc
            loop.close()
            ready.set()
            return
        self.port = server.sockets[0].getsockname()[1]
        self._loop = loop
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._shutdown(server))
            loop.close()

    async def _shutdown(self, server: asyncio.Server) -> None:
        server.close()
        await server.wait_closed()
        await _cancel_other_tasks()
        for transport in self._transports:
            transport.abort()
        await asyncio.sleep(0)  # let aborted transports run connection_lost
        await _cancel_other_tasks()  # a connection accepted as the server closed

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._transports.add(writer.transport)
        self._open += 1
        self.accepted += 1
        try:
            await self._serve(_Conn(reader, writer))
        except (ConnectionError, h11.ProtocolError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("fake server: connection handler failed")
        finally:
            writer.close()  # flushes what was written; a dropped connection is already gone
            if writer.transport.get_write_buffer_size() == 0:
                self._transports.discard(writer.transport)
            self._open -= 1

    async def _serve(self, conn: _Conn) -> None:
        while True:
            request = await conn.read_request()
            if request is None:
                return
            with self._lock:
                self.requests.append(request)
                reply = self._pick(request.path)
            plan = error_plan(f"no scripted reply for {request.method} {request.path}")
            if reply is not None:
                plan = resolve(reply, request)
            if not await conn.send_watching(plan):
                return
            if conn.h11.our_state is not h11.DONE or conn.h11.their_state is not h11.DONE:
                return
            conn.h11.start_next_cycle()

    def _pick(self, path: str) -> Reply | None:
        """Route queue, then the shared queue, then the default. Caller holds the lock."""
        routed = self._routes.get(path)
        if routed:
            return routed.popleft()
        if self._queue:
            return self._queue.popleft()
        return self._default
