"""The Ollama native chat client (`POST /api/chat`, NDJSON stream).

The request body (object arguments, `tool_name`, `images`, `options`) is
`core.formats.ollama.request`. Sending, retries, timeouts and errors are
`adapters.models.http`; reading the body is `core.stream.reader.BodyReader`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolrelay.adapters.models.http import (
    DEFAULT_HTTP,
    APIClient,
    HTTPOptions,
    bearer,
)
from toolrelay.core.formats.ollama.request import request_body
from toolrelay.core.formats.transcript import ReasoningReplay
from toolrelay.engine.interfaces import ModelRequest

__all__ = ["Ollama"]


def _root(base_url: str) -> str:
    root = base_url.rstrip("/")
    for suffix in ("/api", "/v1"):
        root = root.removesuffix(suffix)
    return root


class Ollama(APIClient):
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
        reasoning_replay: ReasoningReplay = "thinking",
        http: HTTPOptions = DEFAULT_HTTP,
    ) -> None:
        super().__init__(
            f"{_root(base_url)}/api/chat",
            model=model,
            stream=stream,
            params=params,
            http=http,
            auth=bearer(api_key),
        )
        self.think = think
        self.reasoning_replay: ReasoningReplay = reasoning_replay
        """How this turn's reasoning goes back: Ollama's `thinking` field by default."""

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for `request`; client params first, the request's win."""
        return request_body(
            model=self.model,
            messages=request.messages,
            output=request.output,
            tools=request.tools,
            stream=self.stream,
            think=self.think,
            defaults=self.params,
            params=request.params,
            reasoning=self.reasoning_replay,
            replay=request.replay,
        )
