"""The floors a streaming server is measured against: minimal pass-through proxies.

A raw ASGI app (no framework) that forwards each POST to the upstream with one
shared client and writes the upstream's body bytes back as they arrive. It
parses nothing, so whatever toolrelay adds on top of it is the price of doing
the work (parsing, the loop, events, rendering). Two clients:

- `aiohttp`: one `ClientSession`, the body read with `iter_any()` (the
  strongest floor here: the targets are ratios to it);
- `httpx2`: one `AsyncClient`, the body read with `aiter_raw()`.

`python -m benchmarks.proxy PORT UPSTREAM_URL [aiohttp|httpx2]` serves it with
uvicorn, the same server (and the same defaults) as `toolrelay serve`.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import uvicorn

Scope = dict[str, Any]
Forward = Callable[[bytes, str], AbstractAsyncContextManager[tuple[int, AsyncIterator[bytes]]]]
"""POST a body to a URL: (status, the body's chunks), within the context."""
HEADERS = {"content-type": "application/json"}


def _aiohttp() -> tuple[Callable[[], Awaitable[Forward]], Callable[[], Awaitable[None]]]:
    import aiohttp

    session: aiohttp.ClientSession | None = None

    async def start() -> Forward:
        nonlocal session
        # the same pool size as toolrelay's transport: a fair floor
        connector = aiohttp.TCPConnector(limit=4096, limit_per_host=0, keepalive_timeout=30)
        session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None)
        )
        opened = session

        @asynccontextmanager
        async def forward(body: bytes, url: str) -> AsyncIterator[tuple[int, AsyncIterator[bytes]]]:
            async with opened.post(url, data=body, headers=HEADERS) as response:
                yield response.status, response.content.iter_any()

        return forward

    async def stop() -> None:
        if session is not None:
            await session.close()

    return start, stop


def _httpx2() -> tuple[Callable[[], Awaitable[Forward]], Callable[[], Awaitable[None]]]:
    import httpx2

    client: httpx2.AsyncClient | None = None

    async def start() -> Forward:
        nonlocal client
        limits = httpx2.Limits(max_connections=4096, max_keepalive_connections=256)
        client = httpx2.AsyncClient(timeout=None, limits=limits)
        opened = client

        @asynccontextmanager
        async def forward(body: bytes, url: str) -> AsyncIterator[tuple[int, AsyncIterator[bytes]]]:
            request = opened.build_request("POST", url, content=body, headers=HEADERS)
            response = await opened.send(request, stream=True)
            try:
                yield response.status_code, response.aiter_raw()
            finally:
                await response.aclose()

        return forward

    async def stop() -> None:
        if client is not None:
            await client.aclose()

    return start, stop


STACKS = {"aiohttp": _aiohttp, "httpx2": _httpx2}


def make_app(upstream: str, stack: str = "aiohttp") -> Any:
    start, stop = STACKS[stack]()
    forward: Forward | None = None

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        nonlocal forward
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    forward = await start()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await stop()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        assert forward is not None
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        async with forward(body, upstream + scope["path"]) as (status, chunks):
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            async for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    return app


def main() -> None:
    port, upstream = int(sys.argv[1]), sys.argv[2].rstrip("/")
    stack = sys.argv[3] if len(sys.argv) > 3 else "aiohttp"
    uvicorn.run(make_app(upstream, stack), host="127.0.0.1", port=port)


if __name__ == "__main__":
    main()
