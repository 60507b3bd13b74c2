"""A tool server that never answers costs its own tools, nothing else (issue 24 item 4).

Real processes over stdio (`mcp_silent_server.py`): one never answers `initialize`,
one never answers `tools/list`. A turn goes on without their tools; a turn that
comes while a server is still starting does not wait for it; every request to it
ends at its timeout; closing ends at once whatever the server does.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.patience import HANG
from toolrelay import Relay, tool
from toolrelay.adapters.tools.mcp import MCPServer
from toolrelay.errors import ToolError
from toolrelay.testing.scripted_model import ScriptedModel, reply

pytestmark = pytest.mark.anyio

SILENT = Path(__file__).with_name("mcp_silent_server.py")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def silent(until: str, timeout: float) -> MCPServer:
    return MCPServer.stdio(
        sys.executable, [str(SILENT), until], name="silent", start_timeout=timeout
    )


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


@pytest.mark.parametrize("until", ["initialize", "tools/list"])
async def test_a_server_that_never_answers_is_skipped_at_its_timeout(until: str) -> None:
    server = silent(until, timeout=0.2)
    model = ScriptedModel(reply("Still here."), reply("And again."))
    async with asyncio.timeout(HANG):
        async with Relay(model, [ping, server]) as relay:
            first = await relay.run("hi")
            assert first.text == "Still here."
            # the silent server's tools are absent, the others offered
            assert [t["function"]["name"] for t in model.requests[0].tools] == ["ping"]
            second = await relay.run("again")
            assert second.text == "And again."
        with pytest.raises(ToolError, match="within 0.2 s"):
            await server.list()  # a request on its own: the timeout, said
        await server.aclose()


async def test_a_turn_does_not_wait_for_a_server_still_starting() -> None:
    server = silent("initialize", timeout=10 * HANG)  # starting for as long as the test runs
    starting = asyncio.ensure_future(server.list())
    model = ScriptedModel(reply("Without it."))
    try:
        async with asyncio.timeout(HANG):
            while not server.connection.starts:  # noqa: ASYNC110 - the start is under way
                await asyncio.sleep(0.01)
            async with Relay(model, [server]) as relay:
                result = await relay.run("hi")
                assert result.text == "Without it."
                assert not starting.done()
            # closing the relay closed the server: the start under way ended at once
            with pytest.raises(ToolError):
                await starting
    finally:
        starting.cancel()
