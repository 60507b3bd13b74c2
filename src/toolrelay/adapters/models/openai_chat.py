"""The OpenAI Chat Completions client (`POST /v1/chat/completions`).

This module owns only the request body: the history plus this turn's items
converted back to messages (`core.transcript.to_chat_messages`, SPEC R13),
the tools, and pass-through parameters. Sending, retries, timeouts and errors
are `adapters.models.http`; reading the body is `core.body.BodyReader`.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from toolrelay.core.transcript import ReasoningReplay, to_chat_messages
from toolrelay.engine.interfaces import ModelRequest

__all__ = ["OpenAIChat"]


class OpenAIChat(HTTPModelClient):
    """A `ModelClient` for any OpenAI-compatible Chat Completions server."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        stream: bool = True,
        include_usage: bool = True,
        reasoning_replay: ReasoningReplay = "none",
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        retry: Retry = DEFAULT_RETRY,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            v1_url(base_url, "chat/completions"),
            model=model,
            stream=stream,
            params=params,
            headers=bearer_headers(api_key, headers),
            timeouts=timeouts,
            retry=retry,
            transport=transport,
        )
        self.include_usage = include_usage
        self.reasoning_replay: ReasoningReplay = reasoning_replay

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for `request`: client params first, then the request's, win last."""
        messages = [*request.messages]
        messages += to_chat_messages(request.output, reasoning=self.reasoning_replay)
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": self.stream}
        if self.stream and self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = list(request.tools)
        body.update(self.params)
        body.update(request.params)
        return body
