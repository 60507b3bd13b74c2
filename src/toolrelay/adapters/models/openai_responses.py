"""The OpenAI Responses API client (`POST /v1/responses`), stateless or stateful.

The request body is `core.formats.responses.request` (SPEC R14: stateless
resends the whole history, stateful sends only what is new after
`previous_response_id`). Sending, retries, timeouts and errors are
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
    v1_url,
)
from toolrelay.core.formats.responses.request import request_body
from toolrelay.engine.interfaces import ModelRequest

__all__ = ["OpenAIResponses"]


class OpenAIResponses(APIClient):
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
        http: HTTPOptions = DEFAULT_HTTP,
    ) -> None:
        super().__init__(
            v1_url(base_url, "responses"),
            model=model,
            stream=stream,
            params=params,
            http=http,
            auth=bearer(api_key),
        )
        self.stateful = stateful

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body for `request`; client params first, the request's win."""
        return request_body(
            model=self.model,
            messages=request.messages,
            output=request.output,
            tools=request.tools,
            stream=self.stream,
            stateful=self.stateful,
            previous_response_id=request.previous_response_id,
            new_items_from=request.new_items_from,
            defaults=self.params,
            params=request.params,
        )
