"""Each route's timeouts, retries and response cap: from the file or the env, to the client.

The values reach the model client the registry builds (its `upstream` options), and a
route built from them times out as configured against a real server; bad values stop
`toolrelay serve` with one line naming the key and exit code 2.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.cli.test_startup_errors import one_error_line, run_cli, write
from tests.envs import load
from tests.patience import HANG
from toolrelay.adapters.models import OpenAIChat
from toolrelay.adapters.models.http import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_RETRY, Timeouts
from toolrelay.config.registry import build_registry
from toolrelay.config.route_http import parse_size
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ConfigError, ProviderError
from toolrelay.testing import FakeModelServer, SSEReply

ROUTE = '[[models]]\nname = "gpt"\nbase_url = "http://127.0.0.1:9/v1"\n'


def upstream_of(config: Path, env: dict[str, str] | None = None) -> OpenAIChat:
    registry = build_registry(load(config, env=env or {}))
    client = next(iter(registry.clients.values()))
    assert isinstance(client, OpenAIChat)
    return client


def test_defaults_are_the_clients_own(tmp_path: Path) -> None:
    upstream = upstream_of(write(tmp_path, ROUTE)).upstream
    assert upstream.timeouts == Timeouts()
    assert (upstream.retry.attempts, upstream.retry.backoff) == (
        DEFAULT_RETRY.attempts,
        DEFAULT_RETRY.backoff,
    )
    assert upstream.max_bytes == DEFAULT_MAX_RESPONSE_BYTES == 32 << 20


def test_a_file_route_sets_its_own(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        ROUTE + "timeouts = { connect = 2, first_byte = 600, idle = 30, total = 900 }\n"
        "retries = { attempts = 5, backoff = 1.5 }\n"
        'max_response_bytes = "64 MiB"\n',
    )
    upstream = upstream_of(config).upstream
    assert upstream.timeouts == Timeouts(connect=2, first_byte=600, idle=30, total=900)
    assert (upstream.retry.attempts, upstream.retry.backoff) == (5, 1.5)
    assert upstream.max_bytes == 64 << 20


def test_a_partial_table_keeps_the_other_defaults(tmp_path: Path) -> None:
    upstream = upstream_of(write(tmp_path, ROUTE + "timeouts = { first_byte = 5 }\n")).upstream
    assert upstream.timeouts == Timeouts(first_byte=5)


def test_env_routes_take_theirs_from_openai_and_ollama_vars(tmp_path: Path) -> None:
    env = {
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_TIMEOUTS": '{"first_byte": 600, "total": 1200}',
        "OPENAI_RETRIES": '{"attempts": 1}',
        "OPENAI_MAX_RESPONSE_BYTES": "1048576",
        "OLLAMA_BASE_URL": "http://127.0.0.1:9",
        "OLLAMA_TIMEOUTS": '{"idle": 900}',
    }
    registry = build_registry(load(None, env=env))
    openai, ollama = (c.upstream for c in registry.clients.values())  # type: ignore[attr-defined]
    assert openai.timeouts == Timeouts(first_byte=600, total=1200)
    assert openai.retry.attempts == 1
    assert openai.max_bytes == 1 << 20
    assert ollama.timeouts == Timeouts(idle=900)
    assert ollama.retry.attempts == DEFAULT_RETRY.attempts


def test_no_cap_is_zero() -> None:
    assert parse_size(0) == 0
    assert parse_size("500 KB") == 500_000
    assert parse_size("1.5kib") == 1536
    with pytest.raises(ValueError, match="must be a size"):
        parse_size("lots")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            "timeouts = { first_byte = 0 }",
            "models[0].timeouts.first_byte: input should be greater than 0",
        ),
        ("timeouts = { idle = -1 }", "models[0].timeouts.idle: input should be greater than 0"),
        ("timeouts = { read = 5 }", "models[0].timeouts.read: unknown key"),
        ('timeouts = { total = "soon" }', "models[0].timeouts.total: not a valid number"),
        (
            "retries = { attempts = 0 }",
            "models[0].retries.attempts: input should be greater than or equal to 1",
        ),
        (
            "retries = { backoff = -0.5 }",
            "models[0].retries.backoff: input should be greater than or equal to 0",
        ),
        (
            'max_response_bytes = "big"',
            "models[0].max_response_bytes: must be a size like 33554432, '32 MiB' or "
            "'500 KB' (got 'big')",
        ),
    ],
)
def test_bad_values_are_one_config_error(tmp_path: Path, table: str, message: str) -> None:
    config = write(tmp_path, ROUTE + table + "\n")
    with pytest.raises(ConfigError) as info:
        load(config, env={})
    assert str(info.value) == f"{config}: {message}"


def test_bad_env_json_names_the_variable(tmp_path: Path) -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OLLAMA_BASE_URL": "http://o:1"}
    with pytest.raises(ConfigError) as info:
        load(None, env={**env, "OLLAMA_RETRIES": "{attempts: 2}"})
    assert str(info.value) == 'OLLAMA_RETRIES: not valid JSON (a table like {"first_byte": 600})'
    with pytest.raises(ConfigError) as info:
        load(None, env={**env, "OPENAI_TIMEOUTS": '{"connect": 0}'})
    assert str(info.value) == (
        "OPENAI_TIMEOUTS: models[0].timeouts.connect: input should be greater than 0"
    )


def test_serve_stops_with_one_line_and_exit_2(tmp_path: Path) -> None:
    config = write(tmp_path, ROUTE + "timeouts = { first_byte = 0 }\n")
    message = one_error_line(run_cli(tmp_path, "serve", "--config", str(config)))
    assert message == f"{config}: models[0].timeouts.first_byte: input should be greater than 0"
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_RETRIES": "[1"}
    message = one_error_line(run_cli(tmp_path, "serve", env=env))
    assert message == 'OPENAI_RETRIES: not valid JSON (a table like {"first_byte": 600})'


@pytest.mark.anyio
async def test_a_routes_first_byte_timeout_ends_a_silent_call(tmp_path: Path) -> None:
    """The value reaches the wire: the server holds its headers for an hour."""
    with FakeModelServer() as server:
        server.script(SSEReply([{"a": 1}], ttfb_delay=3600))
        config = write(
            tmp_path,
            f'[[models]]\nname = "gpt"\nbase_url = "{server.base_url}"\n'
            "timeouts = { first_byte = 0.3 }\nretries = { attempts = 1 }\n",
        )
        client = upstream_of(config)
        request = ModelRequest(messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(ProviderError) as info:
            async with asyncio.timeout(HANG):
                await client.open(request)
        await client.aclose()
    assert info.value.message == "Model server timed out: no data for 0.3 s"
