"""Responses input items <-> Chat Completions messages, and the flat tool shape.

The engine's history is Chat Completions-shaped. `input_messages` reads a
client's Responses `input` into that history (our `/v1/responses` front
door); `history_input` writes a history as Responses input items (our
Responses model client). Rules:

1. Messages keep their role; content parts are renamed (`input_text` /
   `output_text` <-> `text`, `input_image` <-> `image_url`).
2. An assistant's `tool_calls` <-> `function_call` items (consecutive calls
   join one assistant message); a `tool` message <-> `function_call_output`.
3. Assistant content goes out as plain text, the form every Responses server
   accepts; a non-string tool output comes in as compact JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

__all__ = ["flat_tool", "history_input", "input_messages"]

_ROLES: Final = frozenset({"system", "user", "assistant", "developer"})
_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text"})
_CALL_ITEMS: Final = frozenset({"function_call", "function_call_output"})


def _role(role: Any) -> str:
    return role if role in _ROLES else "user"


def _chat_content(content: Any) -> Any:
    """Responses content (a string, or typed parts) as Chat content."""
    if not isinstance(content, list):
        return content
    parts = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") in _TEXT_PARTS:
            parts.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "input_image" and part.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
    return parts


def _add_call(messages: list[dict[str, Any]], item: Mapping[str, Any]) -> None:
    call = {
        "id": item.get("call_id"),
        "type": "function",
        "function": {"name": item.get("name"), "arguments": item.get("arguments") or "{}"},
    }
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "assistant" and "tool_calls" in last:
        last["tool_calls"].append(call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})


def input_messages(
    value: str | Sequence[Mapping[str, Any]], instructions: str | None = None
) -> list[dict[str, Any]]:
    """Responses `input` (and `instructions`) as a Chat Completions history; may be empty."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    if isinstance(value, str):
        return [*messages, {"role": "user", "content": value}]
    for item in value:
        kind = item.get("type", "message")
        if kind == "message" or ("role" in item and kind not in _CALL_ITEMS):
            content = _chat_content(item.get("content"))
            messages.append({"role": _role(item.get("role")), "content": content})
        elif kind == "function_call":
            _add_call(messages, item)
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else orjson.dumps(output).decode()
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    return messages


def _image(part: Mapping[str, Any]) -> dict[str, Any] | None:
    url = part.get("image_url")
    if isinstance(url, Mapping):
        url = url.get("url")
    return {"type": "input_image", "image_url": url} if isinstance(url, str) else None


def _input_parts(content: Any) -> str | list[dict[str, Any]]:
    """Chat content (a string or `text`/`image_url` parts) as Responses input content."""
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            parts.append({"type": "input_text", "text": part["text"]})
        elif kind == "image_url":
            image = _image(part)
            if image is not None:
                parts.append(image)
        elif isinstance(kind, str) and kind.startswith("input_"):
            parts.append(dict(part))
    return parts


def _text(content: Any) -> str:
    """Assistant content as plain text (rule 3)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(p.get("text", "")) for p in content if isinstance(p, Mapping) and "text" in p
    )


def _assistant(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    text = _text(message.get("content"))
    if text:
        out.append({"role": "assistant", "content": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        out.append(
            {
                "type": "function_call",
                "call_id": str(call.get("id") or ""),
                "name": str(function.get("name") or ""),
                "arguments": str(function.get("arguments") or "{}"),
            }
        )
    return out


def history_input(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A Chat Completions history as Responses input items, in order."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            out += _assistant(message)
        elif role == "tool":
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id") or ""),
                    "output": _input_parts(message.get("content")),
                }
            )
        else:
            out.append({"role": role, "content": _input_parts(message.get("content"))})
    return out


def flat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """`{type: function, function: {…}}` -> `{type: function, name, description, parameters}`."""
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, Mapping):
        return dict(tool)  # already flat, or a built-in tool (web_search …)
    out: dict[str, Any] = {
        "type": "function",
        "name": function.get("name"),
        "description": function.get("description") or "",
        "parameters": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if "strict" in function:
        out["strict"] = function["strict"]
    return out
