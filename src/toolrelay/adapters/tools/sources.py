"""What a user may put in `Relay(model, tools=[…])`, turned into tools and tool sources.

The engine accepts only `Tool`s and `ToolSource`s (it imports no adapters);
this module is the public API's convenience on top: a plain function becomes a
`@tool`, a path a tool file (an Open WebUI `class Tools` file with its valves,
else a file of `@tool` functions). The server's `[[tool_servers]]` of kind
`python` load through `tool_file` too, so both front doors read a file alike.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolrelay.adapters.tools.loader import ToolFile
from toolrelay.adapters.tools.owui import OpenWebUITools
from toolrelay.adapters.tools.python import tool
from toolrelay.engine.interfaces import Tool, ToolSource

__all__ = ["as_tool_or_source", "tool_file"]

_OWUI_TOOLS = re.compile(r"^class Tools\b", re.M)


def tool_file(
    path: str | os.PathLike[str],
    *,
    valves: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> ToolSource:
    """The file's tools as a source: `OpenWebUITools` for a `class Tools` file, else `ToolFile`.

    Raises `OSError` when the file cannot be read and `ConfigError` when it does not load.
    """
    file = Path(path)
    owui = _OWUI_TOOLS.search(file.read_text(encoding="utf-8", errors="replace"))
    source = OpenWebUITools(file, valves=valves) if owui else ToolFile(file)
    if name is not None:
        source.name = name
    return source


def as_tool_or_source(obj: object) -> object:
    """A `Tool` or `ToolSource` as is; a path (`str` or `PathLike`) as a tool file;
    a plain function through `@tool`. Anything else is refused by the engine."""
    if isinstance(obj, type | Tool | ToolSource):
        return obj  # a class is not a tool: the engine says so
    if isinstance(obj, str | os.PathLike):
        return tool_file(obj)
    if callable(obj):
        return tool(obj)
    return obj  # the engine names what is wrong
