"""What toolrelay writes in Responses form: the `response` object, numbered events, a turn's answer.

`response_object` and `EventSequence` serve the server's answers and the test
doubles' fake upstreams alike. `ResponsesStream` turns a turn's events into
the streamed answer and `response_for` is the non-streamed one; both take
their status and error from `answer.turn_answer`.

Our items are already Responses output items, so item events pass through
as they are, with one addition: a tool's `function_call_output` appears
complete (`output_item.done` only), so it is announced with an
`output_item.added` first, as a Responses client expects.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.answer import TurnAnswer, final_answer
from toolrelay.core.formats.sse import sse_event
from toolrelay.core.ids import new_id

__all__ = [
    "EventSequence",
    "ResponsesStream",
    "response_for",
    "response_object",
    "response_usage",
]

_TERMINAL_EVENT: Final = {"completed": "response.completed", "incomplete": "response.incomplete"}
_INCOMPLETE_REASON: Final = "max_tool_iterations"
FORWARDED: Final = frozenset(
    {
        ev.OUTPUT_ITEM_ADDED,
        ev.OUTPUT_ITEM_DONE,
        ev.OUTPUT_TEXT_DELTA,
        ev.REASONING_TEXT_DELTA,
        ev.FUNCTION_CALL_ARGUMENTS_DELTA,
        ev.FUNCTION_CALL_ARGUMENTS_DONE,
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_part.added",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
    }
)
"""Engine events that are Responses events too; the rest are chat-level and not sent."""


def response_usage(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """A turn's usage in the Responses `usage` shape."""
    usage = usage or {}
    return {
        "input_tokens": int(usage.get("input_tokens") or 0),
        "output_tokens": int(usage.get("output_tokens") or 0),
        "total_tokens": int(usage.get("total_tokens") or 0),
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }


def response_object(
    id: str,
    *,
    model: str,
    created: int,
    status: str,
    output: Sequence[Any] = (),
    usage: Mapping[str, Any] | None = None,
    error: Mapping[str, Any] | None = None,
    incomplete_reason: str | None = None,
    store: bool = False,
) -> dict[str, Any]:
    """A `response` object with every field the API documents."""
    return {
        "id": id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": dict(error) if error is not None else None,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": list(output),
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": store,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": dict(usage) if usage is not None else None,
        "user": None,
        "metadata": {},
    }


class EventSequence:
    """Numbers events: every Responses event carries a rising `sequence_number`."""

    __slots__ = ("next",)

    def __init__(self) -> None:
        self.next = 0

    def event(self, type: str, **fields: Any) -> dict[str, Any]:
        payload = {"type": type, "sequence_number": self.next, **fields}
        self.next += 1
        return payload

    def sse(self, type: str, fields: Mapping[str, Any]) -> bytes:
        return sse_event(type, self.event(type, **fields))


def response_for(
    answer: TurnAnswer, *, id: str, model: str, created: int | None = None
) -> dict[str, Any]:
    """The `response` object for a finished turn."""
    status = answer.response_status
    failed = answer.failure is not None and status == "failed"
    return response_object(
        id,
        model=model,
        created=int(time.time()) if created is None else created,
        status=status,
        output=answer.output,
        usage=response_usage(answer.usage),
        error={"code": "server_error", "message": answer.failure} if failed else None,
        incomplete_reason=_INCOMPLETE_REASON if status == "incomplete" else None,
    )


class ResponsesStream:
    """A turn's events -> its streamed Responses answer (sans-IO).

    `start()` gives `response.created` and `response.in_progress`;
    `feed(event)` the frames for one event, setting `done` at the final one.
    """

    __slots__ = ("_added", "_created", "_seq", "done", "id", "model")

    def __init__(self, model: str) -> None:
        self.id = new_id("resp")
        self.model = model
        self._created = int(time.time())
        self._seq = EventSequence()
        self._added: set[int] = set()
        self.done = False

    def start(self) -> bytes:
        start = response_object(
            self.id,
            model=self.model,
            created=self._created,
            status="in_progress",
            usage=response_usage(None),
        )
        return self._seq.sse("response.created", {"response": start}) + self._seq.sse(
            "response.in_progress", {"response": start}
        )

    def feed(self, event: Event) -> bytes:
        kind, data = event.type, event.data
        if kind == ev.CHAT_COMPLETION and data.get("done"):
            self.done = True
            return self.finish(final_answer(data))
        if kind not in FORWARDED:
            return b""
        out = b""
        if kind == ev.OUTPUT_ITEM_ADDED:
            self._added.add(data["output_index"])
        elif kind == ev.OUTPUT_ITEM_DONE and data.get("output_index") not in self._added:
            self._added.add(data["output_index"])  # tool outputs appear complete
            out = self._seq.sse(ev.OUTPUT_ITEM_ADDED, data)
        return out + self._seq.sse(kind, data)

    def finish(self, answer: TurnAnswer) -> bytes:
        final = response_for(answer, id=self.id, model=self.model, created=self._created)
        name = _TERMINAL_EVENT.get(final["status"], "response.failed")
        return self._seq.sse(name, {"response": final})
