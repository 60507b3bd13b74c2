"""Pipelines-server outlets over HTTP (SPEC R19): the httpx side of `engine.filters`.

An `HttpOutlet` is an outlet filter like any other (`outlet(body, user)`),
marked `pipeline = True` so `engine.filters.run_outlets` runs it before the
in-process filters. It posts `{"body": body, "user": user}` and the reply is
the new body; a reply that is not a JSON object leaves the body as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

__all__ = ["HttpOutlet"]


class HttpOutlet:
    """A pipelines-server outlet: POST `{"body": body, "user": user}`, the reply is the new body."""

    pipeline = True

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 30.0) -> None:
        self.url = url
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=timeout)

    async def outlet(
        self, body: dict[str, Any], user: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        response = await self._client.post(
            self.url, json={"body": body, "user": dict(user or {})}, headers=self._headers
        )
        response.raise_for_status()
        result = response.json()
        return result if isinstance(result, dict) else body

    async def aclose(self) -> None:
        await self._client.aclose()
