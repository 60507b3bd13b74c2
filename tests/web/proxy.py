"""A TCP proxy the browser talks through, so a test can cut its connections mid-turn.

`drop()` aborts every connection open at that moment (both sides, no FIN:
as a network failure looks to the browser); new connections go through.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class DroppingProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._transports: set[asyncio.BaseTransport] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.dropped = 0
        self.requests: list[bytes] = []
        """The first bytes of each browser connection's data (a request head, in order)."""

    def __enter__(self) -> DroppingProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def drop(self) -> int:
        """Abort every open connection; returns how many there were."""
        return asyncio.run_coroutine_threadsafe(self._drop(), self._loop).result(10)

    async def _start(self) -> asyncio.Server:
        return await asyncio.start_server(self._handle, "127.0.0.1", 0)

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._drop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _drop(self) -> int:
        count = len(self._transports) // 2
        for transport in list(self._transports):
            transport.abort()  # type: ignore[attr-defined]
        self._transports.clear()
        self.dropped += count
        return count

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            self._tasks.discard(task)
            return
        pair = (writer.transport, up_writer.transport)
        self._transports.update(pair)
        try:
            await asyncio.gather(
                _pipe(reader, up_writer, self.requests), _pipe(up_reader, writer, None)
            )
        finally:
            for transport in pair:
                self._transports.discard(transport)
                transport.abort()
            self._tasks.discard(task)


async def _pipe(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, heads: list[bytes] | None
) -> None:
    try:
        while data := await reader.read(65536):
            if heads is not None and data[:4] in (b"GET ", b"POST", b"PATC", b"DELE"):
                heads.append(data.split(b"\r\n\r\n", 1)[0])
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError, RuntimeError):
        writer.transport.abort()
