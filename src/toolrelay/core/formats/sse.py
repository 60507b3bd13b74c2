"""Server-sent events as we write them (WHATWG SSE, OpenAI framing): bytes only.

Chat Completions sends `data: <json>` frames and ends with `data: [DONE]`;
the Responses API names each frame (`event: <type>`) and sends no `[DONE]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

__all__ = ["DONE", "dumps", "sse_data", "sse_event"]

DONE: Final = b"data: [DONE]\n\n"


def _default(obj: object) -> object:
    """Let orjson write any Mapping/Sequence (frozen specs, tuples, proxies), not only dict/list."""
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, str | bytes):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def dumps(value: object) -> bytes:
    """Compact JSON, as the OpenAI API and Ollama write it."""
    return orjson.dumps(value, default=_default)


def sse_data(payload: Any) -> bytes:
    """One unnamed frame; `payload` is JSON bytes already, or a value to encode."""
    body = payload if isinstance(payload, bytes) else dumps(payload)
    return b"data: " + body + b"\n\n"


def sse_event(type: str, payload: Any) -> bytes:
    """One named frame (`event: <type>`), as the Responses API sends each event."""
    body = payload if isinstance(payload, bytes) else dumps(payload)
    return b"event: " + type.encode() + b"\ndata: " + body + b"\n\n"
