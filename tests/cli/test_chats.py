"""`toolrelay chats`, `models`, `--version`: the real commands on a real SQLite file.

The chats are made by the real `toolrelay chat` against the fake model server,
so what is listed, shown and exported is what the CLI saved.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from toolrelay import __version__
from toolrelay.cli.main import app
from toolrelay.testing import FakeModelServer, SSEReply, ToolCallSpec
from toolrelay.testing.wire import chat_chunks

TOOLS = '''
from toolrelay import tool


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"
'''


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


@pytest.fixture
def two_chats(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A chat with a tool call (older) and a plain one (newer): their ids."""
    tools = tmp_path / "weather_tools.py"
    tools.write_text(TOOLS)
    with FakeModelServer() as server:
        server.script(
            SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})])),
            SSEReply(chat_chunks(text="It is *sunny* in Oslo.")),
            SSEReply(chat_chunks(text="Hello!")),
        )
        direct = ["--base-url", server.base_url, "--model", "m"]
        weather = invoke("chat", "weather in Oslo?", *direct, "--tools", str(tools))
        assert weather.exit_code == 0, weather.output
        hello = invoke("chat", "say hello", *direct)
        assert hello.exit_code == 0, hello.output
    listed = invoke("chats", "list").stdout.splitlines()[1:]
    ids = {line.split("\t")[3]: line.split("\t")[0] for line in listed}
    yield ids["weather in Oslo?"], ids["say hello"]


def test_list_is_newest_first_and_names_the_database(
    two_chats: tuple[str, str], data_dir: Path
) -> None:
    result = invoke("chats", "list")
    assert result.exit_code == 0, result.output
    assert result.stderr == f"database: {data_dir / 'toolrelay.db'}\n"
    header, *rows = result.stdout.splitlines()
    assert header.split("\t") == ["id", "updated", "model", "title"]
    assert [(r.split("\t")[0], r.split("\t")[2], r.split("\t")[3]) for r in rows] == [
        (two_chats[1], "m", "say hello"),
        (two_chats[0], "m", "weather in Oslo?"),
    ]
    assert invoke("chats", "list", "--limit", "1").stdout.count("\n") == 2
    found = invoke("chats", "list", "--search", "sunny").stdout.splitlines()[1:]
    assert [row.split("\t")[0] for row in found] == [two_chats[0]]  # in an answer, not a title
    alone = invoke("chats")  # the group alone lists, as `chats list` does
    assert alone.exit_code == 0, alone.output
    assert alone.stdout == result.stdout


def test_export_markdown_has_every_step(two_chats: tuple[str, str]) -> None:
    result = invoke("chats", "export", two_chats[0], "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "# weather in Oslo?\n"
        "\n"
        f"`{two_chats[0]}` · m\n"
        "\n"
        "## user\n"
        "\n"
        "weather in Oslo?\n"
        "\n"
        "## assistant (m)\n"
        "\n"
        '**tool call** `get_weather({"city":"Oslo"})`\n'
        "\n"
        "```\n"
        "sunny in Oslo\n"
        "```\n"
        "\n"
        "It is *sunny* in Oslo.\n"
    )


def test_show_through_a_pipe_is_that_markdown(two_chats: tuple[str, str]) -> None:
    shown = invoke("chats", "show", two_chats[1])
    exported = invoke("chats", "export", two_chats[1], "-f", "markdown")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == exported.stdout
    assert "## assistant (m)\n\nHello!\n" in shown.stdout


def test_export_json_to_a_file(two_chats: tuple[str, str], tmp_path: Path) -> None:
    target = tmp_path / "chat.json"
    result = invoke("chats", "export", two_chats[0], "-o", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    exported = orjson.loads(target.read_bytes())
    assert exported["id"] == two_chats[0] and exported["title"] == "weather in Oslo?"
    roles = [(m["role"], m["status"]) for m in exported["messages"]]
    assert roles == [("user", None), ("assistant", "completed")]
    kinds = [item["type"] for item in exported["messages"][1]["output"]]
    assert kinds == ["function_call", "function_call_output", "message"]
    assert exported["messages"][1]["output"][1]["output"] == "sunny in Oslo"


def test_rm_deletes_and_a_missing_one_exits_1(two_chats: tuple[str, str]) -> None:
    result = invoke("chats", "rm", two_chats[0], "chat_nope")
    assert result.exit_code == 1
    assert result.stdout == f"deleted {two_chats[0]}\n"
    assert "no chat 'chat_nope' of user 'admin'" in result.stderr
    rows = invoke("chats", "list").stdout.splitlines()[1:]
    assert [r.split("\t")[0] for r in rows] == [two_chats[1]]
    shown = invoke("chats", "show", two_chats[0])
    assert shown.exit_code == 2 and f"no chat {two_chats[0]!r}" in shown.stderr


@pytest.mark.parametrize("command", [["chats", "list"], ["chats", "show", "chat_x"]])
def test_reading_a_missing_database_creates_none(data_dir: Path, command: list[str]) -> None:
    result = invoke(*command)
    assert result.exit_code == 2
    assert f"error: no database at {data_dir / 'toolrelay.db'}" in result.stderr
    assert not data_dir.exists()


def test_models_lists_the_routes(tmp_path: Path) -> None:
    config = tmp_path / "toolrelay.toml"
    config.write_text(
        '[[models]]\nname = "fast"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "up-fast"\n'
        '[[models]]\nname = "llama"\nkind = "ollama"\nbase_url = "http://127.0.0.1:9"\n'
    )
    result = invoke("models", "--config", str(config))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "name\tkind\tmodel\tbase_url",
        "fast\topenai-chat\tup-fast\thttp://127.0.0.1:9/v1",
        "llama\tollama\tllama\thttp://127.0.0.1:9",
    ]


def test_models_from_the_environment_and_none() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_MODEL": "gpt-x"}
    result = invoke("models", env=env)
    assert result.stdout.splitlines()[1] == "gpt-x\topenai-chat\tgpt-x\thttp://127.0.0.1:9/v1"
    empty = invoke("models", env={"TOOLRELAY_LOCAL": "false"})  # no embedded model either
    assert empty.exit_code == 1 and empty.stdout == ""
    assert empty.stderr.startswith("no model configured.")


def test_version_from_the_installed_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolrelay.cli.main", "--version"],
        capture_output=True,
        text=True,
        env=os.environ,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"toolrelay {__version__}\n"


def test_export_markdown_quotes_the_reasoning() -> None:
    with FakeModelServer() as server:
        server.script(SSEReply(chat_chunks(reasoning=["Two plus ", "two."], text="4")))
        made = invoke("chat", "2+2?", "--base-url", server.base_url, "--model", "m")
        assert made.exit_code == 0, made.output
    chat_id = invoke("chats", "list").stdout.splitlines()[1].split("\t")[0]
    exported = invoke("chats", "export", chat_id, "-f", "markdown").stdout
    assert exported.endswith("## assistant (m)\n\n> *thinking:* Two plus two.\n\n4\n")
