"""Tools are checked once, when a route's tools are built, and offered from a cache per turn.

A `CountingTool` counts every read of its `spec`: a runtime-checkable Protocol check
(`isinstance(x, Tool)`) reads it, and so does making its spec for the model. Turns of a
`Relay` built from a `CheckedTools` read none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from toolrelay.engine.interfaces import Tool, ToolContext, ToolSpec
from toolrelay.engine.relay import Relay
from toolrelay.engine.toolbox import CheckedTools, ToolSubset
from toolrelay.testing.scripted_model import ScriptedModel, reply

pytestmark = pytest.mark.anyio


class CountingTool:
    def __init__(self, name: str) -> None:
        self._spec = ToolSpec(name, f"tool {name}")
        self.reads = 0

    @property
    def spec(self) -> ToolSpec:
        self.reads += 1
        return self._spec

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        return "ok"


class Listing:
    """A source that answers from its cache: the same list until `tools` is replaced."""

    name = "listing"

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = list(tools)

    async def list(self) -> Sequence[Tool]:
        return self.tools

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        return "listed"

    async def aclose(self) -> None:
        return None


def _answers(count: int) -> ScriptedModel:
    return ScriptedModel(*(reply("fine") for _ in range(count)))


async def test_turns_of_a_checked_tool_list_read_no_tool_again() -> None:
    tools = [CountingTool(f"t{i}") for i in range(50)]
    checked = CheckedTools(tools)
    assert all(t.reads > 0 for t in tools)  # checked here, once
    model = _answers(6)
    await Relay(model, checked).run("first")  # the first turn makes the specs
    before = [t.reads for t in tools]
    for _ in range(5):  # what a server does per turn: a new Relay over the same list
        result = await Relay(model, checked).run("again")
        assert result.text == "fine"
    assert [t.reads for t in tools] == before
    assert [s["function"]["name"] for s in model.requests[-1].tools] == [t.spec.name for t in tools]


async def test_a_plain_list_is_still_checked_and_refused_early() -> None:
    with pytest.raises(TypeError, match="not a tool"):
        Relay(_answers(1), [CountingTool("a"), object()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a tool"):
        CheckedTools([object()])


async def test_a_source_listing_anew_is_offered_anew_and_an_unchanged_one_from_cache() -> None:
    source = Listing([CountingTool("a")])
    checked = CheckedTools([source])
    first = await checked.toolbox.offer()
    assert await checked.toolbox.offer() is first
    source.tools = [CountingTool("a"), CountingTool("b")]  # the server's tools changed
    model = _answers(1)
    await Relay(model, checked).run("go")
    assert [s["function"]["name"] for s in model.requests[0].tools] == ["a", "b"]


async def test_a_subset_of_an_unchanged_listing_is_the_same_list() -> None:
    source = Listing([CountingTool("a"), CountingTool("b")])
    subset = ToolSubset(source, ["b"])
    picked = await subset.list()
    assert [t.spec.name for t in picked] == ["b"]
    assert await subset.list() is picked
    source.tools = [CountingTool("b"), CountingTool("c")]
    assert await subset.list() is not picked


async def test_a_turns_own_tools_join_its_offer_without_changing_the_shared_one() -> None:
    checked = CheckedTools([CountingTool("shared")])
    model = _answers(3)
    relay = Relay(model, checked)
    await relay.run("with a client tool", extra_tools=[CountingTool("client")])
    await relay.run("without", extra_tools=[])
    await relay.run("replacing", extra_tools=[CountingTool("shared")])
    offered = [[s["function"]["name"] for s in r.tools] for r in model.requests]
    assert offered == [["shared", "client"], ["shared"], ["shared"]]
    assert list((await checked.toolbox.offer()).tools) == ["shared"]
