"""The Ollama native chat client (`POST /api/chat`, NDJSON stream).

This module owns the Ollama request body. The engine's history is Chat
Completions-shaped; Ollama differs in three places, fixed here:

1. Tool call `arguments` are JSON objects, not strings (a string that does
   not parse to an object becomes `{}`).
2. Tool results name their tool with `tool_name`; `tool_call_id` is kept too.
3. Content is a string; images go in a separate `images` list of base64
   data (only `data:` URLs can be sent; remote URLs are dropped).

Sampling parameters go under `options`; the few top-level fields Ollama has
(`format`, `keep_alive`) stay top-level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import httpx
import orjson

from toolrelay.adapters.models.http import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUTS,
    HTTPModelClient,
    Retry,
    Timeouts,
)
from toolrelay.core.transcript import to_chat_messages
from toolrelay.engine.interfaces import Message, ModelRequest

__all__ = ["Ollama", "ollama_messages"]

TOP_LEVEL_PARAMS: Final = frozenset({"format", "keep_alive"})


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _tool_calls(calls: Sequence[Mapping[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    """Calls with object arguments; remembers each id's tool name for the results after it."""
    out: list[dict[str, Any]] = []
    for call in calls:
        function = dict(call.get("function") or {})
        function["arguments"] = _arguments(function.get("arguments"))
        if isinstance(call.get("id"), str) and isinstance(function.get("name"), str):
            names[call["id"]] = function["name"]
        out.append({**call, "function": function})
    return out


def _content(content: Any) -> tuple[str, list[str]]:
    """Chat content as (text, base64 images)."""
    if content is None or isinstance(content, str):
        return content or "", []
    texts: list[str] = []
    images: list[str] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, Mapping) else url
            if isinstance(url, str) and url.startswith("data:") and "," in url:
                images.append(url.split(",", 1)[1])
    return "\n".join(texts), images


def ollama_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat Completions messages as Ollama `/api/chat` messages (module doc rules 1–3)."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        converted = dict(message)
        if message.get("tool_calls"):
            converted["tool_calls"] = _tool_calls(message["tool_calls"], names)
        if message.get("role") == "tool":
            name = names.get(str(message.get("tool_call_id")))
            if name is not None:
                converted["tool_name"] = name
        text, images = _content(message.get("content"))
        converted["content"] = text
        if images:
            converted["images"] = [*converted.get("images", []), *images]
        out.append(converted)
    return out


def _root(base_url: str) -> str:
    root = base_url.rstrip("/")
    for suffix in ("/api", "/v1"):
        root = root.removesuffix(suffix)
    return root


class Ollama(HTTPModelClient):
    """A `ModelClient` for Ollama's native chat API."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        stream: bool = True,
        think: bool | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        retry: Retry = DEFAULT_RETRY,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        auth = {"authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(
            f"{_root(base_url)}/api/chat",
            model=model,
            stream=stream,
            params=params,
            headers=auth | dict(headers or {}),
            timeouts=timeouts,
            retry=retry,
            transport=transport,
        )
        self.think = think

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for `request`; client params first, the request's win."""
        history = [*request.messages, *to_chat_messages(request.output)]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": ollama_messages(history),
            "stream": self.stream,
        }
        if request.tools:
            body["tools"] = list(request.tools)
        if self.think is not None:
            body["think"] = self.think
        params = {**self.params, **request.params}
        body.update({k: v for k, v in params.items() if k in TOP_LEVEL_PARAMS})
        options = {k: v for k, v in params.items() if k not in TOP_LEVEL_PARAMS}
        if options:
            body["options"] = options
        return body
