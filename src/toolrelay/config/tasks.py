"""Background tasks from settings: which run, on which route, with which prompt.

`[tasks.<name>]` (title, tags, follow_ups) turns a task off, gives it a route of
its own and a prompt (inline or from a file); unset fields fall back to
`task_model` and the built-in prompts (`engine.tasks.PROMPTS`). Prompt files are
read once, here, when the registry is built: a missing or unreadable one is a
`ConfigError` naming the file, before the server listens.

A task's route may be `local`, the embedded model, which `toolrelay serve`
starts for it even when other routes are configured. If that route is not
there when a turn ends (the `[local]` extra is missing), the task does not run
and the log says why, once: a chat's title then falls back to its first message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolrelay.config.settings import Settings, TaskConfig
from toolrelay.engine.interfaces import ModelClient
from toolrelay.engine.tasks import TASK_NAMES, BackgroundTask, TaskName
from toolrelay.errors import ConfigError

__all__ = ["TaskSetup", "task_setup"]

log = logging.getLogger("toolrelay.config")


@dataclass
class TaskSetup:
    """The enabled tasks, each with its route (None: no model) and prompt (None: built-in)."""

    routes: dict[TaskName, str | None]
    prompts: dict[TaskName, str] = field(default_factory=dict)
    _missing: set[str] = field(default_factory=set, repr=False)

    def tasks(self, clients: Mapping[str, ModelClient]) -> tuple[BackgroundTask, ...]:
        """One `BackgroundTask` per enabled task, its client picked from `clients`."""
        return tuple(
            BackgroundTask(name, self._client(route, clients), self.prompts.get(name))
            for name, route in self.routes.items()
        )

    def _client(self, route: str | None, clients: Mapping[str, ModelClient]) -> ModelClient | None:
        if route is None:
            return None
        client = clients.get(route)
        if client is None and route not in self._missing:
            self._missing.add(route)
            log.warning("background tasks on route %r do not run: it is not served", route)
        return client


def task_setup(settings: Settings) -> TaskSetup:
    """The tasks of `settings`, prompt files read (`ConfigError` when one cannot be)."""
    folder = settings.config_file.parent if settings.config_file is not None else Path.cwd()
    routes: dict[TaskName, str | None] = {}
    prompts: dict[TaskName, str] = {}
    for name in TASK_NAMES:
        task: TaskConfig = getattr(settings.tasks, name)
        if not task.enabled:
            continue
        routes[name] = task.model or settings.task_model
        prompt = task.prompt if task.prompt_file is None else _read(name, folder, task.prompt_file)
        if prompt is not None:
            prompts[name] = prompt
    return TaskSetup(routes, prompts)


def _read(name: str, folder: Path, path: Path) -> str:
    full = path if path.is_absolute() else folder / path
    try:
        text = full.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"tasks.{name}.prompt_file: cannot read {full}: {exc}") from None
    if not text:
        raise ConfigError(f"tasks.{name}.prompt_file: {full} is empty")
    return text
