"""Event sinks the engine itself uses, and `stream_events`: a run as an event stream.

`stream_events` is how `Relay.stream` and `Conversation.stream` turn a run
into an async iterator: the run goes into a task writing to a queue, and the
iterator ends when the run does — after the final `chat:completion`
(`done: true`) come the background tasks' events (title, tags, follow-ups).
Leaving the iterator early cancels the run; its partial output is still saved.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.engine.interfaces import EventSink

__all__ = ["NullSink", "QueueSink", "stream_events"]


class QueueSink:
    """Hands events to a consumer through an unbounded queue (None: no more events)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()

    async def emit(self, event: Event) -> None:
        self.queue.put_nowait(event)


class NullSink:
    async def emit(self, event: Event) -> None:
        return None


async def stream_events(
    run: Callable[[EventSink], Coroutine[Any, Any, object]],
) -> AsyncGenerator[Event, None]:
    """The events `run(sink)` emits, as they happen (module doc)."""
    sink = QueueSink()
    task = asyncio.get_running_loop().create_task(run(sink))
    task.add_done_callback(lambda _: sink.queue.put_nowait(None))  # wakes the reader at the end
    answered = False
    try:
        while (event := await sink.queue.get()) is not None:
            yield event
            if event.type == ev.CHAT_COMPLETION and event.data.get("done"):
                answered = True
        if not answered:
            task.result()  # the run ended without its final event: re-raise its crash
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
