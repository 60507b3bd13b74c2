"""One model response read to its end, for `engine.loop.Turn`.

The body goes to a `BodyReader` as it arrives and its events out through the
turn's coalescer as they are made; the turn's state (output, usage) is the
caller's. Kept apart from the loop because it is the hot path of every turn and
has rules of its own:

1. A fault never raises: a refused call or a dropped body becomes the result's
   error, with what was read before it kept (`BodyReader.finish(dropped=True)`).
2. While a body is being read, `open` is its reader, so a turn that crashes or is
   cancelled mid-body can keep what it produced (`salvage`).
3. A body that said it was over is read to its end for at most `END_GRACE_S`, so
   its connection goes back to the pool.
4. The ids a new call may not reuse (the history's, the turn's) are kept up to date,
   not rescanned per call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Mapping, Sequence

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.transcript import used_call_ids
from toolrelay.core.items import Item
from toolrelay.core.stream.deltas import ErrorDelta
from toolrelay.core.stream.reader import BodyReader, ReadResult
from toolrelay.engine.coalesce import Coalescer
from toolrelay.engine.interfaces import Message, ModelRequest, ModelStream
from toolrelay.engine.observer import ModelCall
from toolrelay.engine.setup import TurnSetup
from toolrelay.errors import ProviderError

__all__ = ["END_GRACE_S", "ResponseReading", "error_event"]

END_GRACE_S = 0.25
"""How long the end of a body that said it was over (`[DONE]`) is waited for."""


class ResponseReading:
    """Reads a turn's model responses, one at a time (module doc)."""

    def __init__(self, setup: TurnSetup, emitter: Coalescer) -> None:
        self.setup = setup
        self.emitter = emitter
        self.open: BodyReader | None = None
        """The reader of the body being read (rule 2)."""
        self._ids_of: Sequence[Message] | None = None
        self._history_ids: set[str] = set()
        self._output_ids: set[str] = set()
        self._ids_seen = 0

    async def read(
        self,
        request: ModelRequest,
        call: ModelCall | None,
        output: Sequence[Item],
        *,
        text_tools: Collection[str],
        made_up_calls: bool,
    ) -> ReadResult:
        """The response to `request`; `output` is the turn's so far (item indexes, ids)."""
        setup, emitter = self.setup, self.emitter
        opened = setup.clock() if call is not None else 0.0
        try:
            stream = await setup.client.open(request)
        except ProviderError as exc:
            await emitter.emit(error_event(exc.message))
            return ReadResult([], None, None, exc.message, None, True)
        if call is not None:
            call.ttfb_s = setup.clock() - opened
        reader = self.open = BodyReader(
            stream.format,
            tags=setup.model.tags,
            clock=setup.clock,
            offset=len(output),
            quiet=emitter.quiet,
            call_ids=self.used_call_ids(request.messages, output),
            text_tools=text_tools,
            made_up_calls=made_up_calls,
        )
        dropped = False
        emit_many, feed, acc = emitter.emit_many, reader.feed, reader.acc
        quiet, runs_code = emitter.quiet, setup.code.runner is not None
        try:
            async for chunk in stream:
                events = feed(chunk)
                if events and not quiet:
                    await emit_many(events)
                if runs_code and acc.code_closed:
                    reader.stop()  # run the block now; the rest of the stream is not read
                    break
                if reader.stopped:
                    await _read_end(stream)
                    break
        except ProviderError as exc:
            dropped = True
            await emit_many(reader.acc.feed(ErrorDelta(exc.message)))
        finally:
            await stream.aclose()
        await emit_many(reader.finish(dropped=dropped))
        self.open = None
        return reader.result()

    def salvage(self) -> list[Item]:
        """What the body being read produced so far (rule 2); [] when none is open."""
        reader, self.open = self.open, None
        if reader is None:
            return []
        reader.finish(dropped=True)
        return reader.result().output

    def used_call_ids(self, messages: Sequence[Message], output: Sequence[Item]) -> set[str]:
        """`used_call_ids(messages, output)`, kept up to date instead of made anew per
        model call (the scan grew with every round): the history's ids once per messages
        object, the output's as items are added (a replaced item keeps its call id)."""
        if messages is not self._ids_of:
            self._ids_of, self._history_ids = messages, used_call_ids(messages, ())
        ids = self._output_ids
        for item in output[self._ids_seen :]:
            call_id = item.get("call_id") if isinstance(item, Mapping) else None
            if isinstance(call_id, str) and call_id:
                ids.add(call_id)
        self._ids_seen = len(output)
        return self._history_ids | ids


async def _read_end(stream: ModelStream) -> None:
    """Read the rest of a body that said it was over (rule 3): a body closed before its
    end costs its connection (the next call opens a new one, TLS included), one read to
    the end puts it back in the pool. A server that keeps the body open after `[DONE]`
    delays the turn by `END_GRACE_S` at most; what it sends then is ignored. A stream with
    a `drain(grace)` (`UpstreamBody`) does it on the timer it already has."""
    drain = getattr(stream, "drain", None)
    if drain is not None:
        await drain(END_GRACE_S)
        return
    with contextlib.suppress(TimeoutError, ProviderError):
        async with asyncio.timeout(END_GRACE_S):
            async for _ in stream:
                pass


def error_event(message: str) -> Event:
    """The turn's error as clients see it."""
    return ev.event(ev.CHAT_MESSAGE_ERROR, {"error": {"content": message}})
