"""The Ollama request body a model client sends (`POST /api/chat`, NDJSON answer).

The engine's history is Chat Completions-shaped; Ollama differs in three
places, fixed here:

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

import orjson

from toolrelay.core.formats.transcript import ChatReplay, ReasoningReplay, to_chat_messages
from toolrelay.core.items import Item

__all__ = ["TOP_LEVEL_PARAMS", "ollama_messages", "request_body"]

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


def ollama_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages as Ollama `/api/chat` messages (module doc rules 1-3)."""
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


def request_body(
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Sequence[Item] = (),
    tools: Sequence[Mapping[str, Any]] = (),
    stream: bool = True,
    think: bool | None = None,
    defaults: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    reasoning: ReasoningReplay = "thinking",
    replay: ChatReplay | None = None,
) -> dict[str, Any]:
    """The JSON body for one model call; the request's params win over the defaults.
    The turn's reasoning goes back as the assistant messages' `thinking` by default
    (gpt-oss-style tool loops need it)."""
    convert = to_chat_messages if replay is None else replay.messages
    history = [*messages, *convert(output, reasoning=reasoning)]
    body: dict[str, Any] = {
        "model": model,
        "messages": ollama_messages(history),
        "stream": stream,
    }
    if tools:
        body["tools"] = list(tools)
    if think is not None:
        body["think"] = think
    merged = {**(defaults or {}), **(params or {})}
    body.update({k: v for k, v in merged.items() if k in TOP_LEVEL_PARAMS})
    options = {k: v for k, v in merged.items() if k not in TOP_LEVEL_PARAMS}
    if options:
        body["options"] = options
    return body
