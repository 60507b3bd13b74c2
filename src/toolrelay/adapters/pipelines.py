"""Pipelines-server outlets over HTTP (SPEC R19): the network side of `engine.filters`.

An `HttpOutlet` is an outlet filter like any other (`outlet(body, user)`),
marked `pipeline = True` so `engine.filters.run_outlets` runs it before the
in-process filters. It posts `{"body": body, "user": user}` and the reply is
the new body; a reply that is not a JSON object leaves the body as it was,
and a failure raises (`run_outlets` logs it and goes on).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson

from toolrelay.adapters.http import AiohttpTransport, Request
from toolrelay.adapters.http.fetch import fetch
from toolrelay.errors import ToolError

__all__ = ["HttpOutlet"]


class HttpOutlet:
    """A pipelines-server outlet: POST `{"body": body, "user": user}`, the reply is the new body."""

    pipeline = True

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 30.0) -> None:
        self.url = url
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._transport = AiohttpTransport(connect_timeout=timeout)

    async def outlet(
        self, body: dict[str, Any], user: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        payload = orjson.dumps({"body": body, "user": dict(user or {})})
        request = Request("POST", self.url, self._headers, payload)
        async with asyncio.timeout(self.timeout):
            response = await fetch(self._transport, request)
        if response.status >= 400:
            raise ToolError(f"pipeline outlet answered HTTP {response.status}")
        result = orjson.loads(response.body)
        return result if isinstance(result, dict) else body

    async def aclose(self) -> None:
        await self._transport.aclose()
