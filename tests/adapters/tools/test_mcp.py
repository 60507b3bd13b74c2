"""MCP servers as a tool source, against real servers over stdio, Streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.adapters.tools.conftest import (
    TEST_SERVER,
    HttpServer,
    descendants,
    node_server,
    session_members,
)
from toolrelay import Relay, RunLimits, tool
from toolrelay.adapters.tools.mcp import MCPServer
from toolrelay.adapters.tools.mcp_session import Backoff
from toolrelay.core import events as ev
from toolrelay.core.items import is_call_output, raw_items
from toolrelay.engine.interfaces import ToolContext
from toolrelay.errors import ToolError
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


def ours(**options: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [str(TEST_SERVER), "stdio"], name="ours", **options)


async def until(check: Any, what: str) -> None:
    """Wait for a condition the server makes true soon (bounded generously, never timed)."""
    for _ in range(2000):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


# ------------------------------------------------------------------ listing


async def test_list_keeps_schemas_and_applies_prefix_and_filters() -> None:
    server = ours(prefix="t.", allow=["add", "echo_*", "slow", "pid"], deny=["slow"])
    try:
        tools = await server.list()
        names = sorted(t.spec.name for t in tools)
        assert names == ["t_add", "t_echo_args", "t_pid"]  # `.` is not allowed in a tool name
        add = next(t for t in tools if t.spec.name == "t_add")
        # the input schema is the server's, untouched (titles included)
        assert add.spec.parameters["title"] == "addArguments"
        assert add.spec.parameters["required"] == ["a", "b"]
        assert add.spec.kind == "mcp" and add.spec.filter_arguments is False
        assert add.spec.description == "Add two integers."
        assert await add.call({"a": 2, "b": 5}, ToolContext()) == [{"type": "text", "text": "7"}]
        assert (await server.list())[0] is tools[0]  # cached: no tools/list per turn
    finally:
        await server.aclose()


async def test_list_changed_notification_refreshes_the_list() -> None:
    server = ours()
    try:
        before = {t.spec.name for t in await server.list()}
        assert "extra_1" not in before
        await server.call("grow", {}, ToolContext())

        async def refreshed() -> bool:
            return "extra_1" in {t.spec.name for t in await server.list()}

        await until(refreshed, "the new tool is listed")
    finally:
        await server.aclose()


# ------------------------------------------------------------------ through the loop


async def test_relay_runs_mcp_tools_with_undeclared_arguments_kept() -> None:
    model = ScriptedModel(
        reply(calls=[("echo_args", {"shown": "x", "undeclared": 1}), ("add", {"a": 1, "b": 2})]),
        reply("done"),
    )
    async with Relay(model, [ours()]) as relay:
        result = await relay.run("go")
    outputs = [i for i in result.output if is_call_output(i)]
    assert outputs[0]["output"] == "shown,undeclared"  # R8: MCP tools keep their arguments
    assert outputs[1]["output"] == "3"
    assert {"add", "echo_args"} <= {t["function"]["name"] for t in model.requests[0].tools}


async def test_is_error_image_and_structured_results_reach_the_model() -> None:
    model = ScriptedModel(
        reply(calls=[("fail", {"reason": "no"}), ("picture", {}), ("weather", {"city": "Oslo"})]),
        reply("ok"),
    )
    async with Relay(model, [ours()]) as relay:
        result = await relay.run("go")
    failed, picture, weather = [
        i for i in raw_items(result.output) if i["type"] == "function_call_output"
    ]
    assert failed["status"] == "failed"
    assert failed["output"].startswith("Error: ") and "fail" in failed["output"]
    assert picture["status"] == "completed"
    assert picture["output"][-1]["type"] == "input_image"
    assert picture["output"][-1]["image_url"].startswith("data:image/png;base64,iVBOR")
    assert orjson.loads(weather["output"]) == {"city": "Oslo", "temperature": 21}


async def test_progress_becomes_tool_progress_events_with_the_call_id() -> None:
    model = ScriptedModel(reply(calls=[("count_to", {"n": 3})]), reply("ok"))
    sink = ListSink()
    async with Relay(model, [ours()]) as relay:
        result = await relay.run("go", sink=sink)
    call_id = raw_items(result.output)[0]["call_id"]
    progress = [e.data for e in sink.events if e.type == ev.TOOL_PROGRESS]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert all(p["call_id"] == call_id and p["total"] == 3 for p in progress)
    assert progress[0]["message"] == "step 1"


async def test_a_timed_out_call_is_cancelled_on_the_server() -> None:
    model = ScriptedModel(reply(calls=[("slow", {"seconds": 600})]), reply("gave up"))
    server = ours(timeout=0.2)
    async with Relay(model, [server], limits=RunLimits(tool_timeout=0.2)) as relay:
        result = await relay.run("go")
        assert raw_items(result.output)[1]["output"] == "Error: Tool `slow` timed out after 0.2 s."

        async def counted() -> bool:
            answer = await server.call("cancelled_calls", {}, ToolContext())
            return bool(answer == [{"type": "text", "text": "1"}])

        await until(counted, "the server saw the cancellation")


async def test_cancelling_the_turn_cancels_the_call_on_the_server() -> None:
    model = ScriptedModel(reply(calls=[("slow", {"seconds": 600})]), reply("never"))
    server = ours()
    async with Relay(model, [server]) as relay:
        sink = ListSink()
        turn = asyncio.create_task(relay.run("go", sink=sink))

        async def calling() -> bool:
            return any(e.type == ev.OUTPUT_ITEM_DONE for e in sink.events)

        await until(calling, "the call started")
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn

        async def counted() -> bool:
            answer = await server.call("cancelled_calls", {}, ToolContext())
            return bool(answer == [{"type": "text", "text": "1"}])

        await until(counted, "the server saw the cancellation")


# ------------------------------------------------------------------ lifecycle


async def test_one_session_shared_across_turns_and_restarted_after_the_process_dies() -> None:
    server = ours()
    model = ScriptedModel(*[m for _ in range(3) for m in (reply(calls=[("pid", {})]), reply("ok"))])
    async with Relay(model, [server]) as relay:
        first = raw_items((await relay.run("1")).output)[1]["output"]
        second = raw_items((await relay.run("2")).output)[1]["output"]
        assert first == second and server.connection.starts == 1  # lazy, once, shared
        os.kill(int(first), signal.SIGKILL)

        async def noticed() -> bool:
            return not server.connection.alive

        await until(noticed, "the session noticed the process died")
        third = raw_items((await relay.run("3")).output)[1]["output"]
        assert third.isdigit() and third != first
        assert server.connection.starts == 2


async def test_a_server_that_cannot_start_is_reported_once_and_other_tools_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    broken = MCPServer.stdio("/nonexistent/mcp-server", name="broken", backoff=Backoff(0, 0))
    model = ScriptedModel(reply(calls=[("ping", {})]), reply("a"), reply(calls=[("ping", {})]))
    model.add(reply("b"))
    caplog.set_level(logging.WARNING, "toolrelay.tools")
    async with Relay(model, [ping, broken]) as relay:
        assert raw_items((await relay.run("1")).output)[1]["output"] == "pong"
        assert raw_items((await relay.run("2")).output)[1]["output"] == "pong"
        status = relay.toolbox.status()
    warnings = [r for r in caplog.records if "broken" in r.getMessage()]
    assert len(warnings) == 1
    assert status[0].state == "error" and "failed to start" in (status[0].error or "")
    assert [t["function"]["name"] for t in model.requests[0].tools] == ["ping"]


async def test_restarts_back_off_until_the_window_passes() -> None:
    opened = 0
    now = [100.0]

    def transport() -> Any:
        nonlocal opened
        opened += 1
        raise OSError("no such server")

    server = MCPServer("flaky", transport, backoff=Backoff(2.0, 8.0), clock=lambda: now[0])
    for expected_opens in (1, 2):  # the first retry is immediate
        with pytest.raises(ToolError, match="failed to start"):
            await server.list()
        assert opened == expected_opens
    with pytest.raises(ToolError, match=r"next restart in 2\.0 s"):
        await server.list()
    assert opened == 2  # no spawn inside the window
    now[0] += 2.0
    with pytest.raises(ToolError, match="failed to start"):
        await server.list()
    assert opened == 3
    with pytest.raises(ToolError, match=r"next restart in 4\.0 s"):
        await server.list()
    await server.aclose()


async def test_closing_leaves_no_child_processes() -> None:
    before = descendants()
    node_dir = Path(node_server("mcp-server-everything")).parents[2]
    everything = MCPServer.stdio(
        "npx", ["--no-install", "mcp-server-everything", "stdio"], cwd=node_dir
    )
    python = ours()
    tools = [*await everything.list(), *await python.list()]
    assert len(tools) > 10
    pid = int((await python.call("pid", {}, ToolContext()))[0]["text"])
    started = descendants() - before
    assert pid in started and len(started) >= 3  # npx runs node under it: a process tree
    await everything.aclose()
    await python.aclose()
    assert descendants() - before == set()
    assert session_members(pid) == set()


# ------------------------------------------------------------------ the npm and PyPI servers


async def test_everything_server_over_stdio() -> None:
    server = MCPServer.stdio(node_server("mcp-server-everything"), ["stdio"], prefix="ev_")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("ev_echo", {"message": "hi"}),
        ("ev_get-tiny-image", {}),
        ("ev_get-resource-reference", {"resourceType": "Text", "resourceId": 1}),
        ("ev_get-resource-links", {"count": 2}),
        ("ev_get-structured-content", {"location": "New York"}),
        ("ev_get-sum", {"a": "not a number"}),
        ("ev_trigger-long-running-operation", {"duration": 0.2, "steps": 2}),
    ]
    model = ScriptedModel(reply(calls=calls), reply("done"))
    sink = ListSink()
    async with Relay(model, [server]) as relay:
        result = await relay.run("go", sink=sink)
    out = {
        call["name"]: done
        for call, done in zip(
            raw_items(result.output)[0:7], raw_items(result.output)[7:14], strict=True
        )
    }
    assert out["ev_echo"]["output"] == "Echo: hi"
    image = out["ev_get-tiny-image"]
    assert any(p.get("type") == "input_image" for p in image["output"])
    assert "Resource 1" in out["ev_get-resource-reference"]["output"]
    assert out["ev_get-resource-links"]["output"].count("[Resource: ") == 2
    assert orjson.loads(out["ev_get-structured-content"]["output"].split("\n")[0])["conditions"]
    assert (
        out["ev_get-sum"]["status"] == "failed" and "expected number" in out["ev_get-sum"]["output"]
    )
    assert "completed" in out["ev_trigger-long-running-operation"]["output"]
    assert [e.data["progress"] for e in sink.events if e.type == ev.TOOL_PROGRESS] == [1, 2]


async def test_filesystem_server_reads_and_lists_a_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("remember the milk")
    server = MCPServer.stdio(node_server("mcp-server-filesystem"), [str(tmp_path)])
    path = str(tmp_path / "notes.txt")
    model = ScriptedModel(
        reply(
            calls=[("read_text_file", {"path": path}), ("list_directory", {"path": str(tmp_path)})]
        ),
        reply("ok"),
    )
    async with Relay(model, [server]) as relay:
        result = await relay.run("read it")
    assert raw_items(result.output)[2]["output"] == "remember the milk"
    assert "notes.txt" in raw_items(result.output)[3]["output"]


async def test_time_server_from_pypi() -> None:
    server = MCPServer.stdio(sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"])
    try:
        tools = {t.spec.name: t for t in await server.list()}
        assert {"get_current_time", "convert_time"} <= set(tools)
        answer = await tools["get_current_time"].call({"timezone": "Europe/Paris"}, ToolContext())
        assert orjson.loads(answer[0]["text"])["timezone"] == "Europe/Paris"
    finally:
        await server.aclose()


# ------------------------------------------------------------------ HTTP transports


async def test_streamable_http_with_bearer_token_and_progress(
    http_server: HttpServer, token_env: str
) -> None:
    server = MCPServer.http(http_server.url, bearer_token_env=token_env)
    events: list[dict[str, Any]] = []

    async def emit(event: dict[str, Any]) -> None:
        events.append(event)

    try:
        names = {t.spec.name for t in await server.list()}
        assert {"add", "count_to"} <= names
        context = ToolContext(event_emitter=emit, call_id="call_9")
        assert await server.call("count_to", {"n": 2}, context) == [
            {"type": "text", "text": "counted to 2"}
        ]
        assert [e["data"]["call_id"] for e in events] == ["call_9", "call_9"]
    finally:
        await server.aclose()


async def test_streamable_http_without_the_token_fails_to_start(
    http_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WRONG_TOKEN", "nope")
    server = MCPServer.http(http_server.url, bearer_token_env="WRONG_TOKEN")
    with pytest.raises(ToolError, match="failed to start"):
        await server.list()
    await server.aclose()


async def test_streamable_http_session_expiry_restarts_the_session(
    http_server: HttpServer, token_env: str
) -> None:
    server = MCPServer.http(http_server.url, bearer_token_env=token_env, backoff=Backoff(0, 0))
    try:
        assert await server.call("add", {"a": 1, "b": 1}, ToolContext()) == [
            {"type": "text", "text": "2"}
        ]
        http_server.stop()  # the new process does not know the old session id: 404
        http_server.start()
        assert await server.call("add", {"a": 2, "b": 2}, ToolContext()) == [
            {"type": "text", "text": "4"}
        ]
        assert server.connection.starts == 2
    finally:
        await server.aclose()


async def test_sse_transport(sse_server: HttpServer, token_env: str) -> None:
    server = MCPServer.sse(sse_server.url, bearer_token_env=token_env)
    try:
        assert await server.call("add", {"a": 20, "b": 22}, ToolContext()) == [
            {"type": "text", "text": "42"}
        ]
    finally:
        await server.aclose()
