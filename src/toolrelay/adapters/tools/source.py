"""The tool objects a source hands out: a spec, and calls that go back to the source."""

from __future__ import annotations

from typing import Any

from toolrelay.engine.interfaces import ToolContext, ToolSpec

__all__ = ["SourceTool"]


class SourceTool:
    """One tool of a `ToolSource` (MCP, OpenAPI): `call` asks the source by name."""

    __slots__ = ("source", "spec")

    def __init__(self, spec: ToolSpec, source: Any) -> None:
        self.spec = spec
        self.source = source

    def __repr__(self) -> str:
        return f"<SourceTool {self.spec.name} of {self.source.name}>"

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return await self.source.call(self.spec.name, arguments, context)
