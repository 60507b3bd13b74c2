"""An MCP server the tests run as a real process: `python mcp_test_server.py stdio | http PORT | sse PORT`.

Over HTTP it requires `Authorization: Bearer secret-token`. Its tools cover
what the adapter must handle: progress, a slow call that notices being
cancelled, a tool list that changes, images, errors and structured output.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys

from mcp.server.mcpserver import Context, Image, MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

server = MCPServer("toolrelay-test")
state = {"cancelled": 0, "added": 0}

TINY_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def echo_args(ctx: Context, shown: str = "") -> str:
    """The names of the arguments that arrived, declared or not (the client must not drop any)."""
    params = ctx.request_context.params or {}
    return ",".join(sorted(params.get("arguments") or {}))


@server.tool()
async def count_to(n: int, ctx: Context) -> str:
    """Report progress n times."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
    return f"counted to {n}"


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep; a cancelled call is counted."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        state["cancelled"] += 1
        raise
    return "slept"


@server.tool()
def cancelled_calls() -> int:
    """How many calls were cancelled so far."""
    return state["cancelled"]


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a new tool and tell the client the list changed."""
    state["added"] += 1
    name = f"extra_{state['added']}"
    server.add_tool(lambda: name, name=name, description="Added at run time.")
    await ctx.session.send_tool_list_changed()
    return name


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


@server.tool(structured_output=True)
def weather(city: str) -> dict[str, object]:
    """Structured output."""
    return {"city": city, "temperature": 21}


@server.tool()
def picture() -> Image:
    """A 1x1 PNG."""
    return Image(data=base64.b64decode(TINY_PNG), format="png")


def _auth(app: ASGIApp) -> ASGIApp:
    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != b"Bearer secret-token":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    kind = sys.argv[1]
    if kind == "stdio":
        server.run("stdio")
        return
    import uvicorn

    port = int(sys.argv[2])
    app = server.streamable_http_app() if kind == "http" else server.sse_app()
    uvicorn.run(_auth(app), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
