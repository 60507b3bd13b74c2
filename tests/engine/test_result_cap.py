"""Long tool results: the model reads them cut, the user gets them whole, stored once.

Every kind of result goes through the same cap: a server-side tool's, a client-side
tool's (answered through `submit_tool_result`) and an MCP result's embedded resource.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from toolrelay import Relay, RunLimits, tool
from toolrelay.adapters.stores.memory import MemoryStore
from toolrelay.core import events as ev
from toolrelay.core.items import is_call_output
from toolrelay.engine.interfaces import ToolContext, ToolSpec
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio

CAP = 1000
BIG = "".join(f"line {i}\n" for i in range(5000))  # 48,890 bytes
LAST_LINE = b"line 4999"


def _sent_outputs(model: ScriptedModel) -> list[Any]:
    """The tool results the model was sent, in its second request."""
    return [i["output"] for i in model.requests[1].output if is_call_output(i)]


async def test_a_long_result_is_cut_for_the_model_and_kept_whole_once() -> None:
    @tool
    def dump() -> str:
        """A long log."""
        return BIG

    store = MemoryStore()
    user = await store.create_user("u")
    chat = await store.create_chat(user.id)
    model = ScriptedModel(reply(calls=[("dump", {})]), reply("Done."), reply("Again."))
    relay = Relay(model, [dump], store=store, limits=RunLimits(tool_result_max_bytes=CAP))
    sink = ListSink()
    result = await relay.run("go", sink=sink, chat_id=chat.id, message_id="msg_1")

    [sent] = _sent_outputs(model)
    assert sent.startswith(BIG[:CAP]) and len(sent.encode()) < CAP + 200
    assert f"this tool result is {len(BIG):,} bytes; you see its first {CAP:,}" in sent
    done = [e.data["item"] for e in sink.of(ev.OUTPUT_ITEM_DONE)]
    [shown] = [i for i in done if i["type"] == "function_call_output"]
    assert shown["cut"] == {"bytes": len(BIG), "sent": CAP} and shown["output"] == sent
    assert LAST_LINE not in orjson.dumps([e.data for e in sink.events])  # never pushed whole
    assert result.whole_outputs == {shown["id"]: BIG}
    assert await store.get_tool_output(chat.id, shown["id"]) == BIG
    assert await store.get_tool_output("another chat", shown["id"]) is None
    history = await store.load_messages(chat.id)
    assert [m["content"] for m in history if m["role"] == "tool"] == [sent]  # read cut later
    await relay.run([*history, {"role": "user", "content": "more?"}])
    assert LAST_LINE not in orjson.dumps(model.requests[2].messages)


async def test_client_tool_results_and_mcp_resources_are_cut_alike() -> None:
    class Browser:
        spec = ToolSpec(name="page", kind="client")

        async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
            raise AssertionError("client tools run in the client")

    class Resources:
        spec = ToolSpec(name="read", kind="mcp")

        async def call(self, arguments: dict[str, Any], context: ToolContext) -> Any:
            return [{"type": "resource", "resource": {"uri": "file:///log", "text": BIG}}]

    model = ScriptedModel(reply(calls=[("page", {}), ("read", {})]), reply("Both read."))
    relay = Relay(model, [Browser(), Resources()], limits=RunLimits(tool_result_max_bytes=CAP))
    sink = ListSink()

    async def answer() -> None:
        data = (await sink.wait_for(ev.EXECUTE_TOOL)).data
        assert relay.submit_tool_result(data["id"], BIG)

    helper = asyncio.create_task(answer())
    result = await relay.run("go", sink=sink)
    await helper
    sent = _sent_outputs(model)
    assert [len(s.encode()) < CAP + 200 for s in sent] == [True, True]
    assert list(result.whole_outputs.values()) == [BIG, BIG]
