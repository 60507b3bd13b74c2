"""`[code_interpreter]` and a route's `code_interpreter`: read, checked, built."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.envs import load
from toolrelay.adapters.code import JupyterRunner, isolation
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


def test_the_basic_sandbox_is_refused_for_everyone_and_as_root(tmp_path: Path) -> None:
    everyone = CodeInterpreterConfig(engine="jupyter", sandbox="basic", users="everyone")
    with pytest.raises(ConfigError, match="basic.*is for one trusted user, not users = 'everyone'"):
        build_code_runner(everyone, tmp_path)
    assert os.geteuid() == 0, "this check needs the tests to run as root (CI does)"
    with pytest.raises(ConfigError, match="'basic' would run code as root"):
        build_code_runner(CodeInterpreterConfig(engine="subprocess", sandbox="basic"), tmp_path)


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    """`isolation()` probes the host once per process: again for this test, and after it."""
    isolation.cache_clear()
    yield
    isolation.cache_clear()


def test_a_host_without_bubblewrap_stops_the_start_saying_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_probe: None
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap, prlimit or setpriv on it
    with pytest.raises(ConfigError) as caught:
        build_code_runner(CodeInterpreterConfig(engine="jupyter"), tmp_path)
    assert str(caught.value) == (
        "code_interpreter: the code sandbox needs bwrap, prlimit, setpriv on PATH "
        "(apt-get install bubblewrap); on a host for one trusted user set "
        "code_interpreter.sandbox = 'basic' (docs/code-interpreter.md)"
    )
