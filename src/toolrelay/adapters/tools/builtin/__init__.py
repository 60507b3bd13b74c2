"""Built-in tools: what the server offers before any tool is configured.

Owns the set (`get_time`, `calculator`) and `BuiltinTools`, the `ToolSource` that
hands it out. They are small, safe and local: no network, no file, no process,
bounded work per call, idempotent (a call cut by a dead server is run again). The
default configuration offers them (`builtin_tools`, `config.registry`), so the tool
loop shows on a fresh install; they give way to any other tool of the same name
(`fallback`: merged last, quietly, by `engine.toolbox`).

Adding one: a `@tool` function in a module of this package, listed in `BUILTIN`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from toolrelay.adapters.tools.builtin.calculator import calculator
from toolrelay.adapters.tools.builtin.clock import get_time
from toolrelay.adapters.tools.python import PythonTool
from toolrelay.engine.interfaces import Tool, ToolContext
from toolrelay.errors import ConfigError

__all__ = ["BUILTIN", "BUILTIN_SOURCE", "BuiltinTools"]

BUILTIN: dict[str, PythonTool] = {t.spec.name: t for t in (get_time, calculator)}
"""Every built-in tool by name."""

BUILTIN_SOURCE = "builtin"
"""The source name listings show, and that a route's `tools` may name for all of them."""


class BuiltinTools:
    """Some (default: all) of the built-in tools, as a tool source.

    `fallback = True`: a toolbox merges it after every other tool and source, and a
    tool of the same name elsewhere replaces the built-in one without a warning.
    """

    fallback = True

    def __init__(self, names: Collection[str] | None = None) -> None:
        chosen = list(BUILTIN) if names is None else list(names)
        unknown = [n for n in chosen if n not in BUILTIN]
        if unknown:
            known = ", ".join(BUILTIN)
            raise ConfigError(f"builtin_tools: unknown tool {unknown[0]!r} (built-in: {known})")
        self.name = BUILTIN_SOURCE
        self.tools: list[Tool] = [BUILTIN[n] for n in dict.fromkeys(chosen)]

    async def list(self) -> Sequence[Tool]:
        return self.tools

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        return await BUILTIN[name].call(arguments, context)

    async def aclose(self) -> None:
        return None
