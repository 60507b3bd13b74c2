"""The human message inside any error payload a peer sends, found one way.

Used for in-stream errors (`core.formats.chat_completions.parse.error_from_payload`) and
for HTTP error bodies (`adapters.models.failures.error_from_response`) alike.
Shapes read: OpenAI `{"error": {"message"}}`, Ollama `{"error": "…"}`,
FastAPI/vLLM `{"detail"}`, `{"msg"}`, a bare string, and a nested
`{"error": {"error": {"message"}}}`. The inner `error` is looked at before
the outer object; inside it, a string `type` or `code` is the last resort
(a machine name says more than nothing). Never raises.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["error_message"]

_MESSAGE_KEYS: Final = ("message", "detail", "error", "msg")
_NAME_KEYS: Final = ("type", "code")


def _text(value: Any) -> str | None:
    if value.__class__ is str:
        return str(value).strip() or None
    return None


def _own_message(value: Any, *, names: bool) -> str | None:
    """A string, or a dict's message keys (a dict value's `message` counts too)."""
    if value.__class__ is not dict:
        return _text(value)
    for key in _MESSAGE_KEYS:
        found = value.get(key)
        text = _text(found) or (_text(found.get("message")) if found.__class__ is dict else None)
        if text:
            return text
    if names:
        for key in _NAME_KEYS:
            text = _text(value.get(key))
            if text:
                return text
    return None


def error_message(value: Any) -> str | None:
    """The readable message in an error payload, or None when it has none."""
    if value.__class__ is dict:
        inner = value.get("error")
        if inner:
            found = _own_message(inner, names=True)
            if found:
                return found
    return _own_message(value, names=False)
