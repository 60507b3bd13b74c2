"""A finished turn -> what an OpenAI-shaped answer says about it (issue 8 item 15).

One pure function, `turn_answer`, decides the answer's finish reason, status,
error and the calls left for the client; the streamed and the non-streamed
answer of both OpenAI front doors render its value, so they cannot disagree.

Rules:

1. A `failed` or `cancelled` turn is a failure: its error is the answer
   (HTTP 502 when not streamed, an error frame when streamed), even when
   partial text exists, so a cut answer never looks whole.
2. Calls the turn left unanswered (a `function_call` with no output that is
   not `incomplete`) belong to the client: with a `completed` turn they end
   the answer with `finish_reason: tool_calls`.
3. A `capped` turn (the tool-round limit stopped it, not the model) ends with
   `finish_reason: length`, Responses status `incomplete`, and carries the cap
   error as a notice.
4. Otherwise the model's own reason is kept when OpenAI knows it (`stop`,
   `length`, `content_filter`); anything else is `stop`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolrelay.core.items import (
    FunctionCallItem,
    Item,
    as_items,
    is_call,
    is_call_output,
    is_reasoning,
    item_text,
    output_text,
)
from toolrelay.core.turn.status import TurnStatus, turn_status

__all__ = ["TurnAnswer", "final_answer", "open_calls", "turn_answer"]

_FAILED: Final = frozenset({TurnStatus.FAILED, TurnStatus.CANCELLED})
_CHAT_REASONS: Final = frozenset({"stop", "length", "content_filter"})
_RESPONSE_STATUS: Final = {
    TurnStatus.COMPLETED: "completed",
    TurnStatus.CAPPED: "incomplete",
    TurnStatus.FAILED: "failed",
    TurnStatus.CANCELLED: "cancelled",
}
_FALLBACK_ERROR: Final = "The model server failed."


@dataclass(frozen=True, slots=True)
class TurnAnswer:
    """One finished turn as both OpenAI APIs describe it."""

    status: TurnStatus
    output: Sequence[Item]
    text: str
    reasoning: str
    tool_calls: tuple[FunctionCallItem, ...]
    """`function_call` items left for the client to run (rule 2)."""
    finish_reason: str
    """Chat Completions `finish_reason` (rules 2-4)."""
    response_status: str
    """Responses API status: `completed`, `incomplete`, `failed` or `cancelled`."""
    usage: Mapping[str, Any]
    failure: str | None = None
    """Set for a failed or cancelled turn: the error that is the whole answer (rule 1)."""
    notice: str | None = None
    """An error the client should see beside a usable answer (the cap, rule 3)."""


def open_calls(output: Sequence[Item]) -> list[FunctionCallItem]:
    """Calls left for the client: function_calls with no output, not cut short."""
    answered = {i.get("call_id") for i in output if is_call_output(i)}
    return [
        i
        for i in output
        if is_call(i) and i.get("call_id") not in answered and i.get("status") != "incomplete"
    ]


def _finish_reason(
    status: TurnStatus, calls: Sequence[FunctionCallItem], model_reason: str | None
) -> str:
    if calls and status == TurnStatus.COMPLETED:
        return "tool_calls"
    if status == TurnStatus.CAPPED:
        return "length"
    if model_reason in _CHAT_REASONS:
        return model_reason
    return "stop"


def turn_answer(
    *,
    status: TurnStatus,
    output: Sequence[Item],
    usage: Mapping[str, Any] | None = None,
    error: str | None = None,
    finish_reason: str | None = None,
) -> TurnAnswer:
    """The answer for a turn that ended with `status` (module doc, rules 1-4)."""
    calls = tuple(open_calls(output))
    failed = status in _FAILED
    return TurnAnswer(
        status=status,
        output=output,
        text=output_text(list(output)),
        reasoning="".join(item_text(i) for i in output if is_reasoning(i)),
        tool_calls=calls,
        finish_reason=_finish_reason(status, calls, finish_reason),
        response_status=_RESPONSE_STATUS[status],
        usage=usage or {},
        failure=(error or _FALLBACK_ERROR) if failed else None,
        notice=error if status == TurnStatus.CAPPED else None,
    )


def final_answer(data: Mapping[str, Any]) -> TurnAnswer:
    """The answer for the data of a turn's final `chat:completion` event (`done: true`)."""
    error = data.get("error")
    message = error.get("content") if isinstance(error, Mapping) else None
    reason = data.get("finish_reason")
    return turn_answer(
        status=turn_status(data.get("status")),
        output=as_items(data.get("output") or []),  # our own final event's items
        usage=data.get("usage"),
        error=message if isinstance(message, str) else None,
        finish_reason=reason if isinstance(reason, str) else None,
    )
