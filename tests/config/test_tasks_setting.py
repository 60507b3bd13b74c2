"""`[tasks]`: each background task's switch, route and prompt, and the errors it can give."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.envs import load
from toolrelay.config import ModelRoute, Settings, build_registry
from toolrelay.config.local import wants_local
from toolrelay.engine.tasks import PROMPTS
from toolrelay.errors import ConfigError

ROUTES = """
[[models]]
name = "gpt"
base_url = "http://127.0.0.1:9/v1"
[[models]]
name = "mini"
base_url = "http://127.0.0.1:9/v1"
"""
GPT = ModelRoute(name="gpt", base_url="http://127.0.0.1:9/v1", model="gpt")


def write(folder: Path, text: str) -> Path:
    path = folder / "toolrelay.toml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        build_registry(load(path, env=env or {}), env={})
    return str(info.value)


def test_each_task_gets_its_route_and_prompt(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "tags.txt").write_text("  Tags please, as JSON.\n")
    path = write(
        tmp_path,
        'task_model = "gpt"\n' + ROUTES + '[tasks.title]\nmodel = "mini"\nprompt = "Title!"\n'
        '[tasks.tags]\nprompt_file = "prompts/tags.txt"\n[tasks.follow_ups]\nenabled = false\n',
    )
    registry = build_registry(load(path, env={}), env={})
    tasks = {t.name: t for t in registry.background_tasks()}
    assert list(tasks) == ["title", "tags"]  # follow-ups are off
    assert tasks["title"].model is registry.clients["mini"]
    assert tasks["tags"].model is registry.clients["gpt"]
    assert (tasks["title"].prompt, tasks["tags"].prompt) == ("Title!", "Tags please, as JSON.")


def test_the_environment_sets_a_task(tmp_path: Path) -> None:
    path = write(tmp_path, ROUTES)
    env = {"TOOLRELAY_TASKS__TITLE__MODEL": "mini", "TOOLRELAY_TASKS__TITLE__PROMPT": "Env."}
    registry = build_registry(load(path, env=env), env={})
    title, tags, follow_ups = registry.background_tasks()
    assert (title.model, title.prompt) == (registry.clients["mini"], "Env.")
    assert (tags.model, tags.prompt) == (None, None)  # no task_model: tags and follow-ups off
    assert follow_ups.model is None and set(PROMPTS) == {"title", "tags", "follow_ups"}


def test_a_task_route_must_exist(tmp_path: Path) -> None:
    path = write(tmp_path, ROUTES + '[tasks.tags]\nmodel = "nope"\n')
    assert error_of(path) == (
        f"{path}: tasks: tags.model: unknown route 'nope' (routes: 'gpt', 'mini', or 'local')"
    )


def test_one_prompt_per_task(tmp_path: Path) -> None:
    path = write(tmp_path, ROUTES + '[tasks.title]\nprompt = "a"\nprompt_file = "b.txt"\n')
    assert "set prompt or prompt_file, not both" in error_of(path)


def test_a_missing_or_empty_prompt_file_stops_the_start(tmp_path: Path) -> None:
    path = write(tmp_path, ROUTES + '[tasks.title]\nprompt_file = "gone.txt"\n')
    assert error_of(path).startswith(f"tasks.title.prompt_file: cannot read {tmp_path}/gone.txt")
    (tmp_path / "blank.txt").write_text("\n \n")
    path = write(tmp_path, ROUTES + '[tasks.title]\nprompt_file = "blank.txt"\n')
    assert error_of(path) == f"tasks.title.prompt_file: {tmp_path}/blank.txt is empty"


def test_the_embedded_model_is_served_for_tasks_beside_routes(tmp_path: Path) -> None:
    base = {"data_dir": tmp_path, "models": [GPT]}
    assert not wants_local(Settings(**base))  # type: ignore[arg-type]
    assert wants_local(Settings(**base, task_model="local"))  # type: ignore[arg-type]
    titled = Settings(**base, tasks={"title": {"model": "local"}})  # type: ignore[arg-type]
    assert wants_local(titled)
    off = Settings(**base, tasks={"title": {"model": "local", "enabled": False}})  # type: ignore[arg-type]
    assert not wants_local(off)
    assert not wants_local(Settings(**base, task_model="local", local=False))  # type: ignore[arg-type]
    assert not wants_local(Settings(**base, task_model="local"), enabled=False)  # type: ignore[arg-type]
    own = ModelRoute(name="local", base_url="http://127.0.0.1:9/v1", model="mine")
    assert not wants_local(Settings(data_dir=tmp_path, models=[own], task_model="local"))


def test_a_task_route_that_is_not_served_is_skipped(tmp_path: Path) -> None:
    """`local` without the embedded model (its extra missing): no client, the task is off."""
    settings = Settings(data_dir=tmp_path, models=[GPT], task_model="local")
    registry = build_registry(settings, env={})
    assert registry.task_client is None
    assert all(t.model is None for t in registry.background_tasks())
