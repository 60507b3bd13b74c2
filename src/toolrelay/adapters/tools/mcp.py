"""MCP servers as a tool source, through the official `mcp` SDK (`toolrelay[mcp]`).

Owns: the transports a user names (`MCPServer.stdio`, `.http`, `.sse`), turning
`tools/list` into tool specs (input schema kept as the server gave it, no
argument filtering: the server validates, R8), an optional name prefix and
allow/deny patterns, refreshing the list on `notifications/tools/list_changed`,
and turning `tools/call` answers into values `core.tools.results` normalises
(content parts as MCP sends them; `isError` raises so the model sees an error).
Progress notifications become `tool:progress` events naming the call; a
cancelled call is cancelled on the server too (the SDK sends
`notifications/cancelled` when the awaiting task is cancelled).

The session's life (lazy start, restarts with backoff, shutdown) is
`mcp_session.McpConnection`'s.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import IO, Any

import mcp.types as mt
from mcp import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from toolrelay.adapters.tools.mcp_session import (
    START_TIMEOUT_S,
    Backoff,
    McpConnection,
    Transport,
    describe,
)
from toolrelay.adapters.tools.source import SourceTool
from toolrelay.core import events as ev
from toolrelay.engine.interfaces import Tool, ToolContext, ToolSpec
from toolrelay.errors import ConfigError, ToolError

__all__ = ["MCPServer"]

_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_CONNECTION_CLOSED = -32000
_LIST_PAGE_CAP = 100
_LOST_SESSION_TEXTS = ("session terminated", "session not found", "session expired")


class MCPServer:
    """One MCP server's tools; build it with `stdio`, `http` or `sse`."""

    def __init__(
        self,
        name: str,
        transport: Transport,
        *,
        prefix: str = "",
        allow: Sequence[str] | None = None,
        deny: Sequence[str] = (),
        timeout: float | None = None,
        start_timeout: float = START_TIMEOUT_S,
        requires_approval: bool = False,
        backoff: Backoff | None = None,
        clock: Callable[[], float] | None = None,
        kind: str = "mcp",
    ) -> None:
        self.name = name
        self.kind = kind
        self.prefix = prefix
        self.allow = tuple(allow) if allow is not None else None
        self.deny = tuple(deny)
        self.timeout = timeout
        self.requires_approval = requires_approval
        self.connection = McpConnection(
            name,
            transport,
            on_message=self._on_message,
            backoff=backoff,
            clock=clock,
            start_timeout=start_timeout,
        )
        self._tools: list[Tool] | None = None
        self._names: dict[str, str] = {}
        self._listed_at_start = 0

    # ------------------------------------------------------------ constructors

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server run as a child process speaking MCP on stdin/stdout."""
        params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=cwd
        )
        label = name or Path(command).name + (f" {' '.join(args)}" if args else "")
        return cls(label, _stdio_transport(params), kind="mcp-stdio", **options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer_token_env: str | None = None,
        name: str | None = None,
        **options: Any,
    ) -> MCPServer:
        """A remote server over Streamable HTTP; the bearer token is read from an env var."""
        all_headers = _auth_headers(headers, bearer_token_env, name or url)
        return cls(name or url, _http_transport(url, all_headers), kind="mcp-http", **options)

    @classmethod
    def sse(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer_token_env: str | None = None,
        name: str | None = None,
        **options: Any,
    ) -> MCPServer:
        """A remote server over the older HTTP+SSE transport."""
        all_headers = _auth_headers(headers, bearer_token_env, name or url)
        return cls(name or url, _sse_transport(url, all_headers), kind="mcp-sse", **options)

    # ------------------------------------------------------------ ToolSource

    async def list(self) -> Sequence[Tool]:
        """The server's tools (started on first use); cached until the server says they changed."""
        session = await self.connection.session()
        if self._tools is not None and self._listed_at_start == self.connection.starts:
            return self._tools
        started = self.connection.starts
        listed: list[mt.Tool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGE_CAP):
            params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
            bound = self.connection.start_timeout
            try:
                async with asyncio.timeout(bound):
                    page = await session.list_tools(params=params)
            except TimeoutError:
                reason = f"no answer to tools/list within {bound:g} s"
                self.connection.broken(reason)  # started again on a later turn
                raise ToolError(f"MCP server {self.name!r}: {reason}", reason=reason) from None
            except MCPError as exc:
                raise ToolError(
                    f"MCP server {self.name!r}: tools/list failed: {exc.message}"
                ) from exc
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self._set_tools(listed)
        self._listed_at_start = started
        assert self._tools is not None
        return self._tools

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Run one tool on the server; a lost HTTP session is started again and the call retried once."""
        remote = self._names.get(name, name)
        progress = _progress_reporter(context)
        for attempt in (1, 2):
            session = await self.connection.session()
            try:
                result = await session.call_tool(remote, arguments, progress_callback=progress)
            except MCPError as exc:
                lost = _session_lost(exc)
                if lost:
                    self.connection.broken(exc.message)
                if lost and attempt == 1 and exc.code != _CONNECTION_CLOSED:
                    continue  # the server refused the old session: the call never ran
                raise ToolError(f"MCP server {self.name!r}: {exc.message}") from exc
            self.connection.succeeded()
            return result_value(result)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self.connection.aclose()

    # ------------------------------------------------------------ internals

    def _set_tools(self, listed: Sequence[mt.Tool]) -> None:
        tools: list[Tool] = []
        names: dict[str, str] = {}
        for item in listed:
            if not self._wanted(item.name):
                continue
            local = _tool_name(self.prefix + item.name)
            names[local] = item.name
            spec = ToolSpec(
                name=local,
                description=item.description or item.title or "",
                parameters=item.input_schema or {"type": "object", "properties": {}},
                timeout=self.timeout,
                requires_approval=self.requires_approval,
                idempotent=_idempotent(item),
                kind="mcp",
                filter_arguments=False,
                validates_arguments=True,  # the server validates and says what is wrong (R8)
            )
            tools.append(SourceTool(spec, self))
        self._tools, self._names = tools, names

    def _wanted(self, name: str) -> bool:
        if self.allow is not None and not any(fnmatch.fnmatchcase(name, p) for p in self.allow):
            return False
        return not any(fnmatch.fnmatchcase(name, p) for p in self.deny)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self._tools = None


# ---------------------------------------------------------------- results


def result_value(result: Any) -> Any:
    """A `CallToolResult` as the content parts `core.tools.results` knows; errors raise.

    `structuredContent` is used when the content carries no text (servers
    should also send it as text, not all do).
    """
    dump = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    content = [p for p in dump.get("content") or [] if isinstance(p, dict)]
    structured = dump.get("structuredContent")
    if dump.get("isError"):
        texts = [str(p.get("text")) for p in content if p.get("type") == "text"]
        raise ToolError("Error: " + ("\n".join(texts) or "the tool reported an error"))
    if structured is not None and not any(p.get("type") == "text" for p in content):
        from toolrelay.core.tools.results import normalise_result  # JSON text, never raises

        content.append({"type": "text", "text": normalise_result(structured).text or ""})
    return content


def _session_lost(exc: MCPError) -> bool:
    """The connection closed, or the server no longer knows our HTTP session (a 404)."""
    text = exc.message.lower()
    return exc.code == _CONNECTION_CLOSED or any(s in text for s in _LOST_SESSION_TEXTS)


def _progress_reporter(context: ToolContext) -> Any:
    """`tool:progress` events with the call id, when someone listens."""
    emit = context.event_emitter
    if emit is None:
        return None
    call_id = context.call_id

    async def report(progress: float, total: float | None, message: str | None) -> None:
        data: dict[str, Any] = {"call_id": call_id, "progress": progress}
        if total is not None:
            data["total"] = total
        if message:
            data["message"] = message
        await emit({"type": ev.TOOL_PROGRESS, "data": data})

    return report


def _tool_name(name: str) -> str:
    """What OpenAI-style APIs accept: `[A-Za-z0-9_-]{1,64}`."""
    return _BAD_NAME_CHARS.sub("_", name)[:64] or "tool"


# ---------------------------------------------------------------- transports


def _auth_headers(
    headers: Mapping[str, str] | None, bearer_token_env: str | None, label: str
) -> dict[str, str]:
    out = dict(headers or {})
    if bearer_token_env:
        token = os.environ.get(bearer_token_env)
        if not token:
            raise ConfigError(f"MCP server {label!r}: env var {bearer_token_env} is not set")
        out["Authorization"] = f"Bearer {token}"
    return out


def _stdio_transport(params: StdioServerParameters) -> Transport:
    @asynccontextmanager
    async def open_stdio() -> Any:
        # the server's stderr goes to a file: the SDK needs a real file descriptor
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            try:
                async with stdio_client(params, errlog=errlog) as streams:
                    yield streams
            except Exception as exc:
                raise _with_stderr(exc, errlog) from exc

    return open_stdio


def _with_stderr(exc: Exception, errlog: IO[str]) -> Exception:
    """The error, plus the last lines the process wrote to stderr (why it died)."""
    errlog.seek(0)
    tail = " | ".join(errlog.read()[-600:].strip().splitlines()[-5:])
    reason = describe(exc)
    return ToolError(f"{reason}; stderr: {tail}" if tail else reason)


def _http_transport(url: str, headers: Mapping[str, str]) -> Transport:
    def open_http() -> AbstractAsyncContextManager[Any]:
        from mcp.client.streamable_http import streamable_http_client

        from toolrelay.adapters.http.bridge import mcp_client  # the process's HTTP stack

        client = mcp_client(headers=dict(headers))
        return _closing(client, streamable_http_client(url, http_client=client))

    return open_http


def _sse_transport(url: str, headers: Mapping[str, str]) -> Transport:
    def open_sse() -> AbstractAsyncContextManager[Any]:
        from mcp.client.sse import sse_client

        from toolrelay.adapters.http.bridge import mcp_client  # the process's HTTP stack

        return sse_client(url, headers=dict(headers), httpx_client_factory=mcp_client)

    return open_sse


@asynccontextmanager
async def _closing(client: Any, inner: AbstractAsyncContextManager[Any]) -> Any:
    async with client, inner as streams:
        yield streams


def _idempotent(item: mt.Tool) -> bool:
    """The server's `idempotentHint` or `readOnlyHint` (MCP tool annotations): a call cut
    by a stopped server is run again when its turn resumes."""
    hints = item.annotations
    return hints is not None and bool(hints.idempotent_hint or hints.read_only_hint)
