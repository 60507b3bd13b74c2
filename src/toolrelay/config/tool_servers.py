"""`[[tool_servers]]`: MCP servers, OpenAPI servers and tool files, as config.

Owns the table's shape (one model, checked per `kind`) and turning one entry
into a live `ToolSource`. Nothing starts here: the server starts them at
start-up without waiting long (`server.tool_probe`), the CLI on the first turn
that needs them, and a broken server costs its own tools only (the toolbox
reports it), never the server's start-up.
A missing env var or a broken tool file is a `ConfigError` at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolrelay.engine.interfaces import ToolSource
from toolrelay.errors import ConfigError

__all__ = ["ToolServer", "build_source"]

Kind = Literal["mcp-stdio", "mcp-http", "mcp-sse", "openapi", "python"]
_NEEDS: dict[str, str] = {
    "mcp-stdio": "command",
    "mcp-http": "url",
    "mcp-sse": "url",
    "openapi": "url",
    "python": "path",
}


class ToolServer(BaseModel):
    """One `[[tool_servers]]` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    kind: Kind
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: str | None = None
    """Env var holding a bearer token (never the token itself in the file)."""
    auth_header: str | None = None
    auth_header_env: str | None = None
    """OpenAPI: env var whose value is sent in `auth_header` (default `X-API-Key`)."""
    spec_path: str = "openapi.json"
    path: str | None = None
    """`python`: a tool file (`@tool` functions or an Open WebUI `class Tools`)."""
    valves: dict[str, Any] = Field(default_factory=dict)
    prefix: str = ""
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)
    timeout: float | None = Field(default=None, gt=0)
    start_timeout: float | None = Field(default=None, gt=0)
    """MCP: how long `initialize` and `tools/list` may take (60 s); past it the server's
    tools are left out of the turn and it is started again later."""
    requires_approval: bool = False

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> ToolServer:
        needed = _NEEDS[self.kind]
        if getattr(self, needed) is None:
            raise ValueError(f"kind {self.kind!r} needs {needed!r}")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
        return self


def build_source(server: ToolServer, base: Path | None = None) -> ToolSource:
    """The live source of one entry; relative paths are relative to `base` (the config's folder)."""
    options: dict[str, Any] = {
        "name": server.name,
        "prefix": server.prefix,
        "allow": server.allow,
        "deny": server.deny,
        "timeout": server.timeout,
        "requires_approval": server.requires_approval,
    }
    try:
        return _build(server, base, options)
    except ImportError as exc:
        raise ConfigError(
            f"tool_servers {server.name!r}: {exc} (install toolrelay[mcp] for MCP servers)"
        ) from exc


def _build(server: ToolServer, base: Path | None, options: dict[str, Any]) -> ToolSource:
    if server.kind == "python":
        return _python_source(_resolve(str(server.path), base), server)
    if server.kind == "openapi":
        from toolrelay.adapters.tools.openapi import OpenAPIServer

        assert server.url is not None
        return OpenAPIServer(
            server.url,
            spec_path=server.spec_path,
            headers=server.headers,
            bearer_token_env=server.bearer_token_env,
            auth_header=server.auth_header,
            auth_header_env=server.auth_header_env,
            **options,
        )
    from toolrelay.adapters.tools.mcp import MCPServer

    if server.start_timeout is not None:
        options["start_timeout"] = server.start_timeout
    if server.kind == "mcp-stdio":
        assert server.command is not None
        cwd = _resolve(server.cwd, base) if server.cwd else None
        return MCPServer.stdio(server.command, server.args, env=server.env, cwd=cwd, **options)
    assert server.url is not None
    connect = MCPServer.http if server.kind == "mcp-http" else MCPServer.sse
    return connect(
        server.url, headers=server.headers, bearer_token_env=server.bearer_token_env, **options
    )


def _python_source(path: Path, server: ToolServer) -> ToolSource:
    from toolrelay.adapters.tools.sources import tool_file

    if not path.is_file():
        raise ConfigError(f"tool file {str(path)!r}: no such file")
    try:
        return tool_file(path, valves=server.valves, name=server.name)
    except OSError as exc:
        raise ConfigError(
            f"tool_servers {server.name!r}: cannot read {str(path)!r}: {exc}"
        ) from exc


def _resolve(path: str, base: Path | None) -> Path:
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or base is None:
        return candidate
    return base / candidate
