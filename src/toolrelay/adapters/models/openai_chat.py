"""The OpenAI Chat Completions client (`POST /v1/chat/completions`).

The request body is `core.formats.chat_completions.request` (the history plus
this turn's items as messages, SPEC R13, the tools, pass-through parameters).
Sending, retries, timeouts and errors are `adapters.models.http`; reading
the body is `core.stream.reader.BodyReader`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolrelay.adapters.models.http import (
    DEFAULT_HTTP,
    APIClient,
    HTTPOptions,
    bearer,
    v1_url,
)
from toolrelay.core.formats.chat_completions.request import request_body
from toolrelay.core.formats.transcript import ReasoningReplay
from toolrelay.engine.interfaces import ModelRequest

__all__ = ["OpenAIChat"]


class OpenAIChat(APIClient):
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
        http: HTTPOptions = DEFAULT_HTTP,
    ) -> None:
        super().__init__(
            v1_url(base_url, "chat/completions"),
            model=model,
            stream=stream,
            params=params,
            http=http,
            auth=bearer(api_key),
        )
        self.include_usage = include_usage
        self.reasoning_replay: ReasoningReplay = reasoning_replay

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for `request`: client params first, then the request's, win last."""
        return request_body(
            model=self.model,
            messages=request.messages,
            output=request.output,
            tools=request.tools,
            stream=self.stream,
            include_usage=self.include_usage,
            reasoning=self.reasoning_replay,
            defaults=self.params,
            params=request.params,
            replay=request.replay,
        )
