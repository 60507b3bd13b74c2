"""The proxy each request goes through, from the environment, read once per session.

aiohttp's own `trust_env=True` reads the environment and `~/.netrc` again for
every request, in a worker thread (`asyncio.to_thread`) before it connects:
profiled under 200 streamed chats, 9 % of the server's CPU went there, and each
request waited for a thread of a small pool. `EnvProxies` reads the same
variables once, when a transport makes its session, and decides per host once.

Rules (what urllib and aiohttp do, minus the per-request reads):

1. `http://` URLs go through `HTTP_PROXY`, `https://` ones through `HTTPS_PROXY`
   (either case of the names; urllib's `getproxies`); no other scheme is proxied
   (`ALL_PROXY` is not read, as aiohttp does not).
2. A host `NO_PROXY` names goes direct (urllib's `proxy_bypass`: `*`, a domain
   and its subdomains, a host with or without its port), decided once per host.
3. Credentials in the proxy's URL (`http://user:pass@proxy:3128`) go as a
   `Proxy-Authorization` header, not in the URL: on the CONNECT of a tunnelled
   (`https://`) request, on a plain request itself; `~/.netrc` is not read.
4. A proxy URL that is not `http://` is ignored with a warning (aiohttp speaks
   to a proxy in plain HTTP only).
5. A redirect keeps the proxy of the URL first asked for.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies, proxy_bypass

__all__ = ["EnvProxies", "ProxyRoute"]

log = logging.getLogger(__name__)

SCHEMES = ("http", "https")
AUTH = "Proxy-Authorization"


@dataclass(frozen=True, slots=True)
class ProxyRoute:
    """Where a request goes instead of straight to its host."""

    url: str
    """The proxy, without credentials."""
    auth: str | None = None
    """`Proxy-Authorization`'s value when the proxy's URL had credentials (rule 3)."""

    def headers(
        self, url: str, headers: Mapping[str, str]
    ) -> tuple[Mapping[str, str], Mapping[str, str] | None]:
        """(the request's headers, the CONNECT's) for a request to `url` (rule 3)."""
        if self.auth is None:
            return headers, None
        if urlsplit(url).scheme.lower() == "https":
            return headers, {AUTH: self.auth}
        return {**headers, AUTH: self.auth}, None


class EnvProxies:
    """The environment's proxies, read once (module doc)."""

    def __init__(self) -> None:
        found = getproxies()
        self._routes = {s: route for s in SCHEMES if (route := _route(found.get(s)))}
        self._chosen: dict[tuple[str, str], ProxyRoute | None] = {}

    def for_url(self, url: str) -> ProxyRoute | None:
        """The proxy for `url`, or None to go direct (rules 1 and 2)."""
        if not self._routes:
            return None
        parts = urlsplit(url)
        key = (parts.scheme.lower(), parts.netloc.rpartition("@")[2].lower())
        if key not in self._chosen:
            route = self._routes.get(key[0])
            if route is not None and proxy_bypass(key[1]):
                route = None
            self._chosen[key] = route
        return self._chosen[key]


def _route(value: str | None) -> ProxyRoute | None:
    if not value:
        return None
    parts = urlsplit(value if "://" in value else f"http://{value}")
    if parts.scheme.lower() != "http":
        log.warning("ignoring the %s proxy %s: only http:// proxies work", parts.scheme, value)
        return None
    host = parts.netloc.rpartition("@")[2]
    auth = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        auth = "Basic " + base64.b64encode(pair.encode()).decode()
    return ProxyRoute(f"http://{host}", auth)
