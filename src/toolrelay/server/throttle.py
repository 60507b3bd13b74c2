"""Failed authentications limited per client address and per key prefix (a 429 after).

Without a limit a client could try keys as fast as the server answers (300
wrong keys in 1.2 s). Each wrong API key (`Authorization`, `X-API-Key`, or the
key posted to sign in) counts against two buckets: the client's address and
the key's first `PREFIX_CHARS` characters. A bucket with `max_failures` in the
last `window_s` seconds is refused, with a 429 and `Retry-After`, before the
key is looked up, even when the key is right: else a guess that hits would
still be told apart. The prefix bucket stops one key being guessed from many
addresses by someone who saw its start (all generated keys share `tr-`, so the
bucket takes more than that marker). A right key never counts.

The address is the one uvicorn reports (`X-Forwarded-For` is taken from the
proxies in `FORWARDED_ALLOW_IPS`, by default 127.0.0.1 only). Counts live in
each worker process: with `--workers N` a client gets up to N times the limit.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from typing import Final

from toolrelay.server.error_responses import APIError

__all__ = ["PREFIX_CHARS", "FailureLimiter"]

PREFIX_CHARS: Final = 12
"""A key's characters that name its bucket: `tr-` and 9 of the secret."""
MAX_BUCKETS: Final = 100_000
"""Buckets kept at most; past it the stale ones go, then the oldest (memory stays bounded)."""


class FailureLimiter:
    """Recent failures per bucket, in a sliding window."""

    def __init__(
        self,
        max_failures: int = 10,
        window_s: float = 60.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}

    @staticmethod
    def _buckets(address: str, key: str | None) -> list[str]:
        buckets = [f"addr:{address}"]
        if key:
            buckets.append(f"key:{key[:PREFIX_CHARS]}")
        return buckets

    def check(self, address: str, key: str | None) -> None:
        """Raise a 429 when the address or the key's prefix has failed too often."""
        if self.max_failures <= 0:
            return
        now = self._clock()
        wait = 0.0
        for bucket in self._buckets(address, key):
            times = self._recent(bucket, now)
            if times is not None and len(times) >= self.max_failures:
                wait = max(wait, times[len(times) - self.max_failures] + self.window_s - now)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            raise APIError(
                429,
                f"Too many failed sign-ins or wrong API keys from this address or for this "
                f"key: try again in {seconds} s.",
                code="too_many_failures",
                headers={"Retry-After": str(seconds)},
            )

    def failed(self, address: str, key: str | None) -> None:
        """Count a wrong key (or a wrong sign-in) against its buckets."""
        if self.max_failures <= 0:
            return
        now = self._clock()
        if len(self._failures) >= MAX_BUCKETS:
            self._prune(now)
        for bucket in self._buckets(address, key):
            times = self._failures.setdefault(bucket, deque(maxlen=self.max_failures))
            times.append(now)

    def _recent(self, bucket: str, now: float) -> deque[float] | None:
        times = self._failures.get(bucket)
        if times is None:
            return None
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[bucket]
            return None
        return times

    def _prune(self, now: float) -> None:
        for bucket in list(self._failures):
            self._recent(bucket, now)
        if len(self._failures) >= MAX_BUCKETS:  # all recent: drop the oldest half
            oldest = sorted(self._failures, key=lambda b: self._failures[b][-1])
            for bucket in oldest[: len(oldest) // 2]:
                del self._failures[bucket]
