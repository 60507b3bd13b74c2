"""The Chat Completions request body a model client sends (`POST /v1/chat/completions`).

The history goes first, then this turn's items converted back to messages
(`core.formats.transcript.to_chat_messages`, SPEC R13), the tools, and parameters:
the client's defaults first, the request's win last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolrelay.core.formats.transcript import ChatReplay, ReasoningReplay, to_chat_messages
from toolrelay.core.items import Item

__all__ = ["request_body"]


def request_body(
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Sequence[Item] = (),
    tools: Sequence[Mapping[str, Any]] = (),
    stream: bool = True,
    include_usage: bool = True,
    reasoning: ReasoningReplay = "none",
    defaults: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    replay: ChatReplay | None = None,
) -> dict[str, Any]:
    """The JSON body for one model call."""
    convert = to_chat_messages if replay is None else replay.messages
    history = [*messages, *convert(output, reasoning=reasoning)]
    body: dict[str, Any] = {"model": model, "messages": history, "stream": stream}
    if stream and include_usage:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = list(tools)
    body.update(defaults or {})
    body.update(params or {})
    return body
