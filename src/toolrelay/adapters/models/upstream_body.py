"""One upstream response body as raw chunks, read through one async generator.

`UpstreamBody` is what `ModelClient.open` returns (a `ModelStream`). Iterating
it iterates its generator itself (`__aiter__` hands it out): no layer of ours
per chunk between the reader and the transport's chunks. The generator turns
transport errors into `ProviderError`s, lets the call's `Watchdog` see when a
read waits on the server (it is suspended in an `await` then), stops a body
past the route's size cap and releases the connection when it ends, fails or
is closed. It reads the first chunk while the request is being opened
(`first()`), and yields that chunk twice: once to the opener, which looks at
it, and once more to the reader, first of all.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from types import AsyncGeneratorType
from typing import Final, cast

from toolrelay.adapters.http.seam import BodyError, Response
from toolrelay.adapters.models.failures import lost_connection, too_large
from toolrelay.adapters.models.memory import read_big
from toolrelay.adapters.models.watchdog import DEFAULT_TIMEOUTS, Timeouts, Watchdog
from toolrelay.core.formats.content import BodyFormat
from toolrelay.errors import ProviderError

__all__ = ["DEFAULT_TIMEOUTS", "NO_CAP", "Timeouts", "UpstreamBody", "Watchdog"]

NO_CAP: Final = 1 << 62
"""A size cap no body reaches (a route with no cap): one compare per chunk either way."""


class UpstreamBody:
    """One response body as raw chunks (a `ModelStream`); `aclose()` frees the connection.

    `max_bytes`: the body is cut there with a `ProviderError` (what came before is read).
    """

    def __init__(self, response: Response, watchdog: Watchdog, *, max_bytes: int = NO_CAP) -> None:
        self.response = response
        self.format: BodyFormat = "json"
        """Set by the opener once the first chunk is in (`core.formats.content`)."""
        self.size = 0
        """Bytes read so far."""
        self._max_bytes = max_bytes
        self._chunks = response.chunks()
        self._watchdog = watchdog
        # the generator's own type: the watchdog reads its `ag_await`
        self._reads = cast(AsyncGeneratorType[bytes, None], self._reading(self._chunks))
        watchdog.body = self._reads
        self._released = False

    async def first(self) -> bytes | None:
        """The first chunk (None: an empty body), read while opening; the reader gets it too."""
        return await anext(self._reads, None)

    def __aiter__(self) -> AsyncGenerator[bytes, None]:
        return self._reads

    async def __anext__(self) -> bytes:
        """For `anext(body)`; `async for` iterates the generator itself."""
        return await self._reads.__anext__()

    async def _reading(self, chunks: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
        watch = self._watchdog
        read = chunks.__anext__
        cap = self._max_bytes
        size = 0
        try:
            try:
                chunk = await read()
            except StopAsyncIteration:
                return
            size = len(chunk)
            if size > cap:
                raise too_large(cap)
            yield chunk  # to the opener
            yield chunk  # to the reader
            chunk = b""
            watch.reading()
            while True:
                if watch.expired is not None:
                    self._overdue(watch)
                try:
                    chunk = await read()
                except StopAsyncIteration:
                    return
                size += len(chunk)
                if size > cap:
                    raise too_large(cap)
                yield chunk
                chunk = b""  # not held while the next read waits: memory per chat
        except asyncio.CancelledError:
            expired = watch.timed_out()
            if expired is None:
                raise  # cancelled from outside: a cancel, not a timeout
            raise expired from None
        except BodyError as exc:
            raise lost_connection(exc) from exc
        finally:
            self.size = size
            watch.close()
            await self._release()

    @staticmethod
    def _overdue(watch: Watchdog) -> None:
        """Between reads: the total ran out while the reader was busy (raise it), or a
        timeout fired as the last chunk came in and its cancel was lost: the chunk did come."""
        if watch.expiring:
            watch.settled()
        elif watch.expired is not None:
            raise watch.expired

    async def drain(self, grace: float) -> None:
        """Read the rest of a body that said it was over, for at most `grace` s in all,
        dropping what comes; a body read to its end gives its connection back to the pool."""
        reads = self._reads
        if reads.ag_frame is None:  # ended or closed
            return
        self._watchdog.ending(grace)
        try:
            async for _ in reads:
                pass
        except ProviderError:  # the grace ran out, or the connection went
            pass
        finally:
            await self.aclose()

    async def _release(self) -> None:
        if self._released:
            return
        self._released = True
        try:
            closer = getattr(self._chunks, "aclose", None)
            if closer is not None:
                await closer()
        except RuntimeError:  # mid-read in another task: closing the response ends that read
            pass
        finally:
            await self.response.aclose()
            read_big(self.size)

    async def aclose(self) -> None:
        """Idempotent; later iteration stops at once."""
        self._watchdog.close()
        try:
            await self._reads.aclose()
        except RuntimeError:  # mid-read in another task: closing the response ends that read
            pass
        finally:
            await self._release()
