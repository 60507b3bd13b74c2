"""OpenAPI tool servers as a tool source: `OpenAPIServer("http://host:8000")`.

Owns fetching `openapi.json` (lazily, once; again after `refresh()`),
offering one tool per operation (`core.tools.openapi_operations` builds the schemas), and
sending calls with the server's auth: a bearer token or a named header, each
read from an env var. A non-2xx answer raises `ToolError` with the status and
the body text, so the model sees what went wrong; a `text/html` answer is
returned with its headers so an inline one becomes an embed (R10); JSON is
parsed; anything else is text. Timeouts and cancellation are the runner's:
a cancelled call closes its connection.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from toolrelay.adapters.http import AiohttpTransport, Request, Transport, TransportError
from toolrelay.adapters.http.fetch import Answer, fetch, url_with_query
from toolrelay.adapters.tools.source import SourceTool
from toolrelay.core.tools.openapi_operations import Operation, build_request, operations
from toolrelay.engine.interfaces import Tool, ToolContext, ToolSpec
from toolrelay.errors import ConfigError, ToolError

__all__ = ["OpenAPIServer"]

_BODY_LIMIT = 4000
_CONNECT_S = 30.0
_ANSWER_S = 300.0
"""The longest an answer may take (the runner's per-call timeout is usually shorter)."""


IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})
"""HTTP's idempotent methods (RFC 9110 9.2.2): a call cut by a stopped server is run again."""


class OpenAPIServer:
    """The operations of an OpenAPI server, as tools."""

    kind = "openapi"

    def __init__(
        self,
        url: str,
        *,
        spec_path: str = "openapi.json",
        name: str | None = None,
        prefix: str = "",
        allow: Sequence[str] | None = None,
        deny: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
        bearer_token_env: str | None = None,
        auth_header: str | None = None,
        auth_header_env: str | None = None,
        timeout: float | None = None,
        requires_approval: bool = False,
        transport: Transport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.spec_url = spec_path if "://" in spec_path else f"{self.url}/{spec_path.lstrip('/')}"
        self.name = name or self.url
        self.prefix = prefix
        self.allow = tuple(allow) if allow is not None else None
        self.deny = tuple(deny)
        self.timeout = timeout
        self.requires_approval = requires_approval
        self._headers = {
            **dict(headers or {}),
            **_auth(self.name, bearer_token_env, auth_header, auth_header_env),
        }
        self._transport = transport or AiohttpTransport(connect_timeout=_CONNECT_S)
        self._tools: list[Tool] | None = None
        self._ops: dict[str, Operation] = {}

    async def list(self) -> Sequence[Tool]:
        """The operations as tools; the document is fetched on first use."""
        if self._tools is None:
            await self.refresh()
        assert self._tools is not None
        return self._tools

    async def refresh(self) -> None:
        """Fetch the document again (the server changed its operations)."""
        try:
            request = Request("GET", self.spec_url, self._headers)
            async with asyncio.timeout(_ANSWER_S):
                response = await fetch(self._transport, request)
        except (TransportError, TimeoutError) as exc:
            reason = str(exc) or f"no answer within {_ANSWER_S:g} s"
            raise ToolError(
                f"OpenAPI server {self.name!r}: cannot fetch {self.spec_url}: {reason}"
            ) from exc
        if response.status >= 400:
            raise ToolError(
                f"OpenAPI server {self.name!r}: {self.spec_url} answered HTTP {response.status}"
            )
        try:
            document = orjson.loads(response.body)
        except orjson.JSONDecodeError as exc:
            raise ToolError(f"OpenAPI server {self.name!r}: {self.spec_url} is not JSON") from exc
        tools: list[Tool] = []
        ops: dict[str, Operation] = {}
        own = frozenset(k.lower() for k in self._headers)
        for op in operations(document, skip_headers=own):
            if not self._wanted(op.name):
                continue
            local = (self.prefix + op.name)[:64]
            ops[local] = op
            spec = ToolSpec(
                name=local,
                description=op.description,
                parameters=op.parameters,
                timeout=self.timeout,
                requires_approval=self.requires_approval,
                idempotent=op.method.upper() in IDEMPOTENT_METHODS,
            )
            tools.append(SourceTool(spec, self))
        self._tools, self._ops = tools, ops

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        op = self._ops.get(name)
        if op is None:
            raise ToolError(f'Tool "{name}" not found.')
        built = build_request(op, arguments)
        headers = {**self._headers, **built.headers}
        if built.has_body:
            headers["Content-Type"] = "application/json"
        request = Request(
            built.method,
            url_with_query(self.url + built.path, built.query),
            headers,
            orjson.dumps(built.json) if built.has_body else b"",
        )
        try:
            async with asyncio.timeout(_ANSWER_S):
                response = await fetch(self._transport, request)
        except (TransportError, TimeoutError) as exc:
            reason = str(exc) or f"no answer within {_ANSWER_S:g} s"
            raise ToolError(f"Error: {op.method.upper()} {op.path} failed: {reason}") from exc
        return _answer(response)

    def _wanted(self, name: str) -> bool:
        if self.allow is not None and not any(fnmatch.fnmatchcase(name, p) for p in self.allow):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.deny)

    async def aclose(self) -> None:
        await self._transport.aclose()


def _answer(response: Answer) -> Any:
    """The value the model gets: parsed JSON, HTML with its headers (an embed), or text."""
    text = response.text
    if response.status >= 300:
        raise ToolError(f"Error: HTTP {response.status}: {text[:_BODY_LIMIT]}")
    kind = response.headers.get("content-type", "").lower()
    if "text/html" in kind:
        return (text, response.header_dict())
    if "json" in kind:
        try:
            return orjson.loads(response.body)
        except orjson.JSONDecodeError:
            return text
    return text


def _auth(
    label: str, bearer_env: str | None, header: str | None, header_env: str | None
) -> dict[str, str]:
    out: dict[str, str] = {}
    if bearer_env:
        out["Authorization"] = f"Bearer {_env(label, bearer_env)}"
    if header_env:
        out[header or "X-API-Key"] = _env(label, header_env)
    return out


def _env(label: str, name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ConfigError(f"OpenAPI server {label!r}: env var {name} is not set")
    return value
