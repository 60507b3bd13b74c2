"""`toolrelay chat` and `models` with nothing configured use the embedded model, as `serve`.

Here through a running toolrelay server (a real one, in a thread) whose route
`local` answers from the fake model server; the in-process model is loaded
for real in tests/adapters/local/test_embedded_model.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tests.server.conftest import ADMIN_KEY, ServerThread
from toolrelay.cli.main import app
from toolrelay.config.settings import ModelRoute, Settings
from toolrelay.testing import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def test_chat_uses_the_running_servers_embedded_model(tmp_path: Path) -> None:
    with FakeModelServer() as upstream:
        upstream.script(SSEReply(chat_chunks(text="Hi from the server.")))
        route = ModelRoute(name="local", base_url=upstream.base_url, model="qwen")
        settings = Settings(
            data_dir=tmp_path / "server",
            models=[route],
            admin_key=ADMIN_KEY,
            database_url=None,
            builtin_tools=False,  # no tools: no tool-selection step before the answer
        )
        with ServerThread(settings) as base_url:
            port = base_url.rsplit(":", 1)[1]
            env = {
                "TOOLRELAY_PORT": port,
                "TOOLRELAY_KEY": ADMIN_KEY,
                "TOOLRELAY_BUILTIN_TOOLS": "0",
            }
            result = invoke("chat", "Say hi.", "--no-save", env=env)
            listed = invoke("models", env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hi from the server.\n"
    assert f"using the embedded model of the toolrelay server at {base_url}/v1" in result.stderr
    assert upstream.requests[0].json["messages"][-1] == {"role": "user", "content": "Say hi."}
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines()[1] == f"local\topenai-chat\tlocal\t{base_url}/v1"


def test_models_names_the_embedded_route_when_nothing_is_configured() -> None:
    result = invoke("models")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "name\tkind\tmodel\tbase_url",
        "local\topenai-chat\tqwen2.5-coder-0.5b-instruct-q4_k_m\t"
        "(embedded: started in the command's process when used)",
    ]


def test_with_the_embedded_model_off_chat_says_how_to_add_one() -> None:
    result = invoke("chat", "hi", "--no-save", env={"TOOLRELAY_LOCAL": "false"})
    assert result.exit_code == 2
    assert "no model configured" in result.stderr
    listed = invoke("models", env={"TOOLRELAY_LOCAL": "false"})
    assert listed.exit_code == 1 and listed.stderr.startswith("no model configured.")
