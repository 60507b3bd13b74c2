"""httpcore's connection pool, with one idle connection handed to one request at a time.

httpcore (1.0.x) hands a queued request an idle HTTP/1.1 connection, but the
connection stays idle until that request's task runs again and starts on it.
A second request entering the pool meanwhile sees the same connection as
available and is handed it too; so are the third, the fourth... All but the
first then fail to start (`ConnectionNotAvailable`), are queued again, and
meet the same fate on the next idle connection (encode/httpcore#822). In a
burst of chats on warm pools this costs each pool's k-th request about k
rounds of the event loop, which under load is seconds: measured with 1,000
chats on warm pools, first tokens at p50 2.1 s and p99 3.6 s, against
1.7 s and 1.8 s with this pool.

`FairPool` replaces the pool's assignment pass, and changes nothing else:

1. an idle connection already handed to a request that has not started on it
   is not handed to another one (nor closed as surplus);
2. as in httpcore, an idle connection is closed while the pool holds more than
   `max_keepalive_connections` connections, busy ones included;
3. closed and expired connections are dropped as before, and a request with no
   connection to take gets a new one while `max_connections` allows, else one
   in place of an idle connection, else waits, as before;
4. a connection the pass drops is marked closed in the pass itself. httpcore
   closes the dropped ones after the pass, one by one, awaiting each: a request
   handed one of them (it expired between handing and use: a burst that comes
   as the keep-alive runs out) could meanwhile start on it and have it closed
   under its answer (a `ReadError` mid-stream). Marked closed, it is not
   available to start on: the request is queued again and takes another.

`make_fair(client)` switches an httpx client's own transport to it, and its
plain-TCP connections to `lean_stream.LeanStream` (read without anyio's layers). Proxy
transports (from the environment) keep httpcore's pool: their class adds the
tunnelling this pool would lose.
"""

from __future__ import annotations

from typing import Any

import httpcore
import httpx
from httpcore._async.http11 import HTTPConnectionState  # private: tests/.../test_fair_pool.py

from toolrelay.adapters.models.lean_stream import LeanBackend

__all__ = ["FairPool", "make_fair"]


class FairPool(httpcore.AsyncConnectionPool):
    """`httpcore.AsyncConnectionPool` with the assignment pass of the module doc."""

    def _assign_requests_to_connections(self) -> list[httpcore.AsyncConnectionInterface]:
        handed = {id(r.connection) for r in self._requests if r.connection is not None}
        closing: list[httpcore.AsyncConnectionInterface] = []
        kept: list[httpcore.AsyncConnectionInterface] = []
        remaining = len(self._connections)
        for connection in self._connections:
            if connection.is_closed():
                remaining -= 1
            elif connection.has_expired() or (
                connection.is_idle()
                and id(connection) not in handed
                and remaining > self._max_keepalive_connections
            ):
                closing.append(connection)
                remaining -= 1
            else:
                kept.append(connection)
        self._connections = kept
        for request in self._requests:
            if request.connection is not None:
                continue
            origin = request.request.url.origin
            found = self._available(origin, handed)
            if found is not None:
                connection = found
            else:
                if len(kept) >= self._max_connections:  # httpcore stores None as maxsize
                    spare = next((c for c in kept if c.is_idle() and id(c) not in handed), None)
                    if spare is None:
                        continue  # waits for a connection to be released
                    kept.remove(spare)
                    closing.append(spare)
                connection = self.create_connection(origin)
                kept.append(connection)
            handed.add(id(connection))  # while idle, it is this request's only
            request.assign_to_connection(connection)
        for connection in closing:
            _mark_closed(connection)
        return closing

    def _available(
        self, origin: httpcore.Origin, handed: set[int]
    ) -> httpcore.AsyncConnectionInterface | None:
        for connection in self._connections:
            if (
                connection.can_handle_request(origin)
                and connection.is_available()
                and not (connection.is_idle() and id(connection) in handed)
            ):
                return connection
        return None


def _mark_closed(connection: httpcore.AsyncConnectionInterface) -> None:
    """What `aclose` does first, done now: no request starts on it once the pass is over."""
    inner = getattr(connection, "_connection", None)
    if isinstance(inner, httpcore.AsyncHTTP11Connection):
        inner._state = HTTPConnectionState.CLOSED


def make_fair(client: httpx.AsyncClient) -> bool:
    """Give `client`'s own transport a `FairPool`; False when its transport is not httpx's
    own with httpcore's plain pool (a custom transport: left as it is)."""
    transport: Any = getattr(client, "_transport", None)
    pool = getattr(transport, "_pool", None)
    if type(transport) is not httpx.AsyncHTTPTransport or type(pool) is not (
        httpcore.AsyncConnectionPool
    ):
        return False
    pool.__class__ = FairPool
    pool._network_backend = LeanBackend(pool._network_backend)  # plain TCP read lean
    return True
