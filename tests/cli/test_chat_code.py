"""`toolrelay chat --code`: the model's execute_code calls run in a real kernel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from toolrelay.cli.main import app
from toolrelay.testing import FakeModelServer, SSEReply, ToolCallSpec
from toolrelay.testing.wire import chat_chunks


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


def chat(server: FakeModelServer, *flags: str) -> Any:
    args = ["chat", "compute", "--base-url", server.base_url, "--model", "m", "--json", *flags]
    return CliRunner().invoke(app, args, catch_exceptions=False)


def test_code_flag_offers_execute_code_and_runs_it(server: FakeModelServer) -> None:
    server.script(
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("execute_code", {"code": "6 * 7"})])),
        SSEReply(chat_chunks(text="42")),
    )
    result = chat(server, "--code", "--no-save")
    assert result.exit_code == 0, result.output
    names = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert names == ["get_time", "calculator", "execute_code"]  # the built-ins, and the code tool
    assert server.requests[1].json["messages"][-1]["content"] == "result:\n42"
    events = [orjson.loads(line) for line in result.stdout.splitlines()]
    live = [e["data"] for e in events if e["type"] == "code_interpreter:output"]
    assert [(e["kind"], e["text"]) for e in live] == [("result", "42")]


def test_without_the_flag_no_code_runs(server: FakeModelServer) -> None:
    server.script(SSEReply(chat_chunks(text="no tools")))
    result = chat(server, "--no-save")
    assert result.exit_code == 0, result.output
    offered = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert offered == ["get_time", "calculator"]  # the built-in tools only
