"""load_settings: defaults, file + env precedence, conveniences, and every ConfigError."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envs import load
from toolrelay.config.settings import LimitsConfig, ModelRoute
from toolrelay.engine.limits import RunLimits
from toolrelay.errors import ConfigError

ROUTE = """
[[models]]
name = "gpt"
base_url = "https://api.example.com/v1/"
model = "gpt-4o-mini"
api_key_env = "EXAMPLE_KEY"
"""


def write(tmp_path: Path, text: str, name: str = "toolrelay.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(config: Path | None = None, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load(config, env=env or {})
    return str(info.value)


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no ./toolrelay.toml here
    s = load(env={"HOME": str(tmp_path)})
    assert (s.host, s.port) == ("127.0.0.1", 8080)
    assert s.data_dir == Path.home() / ".toolrelay"
    assert s.database_url == f"sqlite+aiosqlite:///{s.data_dir}/toolrelay.db"
    assert s.events_url is None
    assert s.admin_key is None
    assert s.models == [] and s.tools == [] and s.filters == [] and s.cors_origins == []
    assert s.task_model is None
    assert s.max_body_bytes == 10 * 1024 * 1024
    assert s.limits == LimitsConfig()


def test_default_config_file_in_cwd_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "port = 9001\n")
    monkeypatch.chdir(tmp_path)
    assert load(env={}).port == 9001


def test_config_path_from_env(tmp_path: Path) -> None:
    path = write(tmp_path, "port = 9002\n", "other.toml")
    assert load(env={"TOOLRELAY_CONFIG": str(path)}).port == 9002


def test_file_values_and_route_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, 'host = "0.0.0.0"\ntask_model = "gpt"\n' + ROUTE)
    s = load(path, env={})
    assert s.host == "0.0.0.0"
    assert s.task_model == "gpt"
    assert s.models == [
        ModelRoute(
            name="gpt",
            base_url="https://api.example.com/v1",
            model="gpt-4o-mini",
            api_key_env="EXAMPLE_KEY",
        )
    ]
    route = s.models[0]
    assert (route.kind, route.params, route.tools) == ("openai-chat", {}, None)
    assert (route.reasoning_replay, route.stateful) == ("none", False)


def test_route_model_defaults_to_name(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[[models]]\nname = "llama3.2"\nkind = "ollama"\nbase_url = "http://h:11434"\n'
    )
    assert load(path, env={}).models[0].model == "llama3.2"


def test_env_wins_over_file(tmp_path: Path) -> None:
    path = write(tmp_path, "port = 9000\n[limits]\nmax_iterations = 10\ntool_timeout = 5.0\n")
    s = load(
        path,
        env={
            "TOOLRELAY_PORT": "9100",
            "TOOLRELAY_HOST": "::1",
            "TOOLRELAY_LIMITS__MAX_ITERATIONS": "3",
            "TOOLRELAY_ADMIN_KEY": "secret",
            "TOOLRELAY_DATA_DIR": str(tmp_path / "data"),
        },
    )
    assert (s.port, s.host, s.admin_key) == (9100, "::1", "secret")
    assert s.data_dir == tmp_path / "data"
    assert s.database_url == f"sqlite+aiosqlite:///{tmp_path / 'data'}/toolrelay.db"
    # the nested env var replaced one key of the file's [limits], not the table
    assert (s.limits.max_iterations, s.limits.tool_timeout) == (3, 5.0)


def test_env_list_values_are_json(tmp_path: Path) -> None:
    s = load(env={"TOOLRELAY_CORS_ORIGINS": '["http://a", "http://b"]'})
    assert s.cors_origins == ["http://a", "http://b"]


def test_limits_to_run_limits() -> None:
    config = LimitsConfig(max_iterations=4, on_cap="final_answer", max_concurrency=2)
    limits = config.to_run_limits()
    assert isinstance(limits, RunLimits)
    assert (limits.max_iterations, limits.on_cap, limits.max_concurrency) == (4, "final_answer", 2)
    assert limits.tool_timeout == RunLimits().tool_timeout


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:p@db:5432/app", "postgresql+asyncpg://u:p@db:5432/app"),
        ("postgres://u@db/app", "postgresql+asyncpg://u@db/app"),
        ("postgresql+asyncpg://u@db/app", "postgresql+asyncpg://u@db/app"),
        ("sqlite+aiosqlite:///tmp/x.db", "sqlite+aiosqlite:///tmp/x.db"),
    ],
)
def test_database_url_rewriting(url: str, expected: str) -> None:
    assert load(env={"DATABASE_URL": url}).database_url == expected
    assert load(env={"TOOLRELAY_DATABASE_URL": url}).database_url == expected


def test_toolrelay_database_url_wins_over_plain() -> None:
    env = {"DATABASE_URL": "postgres://plain/db", "TOOLRELAY_DATABASE_URL": "postgres://ours/db"}
    assert load(env=env).database_url == "postgresql+asyncpg://ours/db"


def test_events_url_from_redis_url() -> None:
    assert load(env={"REDIS_URL": "redis://r:6379/0"}).events_url == "redis://r:6379/0"
    env = {"REDIS_URL": "redis://plain", "TOOLRELAY_EVENTS_URL": "redis://ours"}
    assert load(env=env).events_url == "redis://ours"


def test_events_url_may_name_a_bus_socket_by_its_absolute_path() -> None:
    url = "ipc:///srv/toolrelay/bus.sock"
    assert load(env={"TOOLRELAY_EVENTS_URL": url}).events_url == url
    assert "ipc:///abs/path.sock" in config_error(env={"TOOLRELAY_EVENTS_URL": "ipc://bus.sock"})


def test_openai_convenience_route() -> None:
    env = {"OPENAI_BASE_URL": "http://localhost:8000/v1", "OPENAI_API_KEY": "sk-x"}
    (route,) = load(env=env).models
    assert route == ModelRoute(
        name="gpt-4o-mini",
        kind="openai-chat",
        base_url="http://localhost:8000/v1",
        model="gpt-4o-mini",
        api_key_env="OPENAI_API_KEY",
    )
    env["OPENAI_MODEL"] = "qwen3"
    (route,) = load(env=env).models
    assert (route.name, route.model) == ("qwen3", "qwen3")


def test_ollama_convenience_route() -> None:
    env = {"OLLAMA_BASE_URL": "http://localhost:11434", "OLLAMA_MODEL": "qwen3:8b"}
    (route,) = load(env=env).models
    assert route == ModelRoute(
        name="qwen3:8b", kind="ollama", base_url="http://localhost:11434", model="qwen3:8b"
    )


def test_convenience_routes_only_when_none_configured(tmp_path: Path) -> None:
    path = write(tmp_path, ROUTE)
    env = {"OPENAI_BASE_URL": "http://x/v1", "OPENAI_API_KEY": "k", "OLLAMA_BASE_URL": "http://o"}
    assert [r.name for r in load(path, env=env).models] == ["gpt"]
    assert [r.name for r in load(env=env).models] == ["gpt-4o-mini", "llama3.2"]


def test_relative_tool_and_filter_paths_resolve_against_config_dir(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    path = write(
        conf,
        'tools = ["tools.py", "sub/more.py", "my_pkg.tools"]\n'
        'filters = ["filters.py:Filter", "my_pkg.filters:f", "http://p:9099/outlet"]\n',
    )
    s = load(path, env={})
    assert s.tools == [str(conf / "tools.py"), str(conf / "sub/more.py"), "my_pkg.tools"]
    assert s.filters == [
        f"{conf / 'filters.py'}:Filter",
        "my_pkg.filters:f",
        "http://p:9099/outlet",
    ]


def test_api_key_in_file_is_allowed_and_hidden(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nname = "m"\nbase_url = "http://h"\napi_key = "sk-dev"\n')
    s = load(path, env={})
    assert s.models[0].api_key == "sk-dev"
    assert "sk-dev" not in repr(s.models[0])


# --- errors ---------------------------------------------------------------------------------


def test_bad_kind_names_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nname = "m"\nkind = "foo"\nbase_url = "http://h"\n')
    assert config_error(path) == (
        f"{path}: models[0].kind: must be one of "
        "'openai-chat', 'openai-responses', 'ollama' (got 'foo')"
    )


def test_bad_env_integer_names_the_var() -> None:
    assert config_error(env={"TOOLRELAY_PORT": "eighty"}) == "TOOLRELAY_PORT: not a valid integer"


def test_bad_nested_env_names_the_var() -> None:
    message = config_error(env={"TOOLRELAY_LIMITS__MAX_ITERATIONS": "0"})
    assert message == (
        "TOOLRELAY_LIMITS__MAX_ITERATIONS: must be a positive integer or -1 for no cap (got 0)"
    )


def test_bad_file_integer_names_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, '[limits]\nmax_concurrency = "many"\n')
    assert config_error(path) == f"{path}: limits.max_concurrency: not a valid integer"


def test_env_json_error_names_the_var() -> None:
    assert config_error(env={"TOOLRELAY_MODELS": "[{"}) == "TOOLRELAY_MODELS: not valid JSON"


def test_error_inside_env_json_names_var_and_key() -> None:
    env = {"TOOLRELAY_MODELS": '[{"name": "m", "kind": "x", "base_url": "http://h"}]'}
    assert config_error(env=env).startswith("TOOLRELAY_MODELS: models[0].kind: must be one of")


def test_toml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, 'port = 8080\nhost = "unterminated\n')
    message = config_error(path)
    assert message.startswith(f"{path}: invalid TOML: ")
    assert "line 2" in message


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    assert config_error(missing) == f"{missing}: config file not found"
    assert config_error(env={"TOOLRELAY_CONFIG": str(missing)}) == (
        f"{missing}: config file not found"
    )


def test_duplicate_route_names(tmp_path: Path) -> None:
    path = write(tmp_path, ROUTE + ROUTE)
    assert config_error(path) == f"{path}: models: duplicate route name 'gpt'"


def test_task_model_must_name_a_route(tmp_path: Path) -> None:
    path = write(tmp_path, 'task_model = "missing"\n' + ROUTE)
    assert (
        config_error(path)
        == f"{path}: task_model: unknown route 'missing' (routes: 'gpt', or 'local')"
    )


def test_unknown_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "prot = 1\n")
    assert config_error(path) == f"{path}: prot: unknown key"


def test_missing_base_url(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nname = "m"\n')
    assert config_error(path) == f"{path}: models[0].base_url: required"


def test_base_url_must_be_http(tmp_path: Path) -> None:
    path = write(tmp_path, '[[models]]\nname = "m"\nbase_url = "localhost:8000"\n')
    assert config_error(path) == (
        f"{path}: models[0].base_url: must start with http:// or https:// (got 'localhost:8000')"
    )


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("stateful = true\n", "stateful is only for kind 'openai-responses'"),
        (
            'kind = "ollama"\nreasoning_replay = "reasoning_content"\n',
            "reasoning_replay 'reasoning_content' is not for kind 'ollama'",
        ),
        (
            'reasoning_replay = "thinking"\n',
            "reasoning_replay 'thinking' is not for kind 'openai-chat'",
        ),
        (
            'kind = "openai-responses"\nreasoning_replay = "think_tags"\n',
            "reasoning_replay 'think_tags' is not for kind 'openai-responses'",
        ),
        ('api_key = "k"\napi_key_env = "K"\n', "set api_key_env or api_key, not both"),
    ],
)
def test_route_options_must_fit_kind(tmp_path: Path, extra: str, problem: str) -> None:
    path = write(tmp_path, f'[[models]]\nname = "m"\nbase_url = "http://h"\n{extra}')
    assert config_error(path) == f"{path}: models[0]: {problem}"


def test_every_problem_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, 'port = "x"\non = 1\n')
    assert config_error(path).splitlines() == [
        f"{path}: port: not a valid integer",
        f"{path}: on: unknown key",
    ]


# --- the Open WebUI iteration cap ------------------------------------------------------------


def test_iteration_cap_from_its_open_webui_name() -> None:
    env = {"CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS": "1"}
    assert load(env=env).limits.to_run_limits().max_iterations == 1
    env = {"CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS": "-1"}
    assert load(env=env).limits.max_iterations == -1


def test_iteration_cap_precedence(tmp_path: Path) -> None:
    """TOOLRELAY_LIMITS__MAX_ITERATIONS, then the file, then the Open WebUI name."""
    path = write(tmp_path, "[limits]\nmax_iterations = 7\n")
    cap = {"CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS": "3"}
    assert load(path, env=cap).limits.max_iterations == 7
    ours = {**cap, "TOOLRELAY_LIMITS__MAX_ITERATIONS": "5"}
    assert load(path, env=ours).limits.max_iterations == 5
    other = write(tmp_path, "[limits]\ntool_timeout = 5.0\n", "other.toml")
    limits = load(other, env=cap).limits
    assert (limits.max_iterations, limits.tool_timeout) == (3, 5.0)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("abc", "not a valid integer"), ("0", "must be a positive integer or -1 for no cap (got 0)")],
)
def test_bad_iteration_cap_names_the_var(raw: str, problem: str) -> None:
    message = config_error(env={"CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS": raw})
    assert message == f"CHAT_RESPONSE_MAX_TOOL_CALL_ITERATIONS: {problem}"


def test_bad_convenience_route_names_the_var() -> None:
    message = config_error(env={"OPENAI_BASE_URL": "localhost:8000/v1"})
    assert message == (
        "OPENAI_BASE_URL: models[0].base_url: "
        "must start with http:// or https:// (got 'localhost:8000/v1')"
    )


def test_plain_env_error_names_the_plain_var() -> None:
    assert config_error(env={"DATABASE_URL": "mysql://u:secret@h/db"}) == (
        "DATABASE_URL: must be a sqlite:// or postgresql:// URL (got 'mysql':…)"
    )
    assert config_error(env={"REDIS_URL": "memcached://h"}) == (
        "REDIS_URL: must be 'memory', an ipc:///abs/path.sock URL or a redis:// URL "
        "(got 'memcached':…)"
    )


def test_file_value_under_an_env_table_names_the_winner(tmp_path: Path) -> None:
    """The env var set the table, so it is the place to look, not the file."""
    path = write(tmp_path, "[limits]\ntool_timeout = 5.0\n")
    message = config_error(path, env={"TOOLRELAY_LIMITS": '{"max_concurrency": 0}'})
    assert message == (
        "TOOLRELAY_LIMITS: limits.max_concurrency: input should be greater than or equal to 1"
    )


def test_sqlite_url_gets_the_async_driver() -> None:
    assert load(env={"DATABASE_URL": "sqlite:///x.db"}).database_url == "sqlite+aiosqlite:///x.db"


@pytest.mark.parametrize(
    ("extra", "replay"),
    [
        ('kind = "ollama"\n', "thinking"),
        ('kind = "ollama"\nreasoning_replay = "none"\n', "none"),
        ('kind = "ollama"\nreasoning_replay = "think_tags"\n', "think_tags"),
        ("", "none"),
        ('kind = "openai-responses"\n', "none"),
    ],
)
def test_reasoning_replay_defaults_per_kind(tmp_path: Path, extra: str, replay: str) -> None:
    path = write(tmp_path, f'[[models]]\nname = "m"\nbase_url = "http://h"\n{extra}')
    (route,) = load(path, env={}).models
    assert route.reasoning_replay == replay
