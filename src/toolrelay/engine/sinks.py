"""Event sinks the engine itself uses, and `stream_events`: a run as an event stream.

`stream_events` is how `Relay.stream` and `Conversation.stream` turn a run
into an async iterator: the run goes into a task writing to a queue, and the
iterator ends when the run does — after the final `chat:completion`
(`done: true`) come the background tasks' events (title, tags, follow-ups).
Leaving the iterator early cancels the run; its partial output is still saved.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.engine.interfaces import EventSink

__all__ = ["NullSink", "QueueSink", "stream_events"]

log = logging.getLogger(__name__)


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
            await _settle(task)


_SETTLING: set[asyncio.Task[Any]] = set()


async def _settle(task: asyncio.Task[Any]) -> None:
    """Wait for a cancelled run to save and close its upstream, without cancelling it again.

    `await task` would pass every cancellation of the waiting task on to the
    run: inside a cancelled anyio scope (Starlette's, when a client leaves a
    stream) that is one per await, and the run's cleanup itself got cancelled,
    leaking its upstream connection. `asyncio.wait` never cancels what it waits
    for; if we are cancelled meanwhile, the run finishes its cleanup alone.
    """
    task.add_done_callback(_retrieve)
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        _SETTLING.add(task)  # the loop holds tasks weakly: keep it alive until it is done
        task.add_done_callback(_SETTLING.discard)
        raise


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A run cancelled by its reader ends cancelled; a crash in its cleanup is logged."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("a cancelled turn failed while closing", exc_info=exc)
