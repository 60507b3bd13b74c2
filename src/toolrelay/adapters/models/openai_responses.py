"""The OpenAI Responses API client (`POST /v1/responses`), stateless or stateful.

This module owns the Responses request body. The engine's history is Chat
Completions-shaped, so it is converted here into Responses input items:
system/user/assistant messages stay `{"role", "content"}` messages, an
assistant's `tool_calls` become `function_call` items and `tool` messages
become `function_call_output` items; this turn's items are appended with
`core.transcript.to_responses_input`. Function tools move to the flat
Responses shape.

SPEC R14: `stateful` is the one flag. A stateful client sends `store: true`
and, when the engine names the turn's previous response
(`request.previous_response_id`), only the system message(s) and this
iteration's new items (`output[new_items_from:]`) with `previous_response_id`;
otherwise (and always when not stateful) the whole history is resent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from toolrelay.adapters.models.http import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUTS,
    HTTPModelClient,
    Retry,
    Timeouts,
    bearer_headers,
    v1_url,
)
from toolrelay.core.transcript import to_responses_input
from toolrelay.engine.interfaces import Message, ModelRequest

__all__ = ["OpenAIResponses", "responses_messages", "responses_tool"]

_SYSTEM_ROLES = frozenset({"system", "developer"})


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
    """Assistant content as plain text (the form every Responses server accepts)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(p.get("text", "")) for p in content if isinstance(p, Mapping) and "text" in p
    )


def _assistant(message: Message) -> list[dict[str, Any]]:
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


def responses_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
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


def responses_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """`{type: function, function: {…}}` → `{type: function, name, description, parameters}`."""
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


class OpenAIResponses(HTTPModelClient):
    """A `ModelClient` for the OpenAI Responses API."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        stream: bool = True,
        stateful: bool = False,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        retry: Retry = DEFAULT_RETRY,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            v1_url(base_url, "responses"),
            model=model,
            stream=stream,
            params=params,
            headers=bearer_headers(api_key, headers),
            timeouts=timeouts,
            retry=retry,
            transport=transport,
        )
        self.stateful = stateful

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for `request` (module doc: stateless vs stateful)."""
        body: dict[str, Any] = {"model": self.model}
        if self.stateful and request.previous_response_id is not None:
            system = [m for m in request.messages if m.get("role") in _SYSTEM_ROLES]
            body["previous_response_id"] = request.previous_response_id
            body["input"] = responses_messages(system) + to_responses_input(
                request.output[request.new_items_from :], context=request.output
            )
        else:
            body["input"] = responses_messages(request.messages) + to_responses_input(
                request.output
            )
        body["stream"] = self.stream
        if request.tools:
            body["tools"] = [responses_tool(t) for t in request.tools]
        body["store"] = self.stateful
        body.update(self.params)
        body.update(request.params)
        return body
