"""Tools declared by a request: the client runs them, never the server (R9)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolrelay.engine.interfaces import ToolContext, ToolSpec


class ClientTool:
    """A tool whose calls go to the client (`execute:tool`) or end the response."""

    def __init__(self, name: str, description: str, parameters: Mapping[str, Any]) -> None:
        self._spec = ToolSpec(
            name=name, description=description, parameters=dict(parameters), kind="client"
        )

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        raise RuntimeError(f"`{self._spec.name}` runs on the client")


def client_tools(specs: Sequence[Any] | None) -> list[ClientTool]:
    tools = []
    for spec in specs or ():
        fn = getattr(spec, "function", spec)
        tools.append(ClientTool(fn.name, fn.description or "", fn.parameters))
    return tools


def turn_args(user: Mapping[str, Any], specs: Sequence[Any] | None) -> dict[str, Any]:
    """`TurnRequest` fields for an OpenAI-style request: its user (as
    `Services.turn_user` describes them) and its own tools, whose calls end the
    response (they are the client's to run)."""
    tools = client_tools(specs)
    return {
        "user": dict(user),
        "extra_tools": tools,
        "deferred": [t.spec.name for t in tools],
    }
