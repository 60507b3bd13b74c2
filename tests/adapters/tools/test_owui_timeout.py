"""`tool_timeout` holds for an Open WebUI tool's sync method (issue 24 item 6): the model
gets the timeout result at `tool_timeout` whatever the method's thread does, and other
turns go on meanwhile (a sync method used to run on the event loop itself)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.patience import HANG
from toolrelay import Relay
from toolrelay.adapters.tools.owui import OpenWebUITools
from toolrelay.core.items import is_call_output
from toolrelay.engine.limits import RunLimits
from toolrelay.testing.scripted_model import ScriptedModel, reply

pytestmark = pytest.mark.anyio

RELEASE = threading.Event()
"""Set by the test once the turn has ended: until then the sync tool blocks its thread."""

TOOL_FILE = '''
"""
title: Blocking
"""
from tests.adapters.tools.test_owui_timeout import RELEASE


class Tools:
    def wait_for_it(self) -> str:
        """Block until released."""
        RELEASE.wait({hang})
        return "released"
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_blocking_sync_method_times_out_at_tool_timeout(tmp_path: Path) -> None:
    path = tmp_path / "blocking_tool.py"
    path.write_text(TOOL_FILE.format(hang=2 * HANG))
    tools = OpenWebUITools(path)
    model = ScriptedModel(reply(calls=[("wait_for_it", {})]), reply("Too slow."))
    limits = RunLimits(tool_timeout=0.1)
    RELEASE.clear()
    try:
        async with asyncio.timeout(HANG), Relay(model, [tools], limits=limits) as relay:
            result = await relay.run("go")
        assert not RELEASE.is_set()  # the thread still blocks: the turn did not wait for it
        [output] = [i for i in result.output if is_call_output(i)]
        assert output["output"] == "Error: Tool `wait_for_it` timed out after 0.1 s."
        assert result.text == "Too slow."
    finally:
        RELEASE.set()
