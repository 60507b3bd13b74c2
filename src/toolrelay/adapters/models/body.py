"""One upstream response body as raw chunks, read through one async generator.

`UpstreamBody` is what `ModelClient.open` returns (a `ModelStream`). Iterating
it iterates its generator itself (`__aiter__` hands it out): no layer of ours
per chunk between the reader and the transport's stream. The generator turns
transport errors into `ProviderError`s, lets the call's `Watchdog` see when a
read waits on the server (it is suspended in an `await` then) and releases the
connection when it ends, fails or is closed. It reads the first chunk while
the request is being opened (`first()`), and yields that chunk twice: once to
the opener, which looks at it, and once more to the reader, first of all.

Below it, the generator reads the transport's own stream (`transport_chunks`):
what `Response.aiter_raw` yields without its layer per chunk (an async
generator counting bytes around a chunker with nothing to do), and without
httpx's generator around the transport's, which only renames httpcore's errors
(done here, with httpx's own mapping, when one comes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from types import AsyncGeneratorType
from typing import cast

import httpx

from toolrelay.adapters.models.errors import lost_connection
from toolrelay.adapters.models.lean_body import lean_body
from toolrelay.adapters.models.watchdog import DEFAULT_TIMEOUTS, Timeouts, Watchdog
from toolrelay.core.formats.content import BodyFormat
from toolrelay.errors import ProviderError

__all__ = ["DEFAULT_TIMEOUTS", "Timeouts", "UpstreamBody", "Watchdog"]


class UpstreamBody:
    """One response body as raw chunks (a `ModelStream`); `aclose()` frees the connection.

    `decode`: a compressed body, read through httpx's decoders (`aiter_bytes`).
    """

    def __init__(
        self,
        response: httpx.Response,
        watchdog: Watchdog,
        *,
        decode: bool,
        released: Callable[[], None] | None = None,
    ) -> None:
        self.response = response
        self._released = released
        """Called once when the connection goes back (the pool choice counts bodies open)."""
        self.format: BodyFormat = "json"
        """Set by the opener once the first chunk is in (`core.formats.content`)."""
        chunks: AsyncIterator[bytes]
        self._renamed: Renamer = _as_is
        if decode:
            chunks = response.aiter_bytes()
        else:
            chunks, self._renamed = transport_chunks(response)
        self._chunks = chunks
        self._watchdog = watchdog
        # the generator's own type: the watchdog reads its `ag_await`
        self._reads = cast(AsyncGeneratorType[bytes, None], self._reading(chunks))
        watchdog.body = self._reads

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
        try:
            try:
                chunk = await read()
            except StopAsyncIteration:
                return
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
                yield chunk
                chunk = b""  # not held while the next read waits: memory per chat
        except asyncio.CancelledError:
            expired = watch.timed_out()
            if expired is None:
                raise  # cancelled from outside: a cancel, not a timeout
            raise expired from None
        except httpx.TransportError as exc:
            raise lost_connection(exc) from exc
        except Exception as exc:
            renamed = self._renamed(exc)
            if renamed is None:
                raise
            raise lost_connection(renamed) from renamed
        finally:
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
        try:
            closer = getattr(self._chunks, "aclose", None)
            if closer is not None:
                await closer()
        except RuntimeError:  # mid-read in another task: closing the response ends that read
            pass
        finally:
            released, self._released = self._released, None
            if released is not None:
                released()
            await self.response.aclose()

    async def aclose(self) -> None:
        """Idempotent; later iteration stops at once."""
        self._watchdog.close()
        try:
            await self._reads.aclose()
        except RuntimeError:  # mid-read in another task: closing the response ends that read
            pass
        finally:
            await self._release()


Renamer = Callable[[Exception], httpx.TransportError | None]
"""An error of the stream below as the `httpx.TransportError` httpx would raise, or None."""


def _as_is(exc: Exception) -> None:
    return None


def transport_chunks(response: httpx.Response) -> tuple[AsyncIterator[bytes], Renamer]:
    """The body's chunks as the transport hands them over, and how its errors are renamed.

    Known httpx stream types are read one layer down: httpcore's stream below
    `AsyncResponseStream` (its errors renamed as httpx renames them), or the
    iterator an `AsyncIteratorByteStream` wraps (`MockTransport`'s; nothing to
    rename). A chunked body on a plain-TCP connection of httpcore's pool is
    read lower still (`lean_body`). Anything else is the transport's stream
    itself, or `aiter_raw` where httpx has more to check. `UpstreamBody.aclose`
    closes the response, as `aiter_raw` would at the end.
    """
    stream = response.stream
    if response.is_stream_consumed or not isinstance(stream, httpx.AsyncByteStream):
        return response.aiter_raw(), _as_is  # raises what httpx raises for these
    response.is_stream_consumed = True
    kind = type(stream)
    if kind is _AsyncResponseStream and _map_errors is not None:
        inner = getattr(stream, "_httpcore_stream", None)
        lean = lean_body(inner)  # plain TCP, chunked: read past httpcore's and h11's layers
        if lean is not None:
            return lean, _renamed
        if inner is not None and hasattr(inner, "__aiter__"):
            return inner.__aiter__(), _renamed
    if kind is _AsyncIteratorByteStream:
        inner = getattr(stream, "_stream", None)
        if (
            inner is not None
            and not getattr(stream, "_is_stream_consumed", True)
            and not hasattr(inner, "aread")
        ):
            stream._is_stream_consumed = True  # type: ignore[attr-defined]  # as its iterator does
            return inner.__aiter__(), _as_is
    return stream.__aiter__(), _as_is


def _renamed(exc: Exception) -> httpx.TransportError | None:
    """httpcore's error as httpx's `AsyncResponseStream` would have raised it."""
    assert _map_errors is not None
    try:
        with _map_errors():
            raise exc
    except httpx.TransportError as renamed:
        return renamed
    except Exception:
        return None


try:  # httpx's own layers, and its renaming of httpcore's errors (private: checked here)
    from httpx._content import AsyncIteratorByteStream as _AsyncIteratorByteStream
    from httpx._transports.default import AsyncResponseStream as _AsyncResponseStream
    from httpx._transports.default import map_httpcore_exceptions as _map_errors
except ImportError:  # another httpx: its streams are read through its own layers
    _AsyncIteratorByteStream = _AsyncResponseStream = None  # type: ignore[assignment,misc]
    _map_errors = None  # type: ignore[assignment]
