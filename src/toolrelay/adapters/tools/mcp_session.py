"""One live MCP session per server: started lazily, shared, restarted with backoff.

Owns the session's life: a task of its own enters the transport (a child
process, an HTTP connection) and the `ClientSession`, so any turn's task may
use the session while its scopes are entered and left in one task, as anyio
requires. The task notices the transport ending (the process died, the HTTP
stream closed) and the session is started again on the next use, no sooner
than the backoff allows. Closing stops the task, which ends the child process
through the SDK (stdin closed, then SIGTERM/SIGKILL to its process group).

It does not list or call tools (`mcp.py` does); it only hands out a ready
session or raises `ToolError` saying why there is none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any

import anyio
from mcp import ClientSession
from mcp.shared.message import SessionMessage

from toolrelay.errors import ToolError

__all__ = ["Backoff", "McpConnection", "Transport", "describe"]

log = logging.getLogger("toolrelay.tools.mcp")

START_TIMEOUT_S = 60.0
"""How long `initialize` (and each later request but a tool call) may take when the
server sets no `timeout` of its own."""
CLOSE_GRACE_S = 5.0
"""How long a stopping session may take to end on its own (the SDK closes the child's
stdin, then signals it) before its task is cancelled: closing never waits on a server."""

Transport = Callable[[], AbstractAsyncContextManager[tuple[Any, Any]]]
"""Opens the transport: an async context manager yielding (read stream, write stream)."""
MessageHandler = Callable[[Any], Awaitable[None]]


class Backoff:
    """Delays between restarts: the first retry at once, then base·2ⁿ up to `cap`."""

    def __init__(self, base: float = 0.5, cap: float = 30.0) -> None:
        self.base = base
        self.cap = cap

    def delay(self, failures: int) -> float:
        if failures <= 1:
            return 0.0
        return float(min(self.base * 2 ** (failures - 2), self.cap))


class McpConnection:
    """The session of one MCP server; `session()` starts it when needed."""

    def __init__(
        self,
        name: str,
        transport: Transport,
        *,
        on_message: MessageHandler,
        backoff: Backoff | None = None,
        start_timeout: float = START_TIMEOUT_S,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.name = name
        self._transport = transport
        self._on_message = on_message
        self._backoff = backoff or Backoff()
        self.start_timeout = start_timeout
        """The bound of `initialize` and of every request but a tool call (those have
        the turn's `tool_timeout`)."""
        self._clock = clock or time.monotonic
        self._lock = asyncio.Lock()
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[ClientSession] | None = None
        self._stop = asyncio.Event()
        self._failures = 0
        self._not_before = 0.0
        self.last_error: str | None = None
        self.starts = 0
        """How many times the session was started (restarts included)."""

    @property
    def alive(self) -> bool:
        return self._session is not None and self._task is not None and not self._task.done()

    async def session(self) -> ClientSession:
        """The running session; starts (or restarts) it, or raises `ToolError` saying why not.

        A server another caller is starting is not waited for: the caller (a turn) goes
        on without its tools, so one slow or silent server holds up no turn but the
        one that started it, and that one for `start_timeout` at most."""
        session = self._session
        if session is not None and self.alive:
            return session
        if self._lock.locked():
            raise ToolError(f"MCP server {self.name!r} is still starting", reason="starting")
        async with self._lock:
            if self._session is not None and self.alive:
                return self._session
            await self._reap()
            wait = self._not_before - self._clock()
            if self._failures and wait > 0:
                raise ToolError(
                    f"MCP server {self.name!r} is unavailable ({self.last_error}); "
                    f"next restart in {wait:.1f} s",
                    reason=self.last_error,
                )
            return await self._start()

    def succeeded(self) -> None:
        """A call went through: the next failure starts the backoff from scratch."""
        self._failures = 0

    def broken(self, reason: str) -> None:
        """The session is unusable (expired, closed): drop it; the next use restarts it."""
        self._record_failure(reason)
        self._stop_task()

    async def _start(self) -> ClientSession:
        self._stop = asyncio.Event()
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(_retrieve)  # an answer nobody waits for any more is not an error
        self._ready = ready
        self._task = asyncio.get_running_loop().create_task(
            self._run(ready, self._stop), name=f"mcp:{self.name}"
        )
        self.starts += 1
        try:
            async with asyncio.timeout(self.start_timeout):
                session = await asyncio.shield(ready)
        except TimeoutError:
            self._stop_task()
            await self._reap()
            self._record_failure(f"no answer to initialize within {self.start_timeout:g} s")
            raise ToolError(
                f"MCP server {self.name!r} failed to start: {self.last_error}",
                reason=self.last_error,
            ) from None
        except asyncio.CancelledError:
            self._stop_task()
            await self._reap()
            raise
        except Exception as exc:
            await self._reap()
            self._record_failure(describe(exc))
            raise ToolError(
                f"MCP server {self.name!r} failed to start: {self.last_error}",
                reason=self.last_error,
            ) from exc
        self._session = session
        self.last_error = None
        return session

    async def _run(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        """The session's own task: enter everything, wait for stop or for the transport to end."""
        ended = asyncio.Event()
        established = False
        try:
            async with AsyncExitStack() as stack:
                # exits run backwards: the session, then the transport (ending the pump), then the group
                group = await stack.enter_async_context(anyio.create_task_group())
                read, write = await stack.enter_async_context(self._transport())
                send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                group.start_soon(_pump, read, send, ended)
                session = await stack.enter_async_context(
                    ClientSession(receive, write, message_handler=self._on_message)  # type: ignore[arg-type]
                )
                await session.initialize()
                if not ready.done():
                    ready.set_result(session)
                established = True
                await _first(stop.wait(), ended.wait())
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ToolError("cancelled"))
            if not isinstance(exc, Exception):
                raise
            log.debug("MCP server %r session ended: %s", self.name, describe(exc))
        finally:
            self._session = None
            if established and ended.is_set() and not stop.is_set():
                self._record_failure("the connection closed")
                log.warning("MCP server %r: connection closed; it restarts on next use", self.name)

    def _record_failure(self, reason: str) -> None:
        self._failures += 1
        self.last_error = reason
        self._not_before = self._clock() + self._backoff.delay(self._failures)

    def _stop_task(self) -> None:
        self._session = None
        self._stop.set()

    async def _reap(self) -> None:
        """Wait for a stopped (or stopping) session task to finish its cleanup: at once
        (cancelled) when it never got through `initialize` (a silent server answers
        nothing, a stop included), else within `CLOSE_GRACE_S`, then cancelled."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        if self._ready is not None and not self._ready.done():
            task.cancel()
        elif not task.done():
            await asyncio.wait({task}, timeout=CLOSE_GRACE_S)
            task.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(task)

    async def aclose(self) -> None:
        """Stop the session; the SDK ends the child process (no orphans). A start under
        way is cancelled, not waited for: closing ends whatever the server does."""
        self._stop_task()
        await self._reap()
        async with self._lock:  # a start that was under way has given up by now
            self._stop_task()
            await self._reap()


async def _pump(read: Any, send: Any, ended: asyncio.Event) -> None:
    """Forward the transport's messages to the session; note when the transport ends."""
    try:
        async with send:
            async for item in read:
                await send.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        pass
    finally:
        ended.set()


async def _first(*waits: Awaitable[Any]) -> None:
    """Return when the first of `waits` finishes; cancel the rest."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def describe(exc: BaseException) -> str:
    """A short reason, unwrapping the exception groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    if isinstance(exc, ToolError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
