"""The floor a streaming server is measured against: a minimal pass-through proxy.

A raw ASGI app (no framework) that forwards each POST to the upstream with one
shared httpx2 client and writes the upstream's body bytes back as they arrive.
It parses nothing, so whatever toolrelay adds on top of it is the price of
doing the work (parsing, the loop, events, rendering).

`python -m benchmarks.proxy PORT UPSTREAM_URL` serves it with uvicorn, the
same server (and the same defaults) as `toolrelay serve`.
"""

from __future__ import annotations

import sys
from typing import Any

import httpx2
import uvicorn

Scope = dict[str, Any]


def make_app(upstream: str) -> Any:
    client: httpx2.AsyncClient | None = None

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        nonlocal client
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    # the same limits toolrelay's upstream client has: a fair floor
                    limits = httpx2.Limits(max_connections=4096, max_keepalive_connections=256)
                    client = httpx2.AsyncClient(timeout=None, limits=limits)
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    if client is not None:
                        await client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        assert client is not None
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        request = client.build_request(
            "POST",
            upstream + scope["path"],
            content=body,
            headers={"content-type": "application/json"},
        )
        response = await client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()

    return app


def main() -> None:
    port, upstream = int(sys.argv[1]), sys.argv[2].rstrip("/")
    uvicorn.run(make_app(upstream), host="127.0.0.1", port=port)


if __name__ == "__main__":
    main()
