"""Inlet/outlet filters (SPEC R19): in-process objects and HTTP pipeline outlets.

A filter is any object with `inlet(body)` and/or `outlet(body)`, sync or
async, returning the (possibly changed) body — the shape Open WebUI's filter
functions use. `HttpOutlet` posts the body to a pipeline server. Outlets run
pipeline-first, then in-process filters.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

Body = dict[str, Any]
log = logging.getLogger(__name__)


class HttpOutlet:
    """A pipelines-server outlet: POST `{"body": body, "user": user}`, the reply is the new body."""

    pipeline = True

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 30.0) -> None:
        self.url = url
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=timeout)

    async def outlet(self, body: Body, user: Mapping[str, Any] | None = None) -> Body:
        response = await self._client.post(
            self.url, json={"body": body, "user": dict(user or {})}, headers=self._headers
        )
        response.raise_for_status()
        result = response.json()
        return result if isinstance(result, dict) else body

    async def aclose(self) -> None:
        await self._client.aclose()


async def _call(method: Any, body: Body, user: Mapping[str, Any] | None) -> Body:
    params = inspect.signature(method).parameters
    kwargs = {"user": user} if "user" in params else {}
    if "__user__" in params:
        kwargs = {"__user__": user}
    result = method(body, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result if isinstance(result, dict) else body


async def run_inlets(filters: Sequence[Any], body: Body, user: Mapping[str, Any] | None) -> Body:
    for f in filters:
        if callable(getattr(f, "inlet", None)):
            body = await _call(f.inlet, body, user)
    return body


async def run_outlets(filters: Sequence[Any], body: Body, user: Mapping[str, Any] | None) -> Body:
    """Pipelines first, then in-process filters; a failing one is logged and skipped."""
    ordered = [f for f in filters if getattr(f, "pipeline", False)]
    ordered += [f for f in filters if not getattr(f, "pipeline", False)]
    for f in ordered:
        if callable(getattr(f, "outlet", None)):
            try:
                body = await _call(f.outlet, body, user)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one broken filter must not cost the others, or the answer
                log.warning("outlet filter %r failed: %s", f, exc)
    return body
