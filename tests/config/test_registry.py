"""build_registry: client classes per route, API keys, tools, filters, limits, the setup hint."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.envs import load
from toolrelay.adapters.models import Ollama, OpenAIChat, OpenAIResponses
from toolrelay.adapters.pipelines import HttpOutlet
from toolrelay.config.registry import Registry, build_registry, setup_hint
from toolrelay.config.settings import LimitsConfig, ModelRoute, Settings
from toolrelay.engine.interfaces import ToolContext
from toolrelay.errors import ConfigError

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

ROUTES = """
task_model = "mini"

[[models]]
name = "mini"
base_url = "http://chat.local:8000"
model = "qwen3-8b"
api_key_env = "CHAT_KEY"
params = { temperature = 0.1 }
reasoning_replay = "think_tags"
tools = ["calculator"]

[[models]]
name = "resp"
kind = "openai-responses"
base_url = "https://api.example.com/v1"
model = "o4-mini"
stateful = true

[[models]]
name = "llama"
kind = "ollama"
base_url = "http://ollama.local:11434"
params = { num_ctx = 4096 }
"""


def settings_from(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "toolrelay.toml"
    path.write_text(text, encoding="utf-8")
    return load(path, env={})


@pytest.fixture
def example_tools(tmp_path: Path) -> Path:
    """The shipped example tools, next to a config that names them relatively."""
    (tmp_path / "tools.py").write_text((EXAMPLES / "tools.py").read_text(), encoding="utf-8")
    return tmp_path


async def test_clients_per_route_kind(tmp_path: Path, example_tools: Path) -> None:
    settings = settings_from(tmp_path, 'tools = ["tools.py"]\n' + ROUTES)
    registry = build_registry(settings, env={"CHAT_KEY": "sk-chat"})
    try:
        chat = registry.client_for("mini")
        assert isinstance(chat, OpenAIChat)
        assert chat.url == "http://chat.local:8000/v1/chat/completions"
        assert (chat.model, chat.params, chat.reasoning_replay) == (
            "qwen3-8b",
            {"temperature": 0.1},
            "think_tags",
        )
        assert chat.upstream.headers == {"authorization": "Bearer sk-chat"}

        resp = registry.client_for("resp")
        assert isinstance(resp, OpenAIResponses)
        assert (resp.url, resp.model, resp.stateful) == (
            "https://api.example.com/v1/responses",
            "o4-mini",
            True,
        )
        assert resp.upstream.headers == {}

        llama = registry.client_for("llama")
        assert isinstance(llama, Ollama)
        assert (llama.url, llama.model, llama.params, llama.reasoning_replay) == (
            "http://ollama.local:11434/api/chat",
            "llama",
            {"num_ctx": 4096},
            "thinking",  # Ollama's default: gpt-oss-style tool loops need their thinking back
        )
        assert registry.client_for("mini") is chat  # cached
        assert registry.task_client is chat
    finally:
        await registry.aclose()


async def test_unknown_route_is_a_key_error(tmp_path: Path) -> None:
    registry = build_registry(settings_from(tmp_path, ""), env={})
    with pytest.raises(KeyError, match="unknown model 'nope'"):
        registry.client_for("nope")
    assert registry.task_client is None
    await registry.aclose()


def test_missing_api_key_env_names_the_var(tmp_path: Path, example_tools: Path) -> None:
    settings = settings_from(tmp_path, 'tools = ["tools.py"]\n' + ROUTES)
    with pytest.raises(ConfigError) as info:
        build_registry(settings, env={})
    assert str(info.value) == "model route 'mini': env var CHAT_KEY (api_key_env) is not set"


async def test_loads_example_tools_and_filters_by_route(
    tmp_path: Path, example_tools: Path
) -> None:
    settings = settings_from(tmp_path, 'tools = ["tools.py"]\n' + ROUTES)
    registry = build_registry(settings, env={"CHAT_KEY": "k"})
    assert sorted(registry.tools) == ["get_weather"]
    assert sorted(await registry.tools_for("mini").toolbox.tools()) == ["calculator"]  # built-in
    offered = await registry.tools_for("llama").toolbox.tools()
    assert sorted(offered) == ["calculator", "get_time", "get_weather"]  # the file's and built-ins
    assert offered["get_weather"] is registry.tools["get_weather"]
    assert registry.tools_for("mini") is registry.tools_for("mini")  # built once per route
    calc = offered["calculator"]
    assert await calc.call({"expression": "2 * (3 + 4)"}, ToolContext()) == "14"
    weather = await registry.tools["get_weather"].call({"city": "Paris"}, ToolContext())
    assert weather == {"city": "Paris", "conditions": "light rain", "temperature_c": 14}
    await registry.aclose()


def test_route_naming_an_unknown_tool(tmp_path: Path, example_tools: Path) -> None:
    settings = settings_from(
        tmp_path,
        'tools = ["tools.py"]\n[[models]]\nname = "m"\nbase_url = "http://h"\ntools = ["nope"]\n',
    )
    with pytest.raises(ConfigError) as info:
        build_registry(settings, env={})
    assert str(info.value) == "models[0].tools: unknown tool 'nope'"


def test_tool_file_that_fails_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n", encoding="utf-8")
    settings = settings_from(tmp_path, 'tools = ["broken.py"]\n')
    with pytest.raises(ConfigError) as info:
        build_registry(settings, env={})
    assert str(tmp_path / "broken.py") in str(info.value)
    assert "RuntimeError: boom" in str(info.value)


def test_same_tool_in_two_files(tmp_path: Path, example_tools: Path) -> None:
    (tmp_path / "again.py").write_text(
        "from toolrelay import tool\n\n@tool\ndef get_weather() -> str:\n    return 'sun'\n",
        encoding="utf-8",
    )
    settings = settings_from(tmp_path, 'tools = ["tools.py", "again.py"]\n')
    with pytest.raises(ConfigError) as info:
        build_registry(settings, env={})
    assert str(info.value) == (
        f"tools: 'get_weather' is defined by both {str(tmp_path / 'tools.py')!r} "
        f"and {str(tmp_path / 'again.py')!r}"
    )


FILTERS = """\
class Filter:
    def inlet(self, body):
        body["seen"] = True
        return body

def outlet(body):
    return body

lower = object()
"""


async def test_filters_from_file_module_and_url(tmp_path: Path) -> None:
    (tmp_path / "filters.py").write_text(FILTERS, encoding="utf-8")
    settings = settings_from(
        tmp_path,
        'filters = ["filters.py:Filter", "toolrelay.adapters.pipelines:HttpOutlet",'
        ' "http://pipelines:9099/f/filter/outlet"]\n',
    )
    # HttpOutlet needs a URL, so naming the class is not a usable filter
    with pytest.raises(ConfigError) as info:
        build_registry(settings, env={})
    assert str(info.value).startswith(
        "filters: 'toolrelay.adapters.pipelines:HttpOutlet' cannot be created: TypeError: "
    )
    settings = settings_from(
        tmp_path, 'filters = ["filters.py:Filter", "http://pipelines:9099/f/filter/outlet"]\n'
    )
    registry = build_registry(settings, env={})
    first, second = registry.filters
    assert type(first).__name__ == "OpenWebUIFilter"  # a file's `class Filter`, the Open WebUI way
    assert await first.inlet({}) == {"seen": True}
    assert isinstance(second, HttpOutlet)
    assert second.url == "http://pipelines:9099/f/filter/outlet"
    await registry.aclose()


def test_filter_from_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_filters_mod.py").write_text(FILTERS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = load(env={"TOOLRELAY_FILTERS": '["my_filters_mod:Filter"]'})
    (only,) = build_registry(settings, env={}).filters
    assert type(only).__module__ == "my_filters_mod"
    assert only.inlet({"a": 1}) == {"a": 1, "seen": True}


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ("filters.py:missing", "'filters.py' has no attribute 'missing'"),
        ("filters.py:lower", "has neither inlet nor outlet"),
        ("nope.py:Filter", "no such file"),
        ("no_such_module_xyz:f", "failed to load: ModuleNotFoundError"),
        ("just_a_name", "must be 'module:attr', 'file.py:attr' or a URL"),
    ],
)
def test_bad_filters(tmp_path: Path, ref: str, problem: str) -> None:
    (tmp_path / "filters.py").write_text(FILTERS, encoding="utf-8")
    settings = settings_from(tmp_path, f'filters = ["{ref}"]\n')
    with pytest.raises(ConfigError) as info:
        build_registry(settings, env={})
    assert str(info.value).startswith("filters: ")
    assert problem in str(info.value).replace(str(tmp_path) + "/", "")


async def test_limits_come_from_settings() -> None:
    settings = Settings(limits=LimitsConfig(max_iterations=7, tool_timeout=9.0))
    registry = build_registry(settings, env={})
    assert (registry.limits.max_iterations, registry.limits.tool_timeout) == (7, 9.0)
    await registry.aclose()


async def test_api_key_in_config_is_used() -> None:
    route = ModelRoute(name="dev", model="dev", base_url="http://h", api_key="sk-dev")
    registry = build_registry(Settings(models=[route]), env={})
    client = registry.client_for("dev")
    assert isinstance(client, OpenAIChat)
    assert client.upstream.headers == {"authorization": "Bearer sk-dev"}
    await registry.aclose()


def test_registry_is_a_plain_dataclass() -> None:
    assert Registry.__dataclass_fields__.keys() >= {"routes", "tools", "filters", "limits"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_setup_hint_names_every_way_to_add_a_model() -> None:
    hint = setup_hint()
    for needle in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OLLAMA_BASE_URL", "[[models]]"):
        assert needle in hint
    example = hint[hint.index("\n       [[models]]") :].strip().splitlines()
    assert len(example) == 5
    assert example[0] == "[[models]]"
    assert example[1].strip().startswith('name = "gpt"')


async def test_example_config_loads_and_builds() -> None:
    settings = load(EXAMPLES / "toolrelay.toml", env={})
    assert settings.route_names == ["gpt-mini", "o4-mini", "qwen", "llama"]
    assert settings.tools == [str(EXAMPLES / "tools.py")]
    registry = build_registry(settings, env={"OPENAI_API_KEY": "sk-x"})
    assert [type(registry.client_for(n)).__name__ for n in settings.route_names] == [
        "OpenAIChat",
        "OpenAIResponses",
        "OpenAIChat",
        "Ollama",
    ]
    assert sorted(registry.tools) == ["get_weather"]
    await registry.aclose()


async def test_api_key_in_the_config_is_used_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    route = ModelRoute(name="m", model="m", base_url="http://h", api_key="sk-dev")
    with caplog.at_level(logging.WARNING, logger="toolrelay.config"):
        registry = build_registry(Settings(models=[route]), env={})
    try:
        assert registry.client_for("m").upstream.headers == {"authorization": "Bearer sk-dev"}  # type: ignore[attr-defined]
        assert "api_key is set in the config" in caplog.text
        assert "sk-dev" not in caplog.text
    finally:
        await registry.aclose()


async def test_a_routes_context_tokens_reach_its_turns(tmp_path: Path) -> None:
    text = '[[models]]\nname = "small"\nbase_url = "http://m.local"\ncontext_tokens = 4096\n'
    text += '[[models]]\nname = "big"\nbase_url = "http://m.local"\n'
    registry = build_registry(settings_from(tmp_path, text), env={})
    from toolrelay.engine.relay import Relay

    small = Relay(registry.client_for("small"), registry.tools_for("small"))
    big = Relay(registry.client_for("big"), registry.tools_for("big"))
    assert (small.context_tokens, big.context_tokens) == (4096, None)
    await registry.aclose()
