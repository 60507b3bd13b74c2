"""Ollama `/api/chat` objects -> normalised deltas.

Owns: reading one already-parsed NDJSON line of a streamed `/api/chat`
response (or the single non-streaming object, which has the same shape) and
translating it into `core.stream.deltas` values. Line framing lives in `framing`.

Ollama sends tool calls whole and usually without ids or useful indexes, so
every listed call is its own slot with a minted `call_<24 hex>` id (kept when
Ollama does send one). Usage and the finish reason arrive only on the
`done: true` object; the reason is `tool_calls` whenever a call was seen,
because Ollama itself reports `stop` then. Nothing here raises on odd input.
"""

from __future__ import annotations

from typing import Any

from toolrelay.core.formats.chat_completions.parse import arguments_text, error_from_payload
from toolrelay.core.ids import new_id
from toolrelay.core.stream.deltas import (
    Delta,
    FinishDelta,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UsageDelta,
)

__all__ = ["OllamaDecoder"]

_USAGE_KEYS = (
    "prompt_eval_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)


class OllamaDecoder:
    """Stateful translator for one Ollama response: parsed line -> list[Delta]."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls = 0

    def feed(self, obj: dict[str, Any]) -> list[Delta]:
        """Translate one parsed object; anything unreadable yields no deltas."""
        if obj.__class__ is not dict:
            return []
        out: list[Delta] = []
        message = obj.get("message")
        if message.__class__ is dict:
            self._message(message, out)
        if obj.get("error"):
            out.append(error_from_payload(obj))
        if obj.get("done") is True:
            self._done(obj, out)
        return out

    def _message(self, message: dict[str, Any], out: list[Delta]) -> None:
        """Thinking before content, then whole tool calls."""
        thinking = message.get("thinking")
        if thinking and thinking.__class__ is str:
            out.append(ReasoningDelta(thinking))
        content = message.get("content")
        if content and content.__class__ is str:
            out.append(TextDelta(content))
        calls = message.get("tool_calls")
        if calls and calls.__class__ is list:
            for call in calls:
                if call.__class__ is dict:
                    out.append(self._tool_call(call))

    def _tool_call(self, call: dict[str, Any]) -> ToolCallDelta:
        """One whole call in a fresh slot; object arguments become compact JSON."""
        function = call.get("function")
        if function.__class__ is not dict:
            function = {}
        name = function.get("name")
        provider_id = call.get("id")
        if provider_id.__class__ is not str or not provider_id:
            provider_id = new_id("call")
        slot = self._calls
        self._calls += 1
        return ToolCallDelta(
            slot,
            provider_id,
            name if name and name.__class__ is str else None,
            arguments_text(function.get("arguments")),
        )

    def _done(self, obj: dict[str, Any], out: list[Delta]) -> None:
        """The final object: counts and durations, then why the response ended."""
        usage = {key: obj[key] for key in _USAGE_KEYS if key in obj}
        if usage:
            out.append(UsageDelta(usage))
        if self._calls:
            out.append(FinishDelta("tool_calls"))
            return
        reason = obj.get("done_reason")
        out.append(FinishDelta(reason if reason and reason.__class__ is str else "stop"))
