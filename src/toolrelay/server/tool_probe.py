"""Tool servers started at start-up, so the start-up log can say how each one is.

`ToolProbe.run()` lists every `[[tool_servers]]` entry concurrently (starting
MCP processes, fetching OpenAPI specs) and waits at most `timeout` seconds:
the server never waits long for a slow one, and never fails for a broken one.
Each is reported once: `ok` with its tool count, `error` with why, or still
starting; one still starting is reported again when it answers (or fails).
Closing cancels the probes still running (server stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from toolrelay.engine.toolbox import SourceStatus, Toolbox
from toolrelay.server.logs import fields

__all__ = ["ToolProbe", "log_status"]

log = logging.getLogger("toolrelay.server")

STARTING = "starting"


class ToolProbe:
    """Starts a toolbox's sources once, at start-up (module doc)."""

    def __init__(self, toolbox: Toolbox, timeout: float) -> None:
        self.toolbox = toolbox
        self.timeout = timeout
        self._tasks: list[asyncio.Task[SourceStatus]] = []
        self._waited = False

    async def run(self) -> list[SourceStatus]:
        """Each source's status after at most `timeout` s (`starting` for those not done)."""
        sources = self.toolbox.sources
        if not sources or self.timeout <= 0:
            return self.toolbox.status()
        self._tasks = [
            asyncio.create_task(self._check(i), name=f"tool-probe:{s.name}")
            for i, s in enumerate(sources)
        ]
        await asyncio.wait(self._tasks, timeout=self.timeout)
        self._waited = True
        return [
            t.result() if t.done() else SourceStatus(s.name, STARTING)
            for t, s in zip(self._tasks, sources, strict=True)
        ]

    async def _check(self, index: int) -> SourceStatus:
        try:
            status = await self.toolbox.check(self.toolbox.sources[index])
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # check() does not raise; a bug here must not stop serving
            status = SourceStatus(self.toolbox.sources[index].name, "error", repr(exc))
        if self._waited:  # start-up has said "starting": now say how it ended
            log_status(status, late=True)
        return status

    async def aclose(self) -> None:
        """Cancel the probes still running (their sources close with the registry)."""
        pending = [t for t in self._tasks if not t.done()]
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def log_status(status: SourceStatus, *, late: bool = False, waited: float = 0.0) -> None:
    """One line per tool server: its state, tool count or error."""
    name, extra = status.name, fields(state=status.state, tools=status.tools, error=status.error)
    when = " (after start-up)" if late else ""
    if status.state == "ok":
        count = "" if status.tools is None else f", {status.tools} tools"
        log.info("tool server %s: ok%s%s", name, count, when, extra=extra)
    elif status.state == "error":
        log.warning("tool server %s: cannot start%s: %s", name, when, status.error, extra=extra)
    elif status.state == STARTING:
        log.info(
            "tool server %s: still starting after %g s (logged again when it answers)",
            name,
            waited,
            extra=extra,
        )
    else:
        log.info("tool server %s: starts on first use", name, extra=extra)
