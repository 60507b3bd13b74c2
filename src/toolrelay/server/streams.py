"""Streamed /v1 answers: the turn writes its own frames, a watcher sends keep-alives.

Under load every hand-over between tasks costs one full turn of the event
loop, which with hundreds of streams open is tens of milliseconds each. So a
streamed answer has none on its way out: the turn runs in the request's own
task (`TurnStream`), and its sink renders each event and writes the frames to
the connection at once, exactly as a pass-through proxy forwards bytes. The
first token leaves in the same loop step that read it from the upstream, and
a slow client slows its own turn (the write waits), never the server.

One small watcher task per stream does the rest: while the turn is silent
(server-side tools running, a model thinking without streaming) it sends an
SSE comment every `keepalive` seconds, so proxies do not cut the connection;
when the client hangs up it cancels the turn, which saves what it has and
closes its upstream. `cancel_streams` (shutdown) cancels every running turn;
its stream stays open for the turn's final frames, which then say the server
stopped (an error line and `[DONE]` in Chat Completions), so a client can tell
a cut answer from a whole one. Either way the sink keeps the turn's final
event (`final`): the request log records a cut turn from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.engine.interfaces import EventSink
from toolrelay.server.gate import Gate, gate

__all__ = ["KEEPALIVE", "SHUTDOWN_ERROR", "SSE_HEADERS", "TurnStream", "Writer", "cancel_streams"]

KEEPALIVE: Final = b": keep-alive\n\n"
SHUTDOWN_ERROR: Final = "The server is shutting down: this answer was cut short; send it again."
SSE_HEADERS: Final = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class Writer(Protocol):
    """Renders one response's events as SSE bytes (`core.formats` stream writers)."""

    @property
    def done(self) -> bool: ...

    def start(self) -> bytes: ...

    def feed(self, event: Event) -> bytes: ...


class _FrameSink:
    """The turn's sink: each event's frames go straight to the connection."""

    __slots__ = (
        "_send",
        "_writer",
        "_now",
        "_gate",
        "last",
        "open",
        "complete",
        "stopped",
        "flowing",
        "shutdown",
        "final",
    )

    def __init__(
        self, send: Send, writer: Writer, now: Callable[[], float], gate: Gate, *, entered: bool
    ) -> None:
        self._send = send
        self._writer = writer
        self._now = now
        self._gate = gate
        if not entered:  # else the front door counted this chat as starting already
            gate.enter()
        self.flowing = False
        """The first frames went out: from now on this stream gives way to starting chats."""
        self.last = now()
        """When the last bytes went out (the loop's clock): the watcher's silence starts here."""
        self.open = True
        """False once the body is complete, the client left or the server stops."""
        self.complete = False
        """The body's last message went out."""
        self.stopped = False
        """The turn was cancelled from here: the client left, or the server stops."""
        self.shutdown = False
        """The server stops: the final event's error says so."""
        self.final: dict[str, Any] | None = None
        """The data of the turn's final event (`chat:completion`, done), once it came."""

    async def emit(self, event: Event) -> None:
        if event.type == ev.CHAT_COMPLETION and event.data.get("done"):
            self.final = event.data
            if self.shutdown:
                event = Event(event.type, {**event.data, "error": {"content": SHUTDOWN_ERROR}})
        if not self.open:
            return
        writer = self._writer
        frames = writer.feed(event)
        if frames:
            await self.write(frames)
            if not self.flowing:
                self.started()
        if writer.done:
            await self.end()
        elif self.flowing:
            await self._gate.give_way()

    def started(self) -> None:
        """The first token went out (or the stream ended without one)."""
        if not self.flowing:
            self.flowing = True
            self._gate.leave()

    async def write(self, data: bytes) -> None:
        self.last = self._now()
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def end(self) -> None:
        self.open = False
        if not self.complete:
            self.complete = True
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})


_STREAMS: dict[asyncio.Task[Any], _FrameSink] = {}


class TurnStream(Response):
    """A streamed answer whose turn runs in the request's task (module doc).

    `run(sink)` runs the turn with the given sink (`relay.run(messages, sink=sink, …)`).
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        run: Callable[[EventSink], Awaitable[object]],
        writer: Writer,
        keepalive: float,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers(SSE_HEADERS)
        self._run = run
        self._writer = writer
        self._keepalive = keepalive
        self.gate_entered = False
        """The front door (`V1Front`) counted this chat as starting: the sink only leaves."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        sink = _FrameSink(send, self._writer, loop.time, gate(), entered=self.gate_entered)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        except BaseException:
            sink.started()  # no first token will come: stop counting this chat as starting
            raise
        watcher = loop.create_task(_watch(receive, sink, task, self._keepalive))
        _STREAMS[task] = sink
        try:
            await sink.write(self._writer.start())
            await self._run(sink)
        except asyncio.CancelledError:
            if not sink.stopped or task.cancelling() > 1:  # not ours: pass it on
                raise
            task.uncancel()  # ours (the client left, the server stops): the turn saved its part
        finally:
            del _STREAMS[task]
            watcher.cancel()
            sink.started()
        await sink.end()  # a stream its client left ends cut (at shutdown the final frames went)


async def _watch(receive: Receive, sink: _FrameSink, turn: asyncio.Task[Any], every: float) -> None:
    """Keep-alives while the turn is silent; cancel the turn when the client hangs up."""
    loop = asyncio.get_running_loop()
    while sink.open:
        wait = sink.last + every - loop.time()
        if wait <= 0:
            await sink.write(KEEPALIVE)
            continue
        try:
            async with asyncio.timeout(wait):
                message = await receive()
        except TimeoutError:
            continue
        if message["type"] == "http.disconnect":
            if sink.open:  # else the body is complete: nothing to stop
                _stop(turn, sink)
            return


def _stop(turn: asyncio.Task[Any], sink: _FrameSink, *, shutdown: bool = False) -> None:
    if not sink.stopped:
        if shutdown:  # the client still listens: the final frames say the server stopped
            sink.shutdown = True
        else:  # the client left: nothing more goes out
            sink.open = False
        sink.stopped = True
        turn.cancel()


async def cancel_streams() -> None:
    """Cancel every /v1 stream's turn (the shutdown grace is over) and wait for them to close."""
    turns = list(_STREAMS.items())
    for turn, sink in turns:
        _stop(turn, sink, shutdown=True)
    await asyncio.gather(*(t for t, _ in turns), return_exceptions=True)
