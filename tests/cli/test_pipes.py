"""`toolrelay chat` in pipelines: the prompt from stdin, raw text on stdout, the rest on stderr.

Real processes over real pipes and a real pseudo-terminal, against the fake
model server on a socket.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.cli.terminal import Terminal
from tests.patience import HANG
from toolrelay.cli.main import app
from toolrelay.testing import FakeModelServer, SSEReply, ToolCallSpec
from toolrelay.testing.wire import chat_chunks

USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
CLI = [sys.executable, "-m", "toolrelay.cli.main"]


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["chat", *args], input=input, env=env, catch_exceptions=False)


def sent_prompt(server: FakeModelServer) -> Any:
    return server.requests[0].json["messages"]


def test_the_prompt_comes_from_stdin_when_none_is_given(server: FakeModelServer) -> None:
    server.script(SSEReply(chat_chunks(text="ok")))
    result = run(
        "--base-url",
        server.base_url,
        "--model",
        "m",
        "--system",
        "Terse.",
        input="line one\nline two\n",
    )
    assert result.exit_code == 0, result.output
    assert sent_prompt(server) == [
        {"role": "system", "content": "Terse."},
        {"role": "user", "content": "line one\nline two"},
    ]


def test_a_dash_reads_the_prompt_from_stdin(server: FakeModelServer) -> None:
    server.script(SSEReply(chat_chunks(text="ok")))
    result = run("-", "--base-url", server.base_url, "--model", "m", input="from stdin")
    assert result.exit_code == 0, result.output
    assert sent_prompt(server) == [{"role": "user", "content": "from stdin"}]


def test_an_empty_stdin_is_a_usage_error(server: FakeModelServer) -> None:
    result = run("--base-url", server.base_url, "--model", "m", input="\n")
    assert result.exit_code == 2
    assert result.stderr == "error: no prompt: stdin was empty\n"
    assert server.requests == []


def test_a_real_pipe_gets_only_the_text(server: FakeModelServer) -> None:
    """`echo … | toolrelay chat | cat`: stdout is exactly the answer, as the model wrote it."""
    server.script(
        SSEReply(chat_chunks(text=["# Title\n\n", "Some **bold**", " text."], usage=USAGE))
    )
    done = subprocess.run(
        [*CLI, "chat", "--base-url", server.base_url, "--model", "m"],
        input=b"piped question\n",
        capture_output=True,
        timeout=HANG,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == "# Title\n\nSome **bold** text.\n"
    assert done.stderr.decode().startswith("tokens: in 3 · out 4 · 0 tool calls · ")
    assert sent_prompt(server) == [{"role": "user", "content": "piped question"}]


def _on_terminal(server: FakeModelServer, *flags: str) -> str:
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"}
    env.pop("NO_COLOR", None)
    term = Terminal(
        [*CLI, "chat", "hi", "--base-url", server.base_url, "--model", "m", *flags], env
    )
    try:
        assert term.wait() == 0, term.output
        return term.output
    finally:
        term.close()


def test_a_terminal_gets_rendered_markdown_and_raw_forces_the_text(
    server: FakeModelServer,
) -> None:
    server.script(
        SSEReply(chat_chunks(text="Some **bold** text.", usage=USAGE)),
        SSEReply(chat_chunks(text="Some **bold** text.", usage=USAGE)),
    )
    rendered = _on_terminal(server)
    assert "Some bold text." in rendered and "**" not in rendered
    assert "tokens: in 3 · out 4" in rendered
    forced = _on_terminal(server, "--raw")
    assert "Some **bold** text.\n" in forced
    assert "tokens: in 3 · out 4" in forced


def test_with_openai_base_url_an_unknown_model_is_the_upstream_model(
    server: FakeModelServer,
) -> None:
    server.script(SSEReply(chat_chunks(text="ok")))
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-upstream"}
    result = run("hi", "--model", "some-other-model", env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok\n"
    assert server.requests[0].json["model"] == "some-other-model"
    assert server.requests[0].headers["authorization"] == "Bearer sk-upstream"


def test_forced_raw_on_a_terminal_keeps_tool_lines_off_the_text_line(
    server: FakeModelServer, tmp_path: Path
) -> None:
    """stdout and stderr are one terminal: the text's line ends before a tool line."""
    tools = tmp_path / "weather_tools.py"
    tools.write_text(
        "from toolrelay import tool\n\n\n@tool\ndef get_weather(city: str) -> str:\n"
        '    """The weather."""\n    return f"sunny in {city}"\n'
    )
    server.script(
        SSEReply(
            chat_chunks(
                text="Let me check.", tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})]
            )
        ),
        SSEReply(chat_chunks(text="Sunny.", usage=USAGE)),
    )
    shown = _on_terminal(server, "--raw", "--tools", str(tools))
    lines = [line.rstrip() for line in shown.splitlines() if line.strip()]
    assert lines[:3] == ["Let me check.", '✓ get_weather(city="Oslo") → sunny in Oslo', "Sunny."]


def test_piped_stdout_with_stderr_on_a_terminal_gets_the_spinner_there(
    server: FakeModelServer,
) -> None:
    """`toolrelay chat … > file` at a terminal: the spinner and usage on the terminal, the
    file gets the text alone."""
    server.script(SSEReply(chat_chunks(text="Only **this**.", usage=USAGE)))
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color", "PYTHONUNBUFFERED": "1"}
    argv = [*CLI, "chat", "hi", "--base-url", server.base_url, "--model", "m"]
    term = Terminal(argv, env, stdout=subprocess.PIPE)
    try:
        assert term.proc.stdout is not None
        text = term.proc.stdout.read()
        assert term.wait() == 0, term.output
    finally:
        term.close()
    assert text == b"Only **this**.\n"
    assert "waiting for the model" in term.output  # the live spinner, on stderr
    assert "tokens: in 3 · out 4" in term.output
    assert "Only" not in term.output
