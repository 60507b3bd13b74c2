"""Whether a tool result's text reads as an error: its item is then `failed` (reference §6–7).

A tool that fails often does not raise: it returns `"Error: …"`, or a JSON
object saying so. Open WebUI marks such a result `failed` on its item while
the text still goes to the model as the call's result; so do we. The rule,
as Open WebUI 0.12.4 applies it:

1. The text, stripped and lower-cased, starts with `error:`, `exception:`,
   `traceback` or `http error!`.
2. Or the text is JSON (strings that hold JSON are decoded again, a few
   times at most) for an object with a non-empty `error` (a string, an
   object or a list), or `status` `error`/`failed`, or `success`/`ok` false
   together with a non-empty `message`.

Pure: no I/O, never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

__all__ = ["reads_as_error"]

_PREFIXES: Final = ("error:", "exception:", "traceback", "http error!")
_FAILED_STATUS: Final = frozenset({"error", "failed"})
_MAX_DECODES: Final = 3
"""JSON inside a JSON string inside …: deeper than this is not looked into."""


def reads_as_error(text: str | None) -> bool:
    """True when `text` reports a failure rather than a result (module doc)."""
    if not text:
        return False
    if text.strip().lower().startswith(_PREFIXES):
        return True
    value: Any = text
    for _ in range(_MAX_DECODES):
        if not isinstance(value, str):
            break
        stripped = value.strip()
        if not stripped.startswith(("{", '"')):
            return False
        try:
            value = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            return False
    return isinstance(value, Mapping) and _error_object(value)


def _error_object(value: Mapping[str, Any]) -> bool:
    error = value.get("error")
    if isinstance(error, str | Mapping | list) and error:
        return True
    status = value.get("status")
    if isinstance(status, str) and status.lower() in _FAILED_STATUS:
        return True
    message = value.get("message")
    said_no = value.get("success") is False or value.get("ok") is False
    return said_no and bool(message)
