"""The tools of a turn: fixed tools plus whatever the tool sources list now.

Owns merging the two into one name → tool map before each turn, listing the
sources concurrently, and keeping one source's failure from costing the
others: a source that cannot start is logged once per failure streak (not on
every turn) and its status says why, for `GET /api/tools` and `tools list`.

It does not know what a source is (MCP, OpenAPI, a tool file): it sees the
`ToolSource` interface only.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolrelay.engine.interfaces import Tool, ToolContext, ToolSource

__all__ = ["SourceStatus", "ToolInfo", "ToolSubset", "Toolbox"]

log = logging.getLogger("toolrelay.tools")

_REPORTED: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""The last failure logged per source, across toolboxes (a server builds one per turn)."""


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """How a source is doing: `ok`, `error` (with why) or `not started`."""

    name: str
    state: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool as a listing shows it: its name, where it comes from, its state."""

    name: str
    description: str
    source: str
    status: str


class Toolbox:
    """Fixed tools and tool sources; `tools()` is what a turn offers the model."""

    def __init__(self, tools: Iterable[Tool] = (), sources: Iterable[ToolSource] = ()) -> None:
        self.fixed: dict[str, Tool] = {t.spec.name: t for t in tools}
        self.sources: list[ToolSource] = list(sources)
        self._errors: dict[str, str] = {}
        self._listed: dict[str, Sequence[Tool]] = {}
        self._clashes: set[tuple[str, str]] = set()

    async def tools(self) -> dict[str, Tool]:
        """Every tool that can be offered now; fixed tools win a name clash."""
        if not self.sources:
            return self.fixed
        listed = await asyncio.gather(*(self._list(s) for s in self.sources))
        merged = dict(self.fixed)
        for source, found in zip(self.sources, listed, strict=True):
            for item in found:
                name = item.spec.name
                if name in merged:
                    self._clash(source.name, name)
                    continue
                merged[name] = item
        return merged

    async def _list(self, source: ToolSource) -> Sequence[Tool]:
        try:
            found = await source.list()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one broken source must not cost the other tools
            message = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
            key = getattr(source, "source", source)
            if _REPORTED.get(key) != message:
                log.warning("tool source %r is unavailable: %s", source.name, message)
                _REPORTED[key] = message
            self._errors[source.name] = message
            self._listed.pop(source.name, None)
            return ()
        self._errors.pop(source.name, None)
        if _REPORTED.pop(getattr(source, "source", source), None) is not None:
            log.info("tool source %r is available again", source.name)
        self._listed[source.name] = found
        return found

    def _clash(self, source: str, name: str) -> None:
        if (source, name) not in self._clashes:
            self._clashes.add((source, name))
            log.warning(
                "tool %r of source %r is hidden by another tool of that name (give the source a prefix)",
                name,
                source,
            )

    def status(self) -> list[SourceStatus]:
        """Each source's state as of its last listing."""
        out = []
        for source in self.sources:
            if source.name in self._errors:
                out.append(SourceStatus(source.name, "error", self._errors[source.name]))
            elif source.name in self._listed:
                out.append(SourceStatus(source.name, "ok"))
            else:
                out.append(SourceStatus(source.name, "not started"))
        return out

    async def describe(self) -> list[ToolInfo]:
        """Every tool with its source and status; lists (starts) the sources first."""
        await self.tools()
        infos = [
            ToolInfo(t.spec.name, t.spec.description, "python", "ok") for t in self.fixed.values()
        ]
        for source in self.sources:
            error = self._errors.get(source.name)
            if error is not None:
                infos.append(ToolInfo("", "", source.name, f"error: {error}"))
                continue
            for item in self._listed.get(source.name, ()):
                hidden = item.spec.name in self.fixed
                status = "hidden by a tool of the same name" if hidden else "ok"
                infos.append(ToolInfo(item.spec.name, item.spec.description, source.name, status))
        return infos

    async def aclose(self) -> None:
        """Close every source (stops MCP processes, closes HTTP pools); errors are logged."""
        for source in self.sources:
            try:
                await source.aclose()
            except Exception as exc:
                log.warning("closing tool source %r failed: %s", source.name, exc)


class ToolSubset:
    """A shared source as one user sees it: some of its tools (None: all); closing it
    leaves the source open for the others."""

    def __init__(self, source: ToolSource, names: Collection[str] | None = None) -> None:
        self.source = source
        self.name = source.name
        self.names = None if names is None else frozenset(names)

    async def list(self) -> Sequence[Tool]:
        found = await self.source.list()
        return found if self.names is None else [t for t in found if t.spec.name in self.names]

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        return await self.source.call(name, arguments, context)

    async def aclose(self) -> None:
        return None
