"""Which config file the CLI read, `--no-config`, and what a config is never needed for.

A `./toolrelay.toml` in the working directory whose route needs an env var that
is not set is the witness: read silently, it fails commands that never needed it.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolrelay.cli.main import app
from toolrelay.testing import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

ROOT = Path(__file__).parent.parent.parent

NEEDS_KEY = """\
tools = ["examples/tools.py"]

[[models]]
name = "gpt"
base_url = "https://api.openai.com/v1"
api_key_env = "OPENAI_API_KEY"
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "examples" / "tools.py")
    path = tmp_path / "toolrelay.toml"
    path.write_text(NEEDS_KEY)
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> object:
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def test_tools_list_needs_no_model_key(config: Path) -> None:
    result = cli("tools", "list", "--config", str(config))
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert "OPENAI_API_KEY" not in result.stderr  # type: ignore[attr-defined]
    assert "calculator" in result.stdout  # type: ignore[attr-defined]
    assert f"config: {config.resolve()}" in result.stderr  # type: ignore[attr-defined]


def test_models_says_which_file_it_read(config: Path) -> None:
    result = cli("models")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert f"config: {config.resolve()}" in result.stderr  # type: ignore[attr-defined]
    assert result.stdout.splitlines()[1].startswith("gpt\t")  # type: ignore[attr-defined]


def test_no_config_lets_the_flags_stand_alone(config: Path, tmp_path: Path) -> None:
    tools = tmp_path / "examples" / "tools.py"
    with FakeModelServer() as server:
        server.script(SSEReply(chat_chunks(text="hello")))
        args = ("chat", "hi", "--tools", str(tools), "--no-save")
        failing = cli(*args, env={"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "m"})
        assert failing.exit_code == 2  # type: ignore[attr-defined]
        assert "OPENAI_API_KEY" in failing.stderr  # type: ignore[attr-defined]
        assert f"config: {config.resolve()}" in failing.stderr  # type: ignore[attr-defined]
        result = cli(
            *args, "--no-config", env={"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "m"}
        )
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert result.stdout == "hello\n"  # type: ignore[attr-defined]
    assert "config:" not in result.stderr  # type: ignore[attr-defined]
    assert {t["function"]["name"] for t in server.requests[0].json["tools"]} >= {"calculator"}


def test_config_and_no_config_together_is_an_error(config: Path) -> None:
    result = cli("models", "--config", str(config), "--no-config")
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert "--config and --no-config" in result.stderr  # type: ignore[attr-defined]


def test_the_same_tools_file_twice_warns_at_most_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "examples").mkdir()
    shutil.copy(ROOT / "examples" / "tools.py", tmp_path / "examples" / "tools.py")
    (tmp_path / "toolrelay.toml").write_text('tools = ["examples/tools.py"]\n')
    caplog.set_level(logging.WARNING, logger="toolrelay.tools")
    with FakeModelServer() as server:
        server.script(SSEReply(chat_chunks(text="hello")))
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_MODEL": "m"}
        result = cli("chat", "hi", "--tools", "examples/tools.py", "--no-save", env=env)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    hidden = [r for r in caplog.records if "hidden" in r.getMessage()]
    assert len(hidden) <= 1, [r.getMessage() for r in hidden]
    assert "already loaded by the config" in result.stderr  # type: ignore[attr-defined]
    names = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert len(names) == len(set(names))


def test_make_run_passes_port_and_args() -> None:
    make = shutil.which("make")
    assert make is not None, "make is not installed"
    done = subprocess.run(
        [make, "-n", "run", "PORT=9000", "ARGS=--no-local --log-level debug"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    serve = [line for line in done.stdout.splitlines() if "toolrelay serve" in line]
    assert serve and serve[-1].endswith("toolrelay serve --port 9000 --no-local --log-level debug")
