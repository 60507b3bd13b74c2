"""The tools of a turn: fixed tools plus whatever the tool sources list now.

Owns merging the two into one name → tool map before each turn, listing the
sources concurrently, and keeping one source's failure from costing the
others: a source that cannot start is logged once per failure streak (not on
every turn) and its status says why, for `GET /api/tools` and `tools list`.

It does not know what a source is (MCP, OpenAPI, a tool file): it sees the
`ToolSource` interface only, plus one optional attribute: a source with
`fallback = True` (the built-in tools) is merged after every other one whatever
its place in the list, and a name taken elsewhere hides its tool quietly (no
warning, not listed): a user's own `get_time` replaces the built-in one.

Tools are checked once, when a toolbox is built (`checked_toolbox`), not per turn: a
server builds a `CheckedTools` per route once and every turn's `Relay` reuses its
toolbox. Per turn, `offer()` answers from a cache (the merged map and the model's
tool specs) while the fixed tools and the sources' listings are the same objects.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolrelay.engine.interfaces import Tool, ToolContext, ToolSource, tools_by_name

__all__ = [
    "CheckedTools",
    "SourceStatus",
    "ToolInfo",
    "ToolOffer",
    "ToolSubset",
    "Toolbox",
    "checked_toolbox",
    "is_fallback",
]

log = logging.getLogger("toolrelay.tools")

_REPORTED: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""The failure (its reason) reported per source, across toolboxes (a server builds one per
turn): the same failure met again is not logged again; a success clears it."""
_FAILING: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""Sources whose latest listing failed, by any toolbox, with the message: `status()`."""
_HIDDEN: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
"""The tool names reported hidden per source, across toolboxes (a turn's included)."""


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """How a source is doing: `ok` (with its tool count), `error` (with why) or `not started`."""

    name: str
    state: str
    error: str | None = None
    tools: int | None = None


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool as a listing shows it: its name, where it comes from, its state."""

    name: str
    description: str
    source: str
    status: str


@dataclass(frozen=True, slots=True)
class ToolOffer:
    """What one turn offers the model: tools by name and their specs, in the same order.

    Shared between turns: read it, never change it (copy to add a turn's own tools)."""

    tools: Mapping[str, Tool]
    specs: Sequence[dict[str, Any]]


class Toolbox:
    """Fixed tools and tool sources; `offer()` / `tools()` is what a turn offers the model."""

    def __init__(self, tools: Iterable[Tool] = (), sources: Iterable[ToolSource] = ()) -> None:
        self.fixed: dict[str, Tool] = {t.spec.name: t for t in tools}
        self.sources: list[ToolSource] = list(sources)
        self._errors: dict[str, str] = {}
        self._listed: dict[str, Sequence[Tool]] = {}
        self._offer: ToolOffer | None = None
        self._offered_from: tuple[int, ...] = ()
        """Ids of the listings the cached offer was merged from (sources answer from caches)."""

    async def tools(self) -> Mapping[str, Tool]:
        """Every tool that can be offered now; fixed tools win a name clash."""
        return (await self.offer()).tools

    async def offer(self) -> ToolOffer:
        """The tools and specs of a turn: merged anew only when a listing changed."""
        listed: Sequence[Sequence[Tool]] = ()
        if self.sources:
            listed = await asyncio.gather(*(self._list(s) for s in self.sources))
        key = tuple(id(found) for found in listed)
        if self._offer is None or key != self._offered_from:
            merged = self._merge(listed)
            self._offer = ToolOffer(merged, [t.spec.openai_spec() for t in merged.values()])
            self._offered_from = key
        return self._offer

    def _merge(self, listed: Sequence[Sequence[Tool]]) -> dict[str, Tool]:
        merged = dict(self.fixed)
        pairs = sorted(zip(self.sources, listed, strict=True), key=lambda p: is_fallback(p[0]))
        for source, found in pairs:  # fallbacks last (a stable sort keeps the others' order)
            hidden = []
            for item in found:
                name = item.spec.name
                if name in merged:
                    hidden.append(name)
                    continue
                merged[name] = item
            if hidden and not is_fallback(source):
                self._clash(source, hidden)
        return merged

    async def _list(self, source: ToolSource, *, quiet: bool = False) -> Sequence[Tool]:
        """The source's tools, or none when it fails; `quiet`: the caller reports the
        failure (start-up), which then counts as logged."""
        key = getattr(source, "source", source)
        try:
            found = await source.list()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one broken source must not cost the other tools
            message = f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
            reason = getattr(exc, "reason", None) or message
            if _REPORTED.get(key) != reason:
                if not quiet:
                    log.warning("tool source %r is unavailable: %s", source.name, message)
                _REPORTED[key] = reason
            _FAILING[key] = self._errors[source.name] = message
            self._listed.pop(source.name, None)
            return ()
        self._errors.pop(source.name, None)
        _FAILING.pop(key, None)
        if _REPORTED.pop(key, None) is not None and not quiet:
            log.info("tool source %r is available again", source.name)
        self._listed[source.name] = found
        return found

    async def check(self, source: ToolSource) -> SourceStatus:
        """List (start) one of this toolbox's sources and say how it is, logging nothing:
        the caller reports it (`server.tool_probe`)."""
        found = await self._list(source, quiet=True)
        fallback = SourceStatus(source.name, "ok", tools=len(found))  # not in status()
        return next((s for s in self.status() if s.name == source.name), fallback)

    def _clash(self, source: ToolSource, names: list[str]) -> None:
        """One line per source for the names not reported yet, by any toolbox (a file
        loaded twice hides every tool of its second copy: one line, not one per tool)."""
        seen = _HIDDEN.setdefault(getattr(source, "source", source), set())
        new = [name for name in names if name not in seen]
        if not new:
            return
        seen.update(new)
        log.warning(
            "%s %s of source %r %s hidden by another tool of that name (give the source a prefix)",
            "tool" if len(new) == 1 else "tools",
            ", ".join(repr(name) for name in new),
            source.name,
            "is" if len(new) == 1 else "are",
        )

    def status(self) -> list[SourceStatus]:
        """Each source's state as of its last listing, by this toolbox or any other
        sharing it (a turn's): a server that failed since start-up says so. Fallback
        sources (the built-in tools, in-process) are not servers: not listed."""
        out = []
        for source in self.sources:
            if is_fallback(source):  # in-process tools (the built-in ones): not a server
                continue
            failing = _FAILING.get(getattr(source, "source", source))
            if failing is not None:
                out.append(SourceStatus(source.name, "error", failing))
            elif source.name in self._listed:
                count = len(self._listed[source.name])
                out.append(SourceStatus(source.name, "ok", tools=count))
            elif source.name in self._errors:  # it failed here, then worked for a turn
                out.append(SourceStatus(source.name, "ok"))
            else:
                out.append(SourceStatus(source.name, "not started"))
        return out

    async def describe(self) -> list[ToolInfo]:
        """Every tool with its source and status; lists (starts) the sources first. A
        fallback source's tools that another tool replaces are left out."""
        offered = await self.tools()
        infos = [
            ToolInfo(t.spec.name, t.spec.description, "python", "ok") for t in self.fixed.values()
        ]
        for source in self.sources:
            error = self._errors.get(source.name)
            if error is not None:
                infos.append(ToolInfo("", "", source.name, f"error: {error}"))
                continue
            for item in self._listed.get(source.name, ()):
                if is_fallback(source) and offered.get(item.spec.name) is not item:
                    continue
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
        self.fallback = is_fallback(source)
        self.names = None if names is None else frozenset(names)
        self._picked: tuple[Sequence[Tool], Sequence[Tool]] | None = None
        """(the source's listing, the subset of it): the same listing gives the same list."""

    async def list(self) -> Sequence[Tool]:
        found = await self.source.list()
        if self.names is None:
            return found
        if self._picked is None or self._picked[0] is not found:
            self._picked = (found, [t for t in found if t.spec.name in self.names])
        return self._picked[1]

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        return await self.source.call(name, arguments, context)

    async def aclose(self) -> None:
        return None


def is_fallback(source: object) -> bool:
    """A source whose tools give way to any other of the same name (module doc)."""
    return getattr(source, "fallback", False) is True


def _as_given(item: object) -> object:
    return item


class CheckedTools(tuple[Tool | ToolSource, ...]):
    """Tools and sources checked once, with the toolbox a turn's `Relay` reuses as is.

    A tuple, so what was checked cannot change afterwards; `Relay(model, checked)`
    skips the per-item checks and takes `checked.toolbox`.
    """

    toolbox: Toolbox

    def __new__(
        cls, items: Iterable[object] = (), coerce: Callable[[object], object] = _as_given
    ) -> CheckedTools:
        toolbox = checked_toolbox(items, coerce)
        made = super().__new__(cls, [*toolbox.fixed.values(), *toolbox.sources])
        made.toolbox = toolbox
        return made


def checked_toolbox(
    items: Iterable[object], coerce: Callable[[object], object] = _as_given
) -> Toolbox:
    """A toolbox of `items` (each made a `Tool` or `ToolSource` by `coerce`), every item
    checked: a `TypeError` names what is not a tool, a `ConfigError` a name given twice."""
    fixed: list[Tool] = []
    sources: list[ToolSource] = []
    for given in items:
        item = coerce(given)
        if not isinstance(item, type) and isinstance(item, ToolSource):
            sources.append(item)
        else:
            fixed.append(_checked_tool(item))
    return Toolbox(tools_by_name([("tools", fixed)]).values(), sources)


def _checked_tool(obj: object) -> Tool:
    if isinstance(obj, str):
        raise TypeError(f"not a tool: {obj!r} (load a tool file with ToolFile({obj!r}))")
    if isinstance(obj, type) or not isinstance(obj, Tool):
        raise TypeError(f"not a tool: {obj!r} (make a function a tool with @tool)")
    return obj
