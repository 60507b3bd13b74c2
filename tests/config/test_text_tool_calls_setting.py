"""`text_tool_calls` and `tool_choice_step` on a model route: off unless asked for, on for
the `local` route."""

from __future__ import annotations

from pathlib import Path

from tests.envs import load
from toolrelay.config.settings import LOCAL_ROUTE, ModelRoute


def route(name: str, **options: object) -> ModelRoute:
    return ModelRoute(name=name, base_url="http://127.0.0.1:8080", **options)


def test_off_for_any_route_unless_asked() -> None:
    assert route("gpt").text_tool_calls is False
    assert route("gpt", text_tool_calls=True).text_tool_calls is True


def test_on_for_the_local_route_unless_turned_off() -> None:
    assert LOCAL_ROUTE == "local"
    assert route("local").text_tool_calls is True
    assert route("local", text_tool_calls=False).text_tool_calls is False


def test_the_tool_choice_step_is_on_for_the_local_route_only() -> None:
    assert (route("gpt").tool_choice_step, route("gpt").max_tools_per_call) == (False, 2)
    assert route("local").tool_choice_step is True
    assert route("local", tool_choice_step=False).tool_choice_step is False
    assert route("gpt", tool_choice_step=True, max_tools_per_call=1).max_tools_per_call == 1


def test_read_from_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "toolrelay.toml"
    path.write_text(
        '[[models]]\nname = "qwen"\nbase_url = "http://127.0.0.1:8080"\ntext_tool_calls = true\n'
        '[[models]]\nname = "gpt"\nbase_url = "http://127.0.0.1:8081"\n',
        encoding="utf-8",
    )
    assert [r.text_tool_calls for r in load(path, env={}).models] == [True, False]
