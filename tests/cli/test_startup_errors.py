"""`toolrelay serve` with a bad configuration: one line naming the key or file, exit 2.

Each case runs the real command in a subprocess (a clean environment, its own
working directory and home), so a traceback or a uvicorn start would show.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import toolrelay

PREFIXES = ("TOOLRELAY_", "OPENAI_", "OLLAMA_")
PLAIN = ("DATABASE_URL", "REDIS_URL", "CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS")
ROUTE = '[[models]]\nname = "gpt"\nbase_url = "http://127.0.0.1:9/v1"\n'


def run_cli(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, prelude: str = ""
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(PREFIXES) and k not in PLAIN}
    clean.update({"HOME": str(tmp_path), "NO_COLOR": "1", **(env or {})})
    code = f"{prelude}\nfrom toolrelay.cli.main import app\napp(prog_name='toolrelay')"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean,
        timeout=120,
    )


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0].removeprefix("error: ")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolrelay.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_missing_tools_file(tmp_path: Path) -> None:
    config = write(tmp_path, 'tools = ["nope.py"]\n')
    message = one_error_line(run_cli(tmp_path, "serve", "--config", str(config)))
    assert message == f"tool file {str(tmp_path / 'nope.py')!r}: no such file"


def test_unset_api_key_env(tmp_path: Path) -> None:
    config = write(tmp_path, ROUTE + 'api_key_env = "NOT_SET_KEY"\n')
    message = one_error_line(run_cli(tmp_path, "serve", "--config", str(config)))
    assert message == "model route 'gpt': env var NOT_SET_KEY (api_key_env) is not set"


def test_missing_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    message = one_error_line(run_cli(tmp_path, "serve", "--config", str(missing)))
    assert message == f"{missing}: config file not found"


def test_bad_toml(tmp_path: Path) -> None:
    config = write(tmp_path, "port = \n")
    message = one_error_line(run_cli(tmp_path, "serve", "--config", str(config)))
    assert message.startswith(f"{config}: invalid TOML: ")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TOOLRELAY_PORT": "eighty"}, "TOOLRELAY_PORT: not a valid integer"),
        ({"TOOLRELAY_MODELS": "[{"}, "TOOLRELAY_MODELS: not valid JSON"),
        (
            {"DATABASE_URL": "mysql://u:secret@h/db"},
            "DATABASE_URL: must be a sqlite:// or postgresql:// URL (got 'mysql':…)",
        ),
    ],
)
def test_bad_environment(tmp_path: Path, env: dict[str, str], expected: str) -> None:
    assert one_error_line(run_cli(tmp_path, "serve", env=env)) == expected


def test_unimportable_filter(tmp_path: Path) -> None:
    config = write(tmp_path, 'filters = ["no_such_module_xyz:Filter"]\n')
    message = one_error_line(run_cli(tmp_path, "serve", "--config", str(config)))
    assert message.startswith("filters: 'no_such_module_xyz:Filter' failed to load: ")


def test_data_dir_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    env = {"TOOLRELAY_DATA_DIR": str(tmp_path / "file" / "data")}
    message = one_error_line(run_cli(tmp_path, "serve", env=env))
    assert message.startswith(f"data_dir: cannot create {str(tmp_path / 'file' / 'data')!r}: ")


BLOCK_SERVER = "import sys\nfor name in ('fastapi', 'uvicorn'):\n    sys.modules[name] = None"


@pytest.mark.parametrize(
    "args", [("serve",), ("db", "upgrade"), ("keys", "list"), ("chats", "list")]
)
def test_without_the_server_extra_the_command_names_it(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    message = one_error_line(run_cli(tmp_path, *args, prelude=BLOCK_SERVER))
    assert "pip install 'toolrelay[server]'" in message
    assert "fastapi, uvicorn not installed" in message


def test_a_redis_events_url_without_the_redis_extra(tmp_path: Path) -> None:
    done = run_cli(
        tmp_path,
        "serve",
        env={"REDIS_URL": "redis://127.0.0.1:6379/0"},
        prelude="import sys\nsys.modules['redis'] = None",
    )
    assert one_error_line(done) == (
        "a Redis events_url needs the redis extra (redis not installed): "
        "pip install 'toolrelay[redis]'"
    )


def test_a_postgresql_url_without_the_postgres_extra(tmp_path: Path) -> None:
    done = run_cli(
        tmp_path,
        "serve",
        env={"DATABASE_URL": "postgresql://u@127.0.0.1:5432/test"},
        prelude="import sys\nsys.modules['asyncpg'] = None",
    )
    assert one_error_line(done) == (
        "a PostgreSQL database_url needs the postgres extra (asyncpg not installed): "
        "pip install 'toolrelay[postgres]'"
    )


def test_version(tmp_path: Path) -> None:
    done = run_cli(tmp_path, "--version")
    assert (done.returncode, done.stdout) == (0, f"toolrelay {toolrelay.__version__}\n")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path, workers: str) -> None:
    """As docs/configuration.md says, with one worker too (uvicorn alone exits 3)."""
    import socket

    config = write(tmp_path, ROUTE + "\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        done = run_cli(
            tmp_path,
            "serve",
            "--config",
            str(config),
            "--port",
            port,
            "--workers",
            workers,
            env={"TOOLRELAY_DATA_DIR": str(tmp_path / "data")},
        )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert lines[-1] == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
