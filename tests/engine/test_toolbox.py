"""`Toolbox`: a failing source is logged once per failure, whatever the toolbox (one per turn)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from toolrelay.engine.interfaces import Tool, ToolContext
from toolrelay.engine.toolbox import Toolbox, ToolSubset
from toolrelay.errors import ToolError

pytestmark = pytest.mark.anyio


class Flaky:
    """A source that fails as an MCP server in backoff does: the wait changes each time."""

    name = "flaky"

    def __init__(self) -> None:
        self.failures = 0
        self.up = False

    async def list(self) -> Sequence[Tool]:
        if self.up:
            return []
        self.failures += 1
        raise ToolError(
            f"unavailable (refused); next restart in {self.failures}.5 s", reason="refused"
        )

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        raise AssertionError("not called")

    async def aclose(self) -> None:
        return None


async def test_one_failure_is_logged_once_across_toolboxes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolrelay.tools")
    source = Flaky()
    shared = Toolbox(sources=[ToolSubset(source)])
    status = await shared.check(shared.sources[0])
    assert (status.state, status.error) == ("error", "unavailable (refused); next restart in 1.5 s")
    for _ in range(3):  # turns, each with its own toolbox over the same source
        await Toolbox(sources=[ToolSubset(source)]).tools()
    assert source.failures == 4
    assert [r.getMessage() for r in caplog.records] == []  # check() left the report to its caller
    source.up = True
    await Toolbox(sources=[ToolSubset(source)]).tools()
    assert shared.status()[0].state == "ok"  # a turn's success is seen by the shared toolbox
    assert [r.getMessage() for r in caplog.records] == ["tool source 'flaky' is available again"]


class Listing:
    """A source that lists fixed tools."""

    def __init__(self, name: str, tools: Sequence[Tool]) -> None:
        self.name = name
        self.tools = tools

    async def list(self) -> Sequence[Tool]:
        return self.tools

    async def call(self, name: str, arguments: dict[str, Any], context: ToolContext) -> Any:
        raise AssertionError("not called")

    async def aclose(self) -> None:
        return None


async def test_a_source_hidden_whole_is_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    """The same tool file loaded twice: its second copy hides behind the first, one line."""
    from toolrelay.adapters.tools import tool

    def make(name: str) -> Tool:
        def f() -> str:
            return name

        f.__doc__ = f"The {name} tool."
        return tool(f, name=name)

    caplog.set_level(logging.WARNING, logger="toolrelay.tools")
    three = [make("a"), make("b"), make("c")]
    box = Toolbox(three, [Listing("tools", [make("a"), make("b"), make("c")])])
    assert set(await box.tools()) == {"a", "b", "c"}
    await Toolbox(three, box.sources).tools()  # another turn's toolbox
    assert [r.getMessage() for r in caplog.records] == [
        "tools 'a', 'b', 'c' of source 'tools' are hidden by another tool of that name "
        "(give the source a prefix)"
    ]
