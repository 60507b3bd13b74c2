"""`toolrelay.Relay`: the engine's `Relay` that also takes plain functions and tool-file paths.

`Relay(model, [get_weather, "owui_tools.py", MCPServer.stdio(...)])` — the engine
itself only sees `Tool`s and `ToolSource`s; the conversion lives here, with the
adapters it needs, so the engine's layering holds.
"""

from __future__ import annotations

from toolrelay.adapters.tools.sources import as_tool_or_source
from toolrelay.engine.relay import Relay as EngineRelay

__all__ = ["Relay"]


class Relay(EngineRelay):
    """A model, its tools and the rules of the loop. `tools` may hold `Tool`s,
    `ToolSource`s, plain functions (made tools with `@tool`) and tool-file paths."""

    def coerce(self, item: object) -> object:
        return as_tool_or_source(item)
