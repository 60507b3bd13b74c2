"""`execute_code` is listed wherever tools are (`toolrelay tools list`, `GET /api/tools`)
while the code interpreter is on, and only then."""

from __future__ import annotations

from pathlib import Path

import httpx2
from typer.testing import CliRunner

from tests.server.conftest import ADMIN_KEY, ServerThread, make_settings
from toolrelay.cli.main import app
from toolrelay.config.code import CodeInterpreterConfig
from toolrelay.testing.fake_server import FakeModelServer

CODE_ON = '\n[code_interpreter]\nengine = "subprocess"\n'


def _config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "toolrelay.toml"
    path.write_text(f'data_dir = "{tmp_path / "data"}"\nlocal = false\n{extra}')
    return path


def test_tools_list_shows_execute_code_when_the_interpreter_is_on(tmp_path: Path) -> None:
    on = CliRunner().invoke(app, ["tools", "list", "--config", str(_config(tmp_path, CODE_ON))])
    assert on.exit_code == 0, on.output
    assert "execute_code" in on.stdout and "code_interpreter" in on.stdout
    off = CliRunner().invoke(app, ["tools", "list", "--config", str(_config(tmp_path))])
    assert off.exit_code == 0, off.output
    assert "execute_code" not in off.stdout


def test_api_tools_lists_execute_code_when_the_interpreter_is_on(tmp_path: Path) -> None:
    with FakeModelServer() as upstream:
        code = CodeInterpreterConfig(engine="subprocess", users="everyone")
        settings = make_settings(tmp_path, upstream, code_interpreter=code)
        with ServerThread(settings) as base_url:
            headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
            tools = httpx2.get(base_url + "/api/tools", headers=headers, timeout=30).json()["data"]
    (listed,) = [t for t in tools if t["name"] == "execute_code"]
    assert listed["source"] == "code_interpreter (everyone)" and listed["status"] == "ok"
    assert "Python" in listed["description"]
