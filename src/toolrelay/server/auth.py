"""API-key authentication: `Authorization: Bearer <key>` (or `X-API-Key`) → a user.

Lookups are cached briefly (keys are hashed in the store, so a cache hit saves
a hash and a query per request); revoking through this server drops the cache
at once, other workers see it within `ttl` seconds.
"""

from __future__ import annotations

import asyncio
import time

from fastapi import Request

from toolrelay.adapters.stores import Store, User
from toolrelay.server.errors import APIError


class KeyCache:
    """Recent key → user answers; concurrent lookups of one key share one query."""

    def __init__(self, store: Store, *, ttl: float = 10.0) -> None:
        self._store = store
        self._ttl = ttl
        self._cache: dict[str, tuple[float, User | None]] = {}
        self._inflight: dict[str, asyncio.Future[User | None]] = {}

    async def user(self, key: str) -> User | None:
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self._ttl:
            return hit[1]
        waiting = self._inflight.get(key)
        if waiting is not None:  # a burst of requests with one key: one query, not one each
            return await asyncio.shield(waiting)
        future: asyncio.Future[User | None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            user = await self._store.user_for_key(key)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: the waiters re-raise it themselves
            raise
        finally:
            del self._inflight[key]
        future.set_result(user)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key] = (now, user)
        return user

    def clear(self) -> None:
        self._cache.clear()


def request_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or None


async def authenticate(request: Request, cache: KeyCache) -> User:
    key = request_key(request)
    if key is None:
        raise APIError(
            401,
            "Missing API key: send it as 'Authorization: Bearer <key>'.",
            code="missing_api_key",
        )
    user = await cache.user(key)
    if user is None:
        raise APIError(401, "Invalid or revoked API key.", code="invalid_api_key")
    return user
