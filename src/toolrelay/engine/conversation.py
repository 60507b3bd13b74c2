"""`Conversation`: turns that remember each other (`relay.chat()`).

`Relay.run` is stateless: it answers the messages it is given. A
`Conversation` keeps the history for the caller: after each turn it appends
the new user message and the turn's output as Chat Completions messages
(assistant text, tool calls with their results; `core.formats.transcript` rules), so
the next turn sees them. A turn that fails is remembered with what it
produced; a cancelled turn, or a stream left before its final event, is not.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import TYPE_CHECKING, Any

from toolrelay.core.events import Event
from toolrelay.core.formats.transcript import to_chat_messages
from toolrelay.engine.finish import RunResult
from toolrelay.engine.interfaces import EventSink, Message
from toolrelay.engine.sinks import stream_events

if TYPE_CHECKING:
    from toolrelay.engine.relay import Relay

__all__ = ["Conversation"]


class Conversation:
    """A relay plus the history so far; `run` / `stream` take only the new message."""

    def __init__(
        self, relay: Relay, *, system: str | None = None, history: Sequence[Message] = ()
    ) -> None:
        self.relay = relay
        self.messages: list[Message] = [{"role": "system", "content": system}] if system else []
        self.messages.extend(dict(m) for m in history)

    async def run(self, message: str | Message, **kwargs: Any) -> RunResult:
        """One turn on top of the history; the history then includes it."""
        sink = kwargs.pop("sink", None)
        return await self._turn(_as_message(message), sink, kwargs)

    def stream(self, message: str | Message, **kwargs: Any) -> AsyncGenerator[Event, None]:
        """`run`, as the events of the turn (`Relay.stream`)."""
        new = _as_message(message)
        return stream_events(lambda sink: self._turn(new, sink, kwargs))

    async def _turn(
        self, new: Message, sink: EventSink | None, kwargs: dict[str, Any]
    ) -> RunResult:
        result = await self.relay.run([*self.messages, new], sink=sink, **kwargs)
        self.messages.append(new)
        self.messages.extend(to_chat_messages(result.output))
        return result


def _as_message(message: str | Message) -> Message:
    return {"role": "user", "content": message} if isinstance(message, str) else dict(message)
