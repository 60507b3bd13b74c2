"""`[code_interpreter]` and a route's `code_interpreter`: read, checked, built."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envs import load
from toolrelay.adapters.code import JupyterRunner
from toolrelay.adapters.code.subprocess import SandboxedSubprocess
from toolrelay.config.code import CodeInterpreterConfig, build_code_runner
from toolrelay.errors import ConfigError

CONFIG = """
[code_interpreter]
engine = "jupyter"
users = "everyone"
memory_mb = 512
max_kernels = 2
network = true

[[models]]
name = "gpt"
base_url = "https://api.example.com/v1"
code_interpreter = false
"""


def test_the_table_and_the_route_switch_are_read(tmp_path: Path) -> None:
    path = tmp_path / "toolrelay.toml"
    path.write_text(CONFIG, encoding="utf-8")
    settings = load(path, env={})
    code = settings.code_interpreter
    assert (code.engine, code.users, code.memory_mb, code.max_kernels, code.network) == (
        "jupyter",
        "everyone",
        512,
        2,
        True,
    )
    assert settings.models[0].code_interpreter is False


def test_off_by_default_and_bad_values_name_the_key(tmp_path: Path) -> None:
    assert CodeInterpreterConfig().engine == "off"
    assert build_code_runner(CodeInterpreterConfig(), tmp_path) is None
    path = tmp_path / "toolrelay.toml"
    path.write_text('[code_interpreter]\nengine = "docker"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="code_interpreter.engine"):
        load(path, env={})


def test_each_engine_builds_its_runner_with_the_limits(tmp_path: Path) -> None:
    jupyter = build_code_runner(
        CodeInterpreterConfig(engine="jupyter", memory_mb=300, max_kernels=3), tmp_path
    )
    assert isinstance(jupyter, JupyterRunner)
    assert jupyter.sandbox.limits.memory_bytes == 300 * 1024 * 1024
    assert jupyter.pool.max_kernels == 3
    assert jupyter.root == tmp_path / "code"
    assert jupyter.sandbox.hide == [tmp_path.resolve(), (tmp_path / "code").resolve()]
    subprocess = build_code_runner(CodeInterpreterConfig(engine="subprocess"), tmp_path)
    assert isinstance(subprocess, SandboxedSubprocess)


@pytest.mark.anyio
async def test_the_subprocess_engine_runs_in_the_sandbox(tmp_path: Path) -> None:
    runner = build_code_runner(CodeInterpreterConfig(engine="subprocess"), tmp_path / "data")
    code = "import os; print(os.getcwd(), 'HOME' in os.environ, os.getuid() != 0)"
    out = await runner.run(code, "python")
    assert out["stdout"] == "/tmp/work True True\n", out
