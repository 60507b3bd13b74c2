"""Where Python tools come from: a `.py` file, an importable module, or a list.

Owns collecting what a tool file or module (imported by `adapters.user_code`)
exposes: its `PythonTool` objects plus an Open WebUI-style `class Tools:`
whose public methods become tools. Names are checked by
`engine.interfaces.tools_by_name`.

Valves, user valves and the rest of Open WebUI's tool-file frontmatter are
not handled here: `self.valves` stays whatever the class sets it to.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from toolrelay.adapters.tools.python import PythonTool, tool
from toolrelay.adapters.user_code import import_user_file, import_user_module, load_error
from toolrelay.engine.interfaces import Tool, ToolContext, tools_by_name

__all__ = ["ToolFile", "as_tools", "load_tools_from_file", "load_tools_from_module"]

_MODULE_PREFIX = "toolrelay_user_tools"


def load_tools_from_file(path: str | Path) -> list[PythonTool]:
    """Import a tool file by path and collect its tools.

    Raises `ConfigError` naming the path when the file is missing, fails to
    import, or defines two tools with the same name.
    """
    file = str(Path(path))
    label = f"tool file {file!r}"
    module = import_user_file(file, label=label, prefix=_MODULE_PREFIX)
    return _tools_of(module, file, label)


def import_tool_file(path: str | Path) -> ModuleType:
    """Import a `.py` tool file under a module name of its own (`adapters.user_code`)."""
    file = str(Path(path))
    return import_user_file(file, label=f"tool file {file!r}", prefix=_MODULE_PREFIX)


class ToolFile:
    """A tool file as a tool source: `Relay(model, [ToolFile("owui_tools.py")])`.

    Loaded at once, so a broken file is a `ConfigError` at start-up, not in a turn.
    """

    def __init__(self, path: str | Path) -> None:
        self.name = str(path)
        self.tools: list[Tool] = list(load_tools_from_file(path))
        self._by_name = {t.spec.name: t for t in self.tools}

    async def list(self) -> list[Tool]:
        return self.tools

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        return await self._by_name[name].call(arguments, context)

    async def aclose(self) -> None:
        return None


def load_tools_from_module(name: str) -> list[PythonTool]:
    """Import a module by dotted name and collect its tools (like `load_tools_from_file`)."""
    label = f"tool module {name!r}"
    return _tools_of(import_user_module(name, label=label), name, label)


def _tools_of(module: ModuleType, source: str, label: str) -> list[PythonTool]:
    """The module's tools, names checked; a `class Tools` that fails to build is a load error."""
    try:
        tools = _collect(module)
    except (Exception, SystemExit) as exc:
        raise load_error(label, exc) from exc
    tools_by_name([(source, tools)])
    return tools


def as_tools(objs: Iterable[Any]) -> list[Tool]:
    """Accept tools, `Tool`-protocol objects or plain callables (wrapped with `tool`).

    Names must be unique across the list: the model calls tools by name.
    """
    return list(tools_by_name([("tools", [_as_tool(obj) for obj in objs])]).values())


def _as_tool(obj: Any) -> Tool:
    if isinstance(obj, PythonTool):
        return obj
    if not isinstance(obj, type) and isinstance(obj, Tool):
        protocol_tool: Tool = obj
        return protocol_tool
    if callable(obj):
        return tool(obj)
    raise TypeError(f"not a tool or a callable: {obj!r}")


def _collect(module: ModuleType) -> list[PythonTool]:
    """Module-level `PythonTool`s (only `__all__`'s when it is set), then `class Tools`."""
    names = getattr(module, "__all__", None)
    namespace = vars(module)
    members = [namespace[n] for n in names if n in namespace] if names else namespace.values()
    found: list[PythonTool] = []
    for value in members:
        if isinstance(value, PythonTool) and all(value is not t for t in found):
            found.append(value)
    owui = namespace.get("Tools")
    if isinstance(owui, type):
        found.extend(_methods_as_tools(owui))
    return found


def _methods_as_tools(cls: type) -> list[PythonTool]:
    """Public methods of an Open WebUI `Tools` class, bound to one instance."""
    instance = cls()
    found: list[PythonTool] = []
    for attr, raw in vars(cls).items():
        if attr.startswith("_"):
            continue
        if inspect.isfunction(raw) or isinstance(raw, (staticmethod, classmethod)):
            found.append(tool(getattr(instance, attr)))
    return found
