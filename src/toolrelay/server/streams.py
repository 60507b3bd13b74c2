"""Streamed answers' lifecycle: SSE comments while the turn is silent.

While server-side tools run (or a model thinks without streaming), a /v1
stream would send nothing for as long as they take, and proxies cut idle
connections. `with_keepalive` moves the turn's events through a one-slot
queue, read with a timeout: when nothing came for `every` seconds, it yields
`None` and the route sends an SSE comment. The source is iterated by a pump
task; leaving early (the client went away) cancels the pump once, which
closes the source (the turn saves and closes its upstream), and the pump is
kept referenced until that cleanup is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final, Protocol, TypeVar

from toolrelay.core.events import Event

T = TypeVar("T")

KEEPALIVE: Final = b": keep-alive\n\n"


class Writer(Protocol):
    """Renders one response's events as SSE bytes (`core.formats` stream writers)."""

    @property
    def done(self) -> bool: ...

    def start(self) -> bytes: ...

    def feed(self, event: Event) -> bytes: ...


async def sse_body(
    events: AsyncIterator[Event], writer: Writer, keepalive: float
) -> AsyncIterator[bytes]:
    """A streamed /v1 answer's body: the writer's frames, and a comment in each silence."""
    yield writer.start()
    async for event in with_keepalive(events, keepalive):
        if event is None:  # silence (tools running): tell proxies the stream is alive
            yield KEEPALIVE
            continue
        frames = writer.feed(event)
        if frames:
            yield frames
        if writer.done:
            return


_END: Final = object()
_PUMPS: set[asyncio.Task[Any]] = set()


async def with_keepalive(source: AsyncIterator[T], every: float) -> AsyncIterator[T | None]:
    """The items of `source`, with `None` after each `every` seconds without one."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1)  # keeps the reader's back-pressure
    pump = asyncio.get_running_loop().create_task(_pump(source, queue))
    _PUMPS.add(pump)
    pump.add_done_callback(_PUMPS.discard)
    try:
        while True:
            try:
                async with asyncio.timeout(every):
                    item = await queue.get()
            except TimeoutError:
                if pump.done() and queue.empty():  # cancelled at shutdown: nothing more comes
                    return
                yield None
                continue
            if item is _END:
                return
            if isinstance(item, _Raised):
                raise item.error
            yield item
    finally:
        pump.cancel()  # a no-op once the source ended; else it closes the source


class _Raised:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def cancel_streams() -> None:
    """Cancel every /v1 stream's turn (the shutdown grace is over) and wait for them to close."""
    pumps = list(_PUMPS)
    for pump in pumps:
        pump.cancel()
    await asyncio.gather(*pumps, return_exceptions=True)


async def _pump(source: AsyncIterator[Any], queue: asyncio.Queue[Any]) -> None:
    try:
        async for item in source:
            await queue.put(item)
    except Exception as exc:  # the reader re-raises it where the stream is rendered
        await queue.put(_Raised(exc))
        return
    await queue.put(_END)
