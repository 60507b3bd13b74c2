"""API-key authentication: `Authorization: Bearer <key>` (or `X-API-Key`) → a user.

A request without a key may carry the web page's session cookie instead
(`server.session`): then writes also need the CSRF header.

Lookups are cached briefly (keys are hashed in the store, so a cache hit saves
a hash and a query per request); revoking through this server drops the cache
at once, other workers see it within `ttl` seconds. An answer older than half
the `ttl` is still used while one query refreshes it in the background, so a
steady stream of requests never waits for the database (a burst of a thousand
chats all waited for one query whenever the answer expired); none is used older
than `ttl`, so a revocation elsewhere takes effect as soon as it did before.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from fastapi import Request

from toolrelay.adapters.stores import Store, User
from toolrelay.server.error_responses import APIError
from toolrelay.server.session import COOKIE, CSRF_HEADER, SAFE_METHODS, csrf_ok, verify
from toolrelay.server.throttle import FailureLimiter


class KeyCache:
    """Recent key → user answers; concurrent lookups of one key share one query."""

    def __init__(
        self, store: Store, *, ttl: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._ttl = ttl
        self._clock = clock
        self._cache: dict[str, tuple[float, User | None]] = {}
        self._inflight: dict[str, asyncio.Future[User | None]] = {}
        self._generation = 0
        """Bumped by `clear()`: a query started before it must not put its answer back."""
        self._refreshing: dict[str, asyncio.Task[None]] = {}

    async def user(self, key: str) -> User | None:
        return await self._lookup(key, self._store.user_for_key)

    async def user_for_session(self, key_id: str, session_id: str) -> User | None:
        """The owner of a browser session's key, while the key is active and the session
        was not signed out."""
        return await self._lookup(
            f"\x00session:{session_id}:{key_id}",
            lambda _: self._store.user_for_session(key_id, session_id),
        )

    async def _lookup(
        self, key: str, fetch: Callable[[str], Awaitable[User | None]]
    ) -> User | None:
        hit = self._cache.get(key)
        if hit is not None:
            age = self._clock() - hit[0]
            if age < self._ttl:
                if age >= self._ttl / 2 and key not in self._refreshing:
                    self._refresh(key, fetch)
                return hit[1]
        waiting = self._inflight.get(key)
        if waiting is not None:  # a burst of requests with one key: one query, not one each
            return await asyncio.shield(waiting)
        return await self._fetch(key, fetch)

    def _refresh(self, key: str, fetch: Callable[[str], Awaitable[User | None]]) -> None:
        """Ask again in the background; the cached answer serves meanwhile."""

        async def again() -> None:
            with contextlib.suppress(Exception):  # the next lookup after `ttl` asks (and fails)
                await self._fetch(key, fetch)

        task = asyncio.get_running_loop().create_task(again())
        self._refreshing[key] = task
        task.add_done_callback(lambda _: self._refreshing.pop(key, None))

    async def _fetch(self, key: str, fetch: Callable[[str], Awaitable[User | None]]) -> User | None:
        now = self._clock()
        generation = self._generation
        future: asyncio.Future[User | None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            user = await fetch(key)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: the waiters re-raise it themselves
            raise
        finally:
            del self._inflight[key]
        future.set_result(user)
        if generation == self._generation:  # else a revocation came meanwhile: ask again
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (now, user)
        return user

    def clear(self) -> None:
        self._generation += 1
        self._cache.clear()


def client_address(request: Request) -> str:
    """The caller's address as uvicorn reports it (behind a trusted proxy: the forwarded one)."""
    return request.client.host if request.client is not None else "unknown"


def request_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.headers.get("x-api-key") or None


async def authenticate(
    request: Request,
    cache: KeyCache,
    secret: bytes | None = None,
    failures: FailureLimiter | None = None,
) -> User:
    """The caller, by API key or session cookie; a wrong key counts against `failures`
    (too many: 429, before the key is even looked up)."""
    key = request_key(request)
    token = request.cookies.get(COOKIE) if secret is not None else None
    if key is None and token and secret is not None:
        return await session_user(request, cache, secret, token)
    if key is None:
        raise APIError(
            401,
            "Missing API key: send it as 'Authorization: Bearer <key>'.",
            code="missing_api_key",
        )
    address = client_address(request)
    if failures is not None:
        failures.check(address, key)
    user = await cache.user(key)
    if user is None:
        if failures is not None:
            failures.failed(address, key)
        raise APIError(401, "Invalid or revoked API key.", code="invalid_api_key")
    return user


async def session_user(request: Request, cache: KeyCache, secret: bytes, token: str) -> User:
    """The user of a session cookie; a write must also carry the session's CSRF token."""
    session = verify(secret, token)
    if session is None:
        raise APIError(401, "Your session has expired: sign in again.", code="session_expired")
    if request.method not in SAFE_METHODS and not csrf_ok(
        secret, token, request.headers.get(CSRF_HEADER)
    ):
        raise APIError(
            403, "Missing or wrong X-CSRF-Token for a cookie session.", code="csrf_failed"
        )
    user = await cache.user_for_session(session.key_id, session.id)
    if user is None or user.id != session.user_id:
        raise APIError(
            401,
            "This session was signed out, or its API key revoked: sign in again.",
            code="session_revoked",
        )
    return user
