"""`toolrelay chat` end to end: the CLI against a fake model server on a real socket."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from tests.cli.saved import saved
from toolrelay.cli.main import app
from toolrelay.testing import FakeModelServer, NDJSONReply, RawReply, SSEReply, ToolCallSpec
from toolrelay.testing.fake_server import BodyReply
from toolrelay.testing.wire import chat_chunks, ollama_lines, render_responses_sse, responses_events

TOOLS = '''
from toolrelay import tool


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"
'''

USAGE = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "weather_tools.py"
    path.write_text(TOOLS)
    return path


def run(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Any:
    return CliRunner().invoke(app, ["chat", *args], env=env, input=input, catch_exceptions=False)


def test_json_prints_every_event_as_one_line_ending_with_the_final_event(
    server: FakeModelServer,
) -> None:
    server.script(SSEReply(chat_chunks(text=["Hello ", "there"], usage=USAGE)))
    result = run("hi", "--base-url", server.base_url, "--model", "m", "--json")
    assert result.exit_code == 0, result.output
    events = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert all(set(e) == {"type", "data"} for e in events)
    assert events[0]["type"] == "response.output_item.added"
    last = events[-1]
    assert last["type"] == "chat:completion"
    assert last["data"]["done"] is True
    assert last["data"]["status"] == "completed"
    assert last["data"]["content"] == "Hello there"
    assert server.requests[0].json["model"] == "m"
    assert server.requests[0].json["messages"] == [{"role": "user", "content": "hi"}]


def test_a_tool_runs_and_only_the_answer_reaches_a_pipe(
    server: FakeModelServer, tools_file: Path
) -> None:
    """stdout is not a terminal: the raw text there, the tool line and usage on stderr."""
    server.script(
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_weather", {"city": "Paris"})])),
        SSEReply(chat_chunks(text="It is **sunny** in Paris.", usage=USAGE)),
    )
    result = run(
        "weather?", "--base-url", server.base_url, "--model", "m", "--tools", str(tools_file)
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "It is **sunny** in Paris.\n"
    lines = [line.rstrip() for line in result.stderr.splitlines()]
    assert lines[0] == '✓ get_weather(city="Paris") → sunny in Paris'
    assert lines[1].startswith("tokens: in 5 · out 7 · 1 tool call · ")
    sent = server.requests[0].json
    assert [t["function"]["name"] for t in sent["tools"]] == [
        "get_weather",
        "get_time",
        "calculator",
    ]
    fed_back = server.requests[1].json["messages"][-1]
    assert fed_back["role"] == "tool" and fed_back["content"] == "sunny in Paris"


def test_text_items_are_separated_by_a_blank_line(
    server: FakeModelServer, tools_file: Path
) -> None:
    server.script(
        SSEReply(
            chat_chunks(
                text=["Let me ", "check."],
                tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})],
            )
        ),
        SSEReply(chat_chunks(text=["It is ", "sunny."])),
    )
    args = ["weather?", "--base-url", server.base_url, "--model", "m", "--tools", str(tools_file)]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert result.stdout == "Let me check.\n\nIt is sunny.\n"


def test_a_failing_upstream_exits_1_with_the_error_on_stderr(server: FakeModelServer) -> None:
    body = b'{"error": {"message": "upstream exploded", "type": "server_error"}}'
    server.set_default(RawReply(500, body, {"content-type": "application/json"}))
    result = run("hi", "--base-url", server.base_url, "--model", "m")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "error: " in result.stderr
    assert "500" in result.stderr and "upstream exploded" in result.stderr


def test_json_mode_failure_exits_1_and_prints_only_events(server: FakeModelServer) -> None:
    server.set_default(RawReply(400, b'{"error": {"message": "bad model"}}'))
    result = run("hi", "--base-url", server.base_url, "--model", "nope", "--json")
    assert result.exit_code == 1
    events = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [e["type"] for e in events] == ["chat:message:error", "chat:completion"]
    assert events[-1]["data"]["status"] == "failed"
    assert "bad model" in events[-1]["data"]["error"]["content"]


def test_ollama_api_reads_ndjson(server: FakeModelServer) -> None:
    server.route(
        "/api/chat", NDJSONReply(ollama_lines(thinking=["hm"], text=["Hi ", "from llama"]))
    )
    result = run("hi", "--base-url", server.base_url, "--model", "llama3", "--api", "ollama")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hi from llama\n"
    lines = [line.rstrip() for line in result.stderr.splitlines()]
    assert lines[0] == "thinking: hm"
    assert lines[1].startswith("tokens: in 10 · out 20 · 0 tool calls · ")
    assert server.requests[0].path == "/api/chat"
    assert server.requests[0].json["model"] == "llama3"


def test_responses_api(server: FakeModelServer) -> None:
    body = render_responses_sse(responses_events(text=["Hello ", "world"]))
    server.route("/v1/responses", BodyReply(body))
    result = run("hi", "--base-url", server.base_url, "--model", "m", "--api", "responses")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hello world\n"
    assert server.requests[0].path == "/v1/responses"


def test_system_prompt_and_api_key_are_sent(server: FakeModelServer) -> None:
    server.script(SSEReply(chat_chunks(text="ok")))
    result = run(
        "hi",
        "--base-url",
        server.base_url,
        "--model",
        "m",
        "--system",
        "Be brief.",
        "--api-key",
        "sk-test",
    )
    assert result.exit_code == 0, result.output
    request = server.requests[0]
    assert request.json["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert request.headers["authorization"] == "Bearer sk-test"


def test_max_iterations_caps_the_loop_and_exits_1(
    server: FakeModelServer, tools_file: Path
) -> None:
    server.set_default(
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]))
    )
    result = run(
        "loop",
        "--base-url",
        server.base_url,
        "--model",
        "m",
        "--tools",
        str(tools_file),
        "--max-iterations",
        "1",
        "--json",
    )
    assert result.exit_code == 1
    last = orjson.loads(result.stdout.splitlines()[-1])
    assert last["data"]["status"] == "capped"
    assert len(server.requests) == 2  # one tool round, then the capped call


def test_the_open_webui_iteration_cap_applies_with_base_url(
    server: FakeModelServer, tools_file: Path
) -> None:
    """Read once by the settings (RunLimits itself reads no environment)."""
    server.set_default(
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]))
    )
    args = ["loop", "--base-url", server.base_url, "--model", "m", "--tools", str(tools_file)]
    result = run(*args, "--json", env={"CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS": "1"})
    assert result.exit_code == 1
    assert orjson.loads(result.stdout.splitlines()[-1])["data"]["status"] == "capped"
    assert len(server.requests) == 2


def test_base_url_without_model_is_a_usage_error(server: FakeModelServer) -> None:
    result = run("hi", "--base-url", server.base_url)
    assert result.exit_code == 2
    assert "--model NAME is required with --base-url" in result.stderr
    assert server.requests == []


def test_a_missing_tool_file_is_a_usage_error(server: FakeModelServer, tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    result = run("hi", "--base-url", server.base_url, "--model", "m", "--tools", str(missing))
    assert result.exit_code == 2
    assert f"tool file {str(missing)!r}: no such file" in result.stderr


def _config(tmp_path: Path, server: FakeModelServer, tools_file: Path) -> Path:
    path = tmp_path / "toolrelay.toml"
    path.write_text(
        f'tools = ["{tools_file.name}"]\n'
        "[[models]]\n"
        'name = "fast"\n'
        f'base_url = "{server.base_url}"\n'
        'model = "upstream-fast"\n'
    )
    return path


def test_a_configured_route_gets_its_client_and_tools(
    server: FakeModelServer, tools_file: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path, server, tools_file)
    server.script(
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_weather", {"city": "Rome"})])),
        SSEReply(chat_chunks(text="Warm.")),
    )
    result = run("hi", "--config", str(config), "--model", "fast")
    assert result.exit_code == 0, result.output
    assert '✓ get_weather(city="Rome") → sunny in Rome' in result.stderr
    assert server.requests[0].json["model"] == "upstream-fast"


def test_a_route_with_text_tool_calls_runs_a_call_written_as_text(
    server: FakeModelServer, tools_file: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path, server, tools_file)
    config.write_text(config.read_text() + "text_tool_calls = true\n")
    call = '```json\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n```'
    server.script(
        SSEReply(chat_chunks(text=[call[:9], call[9:]])), SSEReply(chat_chunks(text="Warm."))
    )
    result = run("hi", "--config", str(config), "--model", "fast")
    assert result.exit_code == 0, result.output
    assert '✓ get_weather(city="Rome") → sunny in Rome' in result.stderr
    assert len(server.requests) == 2


def test_an_unknown_route_names_the_configured_ones(
    server: FakeModelServer, tools_file: Path, tmp_path: Path
) -> None:
    config = _config(tmp_path, server, tools_file)
    result = run("hi", "--config", str(config), "--model", "slow")
    assert result.exit_code == 2
    assert "--model 'slow': no such route (configured: fast;" in result.stderr


def test_ctrl_c_cancels_the_turn_and_exits_130(server: FakeModelServer, data_dir: Path) -> None:
    """A stalled stream, SIGINT: the upstream connection is closed, the partial turn is saved
    as cancelled and the exit code is 130."""
    server.script(SSEReply(chat_chunks(text=["first ", "second"]), stall_after=2))
    args = ["chat", "hi", "--base-url", server.base_url, "--model", "m", "--json"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolrelay.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        first = orjson.loads(proc.stdout.readline())
        assert first["type"] == "response.output_item.added"
        assert server.open_connections == 1
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err.decode()
    assert b"cancelled" in err
    assert server.wait_for_connections(0)
    [(_, messages)] = saved(data_dir)
    assert [(m.role, m.status, m.content) for m in messages] == [
        ("user", None, "hi"),
        ("assistant", "cancelled", "first "),
    ]


GUARDED = '''
from toolrelay import tool


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"
'''


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("--approve", "deleted a.txt"),
        (
            "--reject",
            "The user rejected the call to `delete_file`; it was not run. Reason: rejected with --reject",
        ),
        (
            None,
            "The user rejected the call to `delete_file`; it was not run. Reason: no terminal to ask for approval (use --approve)",
        ),
    ],
)
def test_approvals_are_answered(
    server: FakeModelServer, tmp_path: Path, flag: str | None, expected: str
) -> None:
    path = tmp_path / "guarded_tools.py"
    path.write_text(GUARDED)
    server.script(
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("delete_file", {"path": "a.txt"})])),
        SSEReply(chat_chunks(text="Done.")),
    )
    args = [
        "rm a.txt",
        "--base-url",
        server.base_url,
        "--model",
        "m",
        "--tools",
        str(path),
        "--json",
    ]
    result = run(*args, *([flag] if flag else []))
    assert result.exit_code == 0, result.output
    types = [orjson.loads(line)["type"] for line in result.stdout.splitlines()]
    assert "tool:approval" in types
    assert server.requests[1].json["messages"][-1]["content"] == expected
