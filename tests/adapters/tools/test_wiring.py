"""Where users turn tool servers on: `[[tool_servers]]`, per-route selection, /api/tools, the CLI."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from tests.adapters.tools.conftest import TEST_SERVER
from tests.server.conftest import ADMIN_KEY, ServerThread
from toolrelay.cli.main import app
from toolrelay.config import build_registry, load_settings
from toolrelay.config.settings import ModelRoute, Settings
from toolrelay.config.tool_servers import ToolServer
from toolrelay.errors import ConfigError
from toolrelay.testing import FakeModelServer, SSEReply, ToolCallSpec
from toolrelay.testing.wire import chat_chunks

pytestmark = pytest.mark.anyio

OWUI = Path(__file__).with_name("owui_files")


def config_text(upstream: str) -> str:
    return f"""
[[models]]
name = "all"
base_url = "{upstream}"
model = "m"

[[models]]
name = "picked"
base_url = "{upstream}"
model = "m"
tools = ["weather", "add"]

[[tool_servers]]
name = "ours"
kind = "mcp-stdio"
command = "{sys.executable}"
args = ["{TEST_SERVER}", "stdio"]
allow = ["add", "pid"]

[[tool_servers]]
name = "weather"
kind = "python"
path = "{OWUI / "weather_tool.py"}"
valves = {{ units = "imperial" }}

[[tool_servers]]
name = "broken"
kind = "mcp-stdio"
command = "/nonexistent/server"
"""


@pytest.fixture
def upstream() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def config(tmp_path: Path, upstream: FakeModelServer) -> Path:
    path = tmp_path / "toolrelay.toml"
    path.write_text(config_text(upstream.base_url))
    return path


def test_tool_server_tables_are_checked_per_kind() -> None:
    with pytest.raises(ValueError, match="needs 'command'"):
        ToolServer(name="x", kind="mcp-stdio")
    with pytest.raises(ValueError, match="needs 'url'"):
        ToolServer(name="x", kind="openapi")
    with pytest.raises(ValueError, match="http"):
        ToolServer(name="x", kind="mcp-http", url="ftp://host")


async def test_registry_selects_tools_per_route_by_name_or_server(config: Path) -> None:
    registry = build_registry(load_settings(config))
    try:
        assert set(registry.sources) == {"ours", "weather", "broken"}
        from toolrelay.engine.toolbox import Toolbox

        picked = Toolbox(sources=registry.tools_for("picked"))  # type: ignore[arg-type]
        assert sorted(await picked.tools()) == ["add", "get_weather"]
        everything = Toolbox(sources=registry.tools_for("all"))  # type: ignore[arg-type]
        assert sorted(await everything.tools()) == [
            "add",
            "calculator",  # the built-in tools (builtin_tools = true by default)
            "get_time",
            "get_weather",
            "pid",
        ]
        # a turn's toolbox closing its views leaves the shared server running
        await picked.aclose()
        await everything.aclose()
        assert registry.sources["ours"].connection.alive  # type: ignore[attr-defined]
    finally:
        await registry.aclose()
    assert not registry.sources["ours"].connection.alive  # type: ignore[attr-defined]


def test_duplicate_server_names_are_a_config_error(tmp_path: Path) -> None:
    server = {"name": "a", "kind": "python", "path": str(OWUI / "weather_tool.py")}
    settings = Settings(tool_servers=[server, server], data_dir=tmp_path)
    with pytest.raises(ConfigError, match="used twice"):
        build_registry(settings)


def test_api_tools_lists_every_tool_with_source_and_status(
    tmp_path: Path, config: Path, upstream: FakeModelServer
) -> None:
    settings = load_settings(config).model_copy(
        update={
            "data_dir": tmp_path / "data",
            "admin_key": ADMIN_KEY,
            "database_url": f"sqlite+aiosqlite:///{tmp_path / 'data' / 'db.sqlite'}",
        }  # model_copy runs no validator: the url would stay the home directory's database
    )
    with ServerThread(settings) as base_url:
        import httpx2

        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        with httpx2.Client(base_url=base_url, headers=headers, timeout=120) as client:
            assert (
                client.get("/api/tools", headers={"Authorization": "Bearer nope"}).status_code
                == 401
            )
            body = client.get("/api/tools").json()
            upstream.script(
                SSEReply(chat_chunks(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3})])),
                SSEReply(chat_chunks(text="5")),
            )
            answer = client.post(
                "/v1/chat/completions",
                json={"model": "picked", "messages": [{"role": "user", "content": "2+3?"}]},
            )
            bad = client.put("/api/tools/weather/user-valves", json={"city_alias": [1]})
            unknown = client.put("/api/tools/ours/user-valves", json={})
            saved = client.put("/api/tools/weather/user-valves", json={"city_alias": "home"})
            upstream.script(
                SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_weather", {"city": "Oslo"})])),
                SSEReply(chat_chunks(text="ok")),
            )
            client.post(
                "/v1/chat/completions",
                json={"model": "picked", "messages": [{"role": "user", "content": "weather?"}]},
            )
    tools = {(t["name"], t["source"], t["status"]) for t in body["data"]}
    assert tools == {
        ("add", "ours", "ok"),
        ("pid", "ours", "ok"),
        ("get_weather", "weather", "ok"),
        ("get_time", "builtin", "ok"),
        ("calculator", "builtin", "ok"),
    }
    servers = {s["name"]: s for s in body["servers"]}
    assert servers["broken"]["state"] == "error" and "failed to start" in servers["broken"]["error"]
    assert servers["ours"]["state"] == "ok"
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "5"
    fed_back = upstream.requests[1].json["messages"][-1]
    assert fed_back == {"role": "tool", "tool_call_id": fed_back["tool_call_id"], "content": "5"}
    assert bad.status_code == 400 and "UserValves" in bad.text, bad.text
    assert unknown.status_code == 404
    assert saved.status_code == 200
    weather = upstream.requests[3].json["messages"][-1]["content"]
    assert weather == "Oslo (home): sunny, 70°F, key=none"  # this user's valves, the file's valves


def test_cli_tools_list(config: Path) -> None:
    result = CliRunner().invoke(app, ["tools", "list", "--config", str(config)])
    assert result.exit_code == 1, result.output  # the broken server is not ok
    assert "get_weather" in result.stdout and "pid" in result.stdout
    assert "broken" in result.stdout and "failed to start" in result.stdout


def test_cli_chat_with_mcp_openwebui_file_flags(upstream: FakeModelServer) -> None:
    upstream.script(
        SSEReply(
            chat_chunks(
                tool_calls=[
                    ToolCallSpec("add", {"a": 20, "b": 22}),
                    ToolCallSpec("get_weather", {"city": "Oslo"}),
                ]
            )
        ),
        SSEReply(chat_chunks(text="done")),
    )
    mcp = f"{sys.executable} {TEST_SERVER} stdio"
    args = ["chat", "go", "--base-url", upstream.base_url, "--model", "m", "--json", "--no-save"]
    args += ["--mcp", mcp, "--tools", str(OWUI / "weather_tool.py")]
    result = CliRunner().invoke(app, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    events: list[dict[str, Any]] = [orjson.loads(line) for line in result.stdout.splitlines()]
    outputs = [
        e["data"]["item"]["output"]
        for e in events
        if e["type"] == "response.output_item.done"
        and e["data"]["item"]["type"] == "function_call_output"
    ]
    assert sorted(outputs) == ["42", "Oslo: sunny, 21°C, key=none"]  # done in finishing order
    offered = {t["function"]["name"] for t in upstream.requests[0].json["tools"]}
    assert {"add", "get_weather", "slow"} <= offered


def test_models_route_selection_is_kept_in_settings() -> None:
    route = ModelRoute(name="r", base_url="http://x", model="m", tools=["ours", "add"])
    assert route.tools == ["ours", "add"]


def test_filter_files_in_config_run_in_priority_order(tmp_path: Path) -> None:
    refs = [f"{OWUI / 'word_limit_filter.py'}:Filter", f"{OWUI / 'prefix_toggle_filter.py'}:Filter"]
    registry = build_registry(Settings(filters=refs, data_dir=tmp_path))
    assert [f.id for f in registry.filters] == ["prefix_toggle_filter", "word_limit_filter"]


async def test_a_config_filter_with_stream_sees_every_chunk(
    tmp_path: Path, upstream: FakeModelServer
) -> None:
    from toolrelay import Relay

    route = ModelRoute(name="r", base_url=upstream.base_url, model="m")
    ref = f"{OWUI / 'word_limit_filter.py'}:Filter"
    registry = build_registry(Settings(models=[route], filters=[ref], data_dir=tmp_path))
    upstream.script(SSEReply(chat_chunks(text=["oh ", "darn"])))
    relay = Relay(registry.client_for("r"), filters=registry.filters, tasks=())
    try:
        assert (await relay.run("hi")).text == "oh d**n [checked]"  # stream, then outlet
    finally:
        await registry.aclose()
