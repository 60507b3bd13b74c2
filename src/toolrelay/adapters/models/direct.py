"""Posting a model request straight to the transport httpx would pick, without its layers.

`AsyncClient.build_request` + `send` cost about 200 µs of CPU per request
before a transport sees it: headers, cookies and params merged anew, an auth
flow, a redirect loop, event hooks, a round trip through the standard
library's cookie jar, and one more async generator around the body (a layer
on every chunk). A model call needs none of that on its usual path: one POST
to one URL with the same headers each time. `Sender` builds those headers
once per URL with httpx's own merge (client defaults, then ours; `Host`
first, `Content-Length` last, as `httpx.Request` does) and hands the request
to the transport the client would choose for it (a proxy from the
environment included).

What needs httpx's layers still gets them, so behaviour does not change:

1. A URL with credentials in it (httpx turns them into basic auth), and any
   request while the client holds cookies, go through `AsyncClient.send`.
2. A response that sets cookies has them stored in the client's jar, as
   httpx does; the next requests then take path 1 and send them.
3. A redirect is closed and the request sent again through
   `AsyncClient.send`, which follows it; that URL stays on httpx's path.
4. httpx's `INFO` line per request is logged the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["Sender", "header_values"]

_httpx_log = logging.getLogger("httpx")


@dataclass(frozen=True, slots=True)
class _Route:
    """One URL's request template: where it goes and with which headers."""

    url: httpx.URL
    transport: httpx.AsyncBaseTransport
    headers: httpx.Headers
    extensions: dict[str, Any]


class Sender:
    """One httpx client; `post` sends on its transport directly when nothing needs httpx."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self._routes: dict[tuple[str, bool], _Route | None] = {}
        self.open = 0
        """Requests sent on this client whose bodies are not released yet (`counted`)."""

    def counted(self) -> Callable[[], None]:
        """Count one more request; the returned call (idempotent) counts it done."""
        self.open += 1
        counting = True

        def done() -> None:
            nonlocal counting
            if counting:
                counting = False
                self.open -= 1

        return done

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, stream: bool
    ) -> httpx.Response:
        """The response, headers read and body not (close it); httpx's errors as they come."""
        key = (url, stream)
        if key in self._routes:
            route = self._routes[key]
        else:
            route = self._routes[key] = self._route(url, headers)
        if route is None or self.client.cookies:
            return await self._via_client(url, body, headers)
        request_headers = httpx.Headers(route.headers)
        request_headers["Content-Length"] = str(len(body))
        request = httpx.Request(
            "POST",
            route.url,
            headers=request_headers,
            stream=httpx.ByteStream(body),
            extensions=route.extensions,
        )
        request.read()  # `request.content` is there, as with `content=`
        response = await route.transport.handle_async_request(request)
        response.request = request
        _httpx_log.info(
            'HTTP Request: %s %s "%s %d %s"',
            request.method,
            request.url,
            response.http_version,
            response.status_code,
            response.reason_phrase,
        )
        if response.has_redirect_location:  # rule 3
            await response.aclose()
            self._routes[key] = None
            return await self._via_client(url, body, headers)
        if header_values(response.headers, b"set-cookie")[0] is not None:  # rule 2
            self.client.cookies.extract_cookies(response)
        return response

    def _route(self, url: str, headers: Mapping[str, str]) -> _Route | None:
        parsed = httpx.URL(url)
        if parsed.userinfo:  # rule 1
            return None
        find = getattr(self.client, "_transport_for_url", None)
        if find is None:  # another httpx: its own path is the safe one
            return None
        merged = httpx.Headers({"Host": parsed.netloc.decode("ascii")})
        merged.update(self.client.headers)
        merged.update(headers)
        timeout = self.client.timeout.as_dict()
        return _Route(parsed, find(parsed), merged, {"timeout": timeout})

    async def _via_client(
        self, url: str, body: bytes, headers: Mapping[str, str]
    ) -> httpx.Response:
        client = self.client
        request = client.build_request("POST", url, content=body, headers=headers)
        return await client.send(request, stream=True)

    async def aclose(self) -> None:
        await self.client.aclose()


def header_values(headers: httpx.Headers, *names: bytes) -> list[str | None]:
    """The values of the headers `names` (lower case), each as `headers.get` gives it
    (several joined by ", "; None when absent), in one pass over the raw list: each
    `headers.get` or `in` lowers the key, walks every header and, when it is absent,
    raises and catches a KeyError (~11k instructions apiece)."""
    found: list[list[bytes]] = [[] for _ in names]
    for key, value in headers.raw:
        key = key.lower()
        if key in names:
            found[names.index(key)].append(value)
    return [b", ".join(v).decode("latin-1") if v else None for v in found]
