"""A `Relay`'s options in three groups: how its model is driven, code, background tasks.

`Relay(model, tools, limits=…, store=…, filters=…, observer=…, model_options=…,
code=…, background=…)`: each group is one frozen value a front door builds once
per route (the server's from `[[models]]`, the CLI's from its flags). The older
form, every option its own keyword (`name=`, `tags=`, `code_interpreter=`, …), still
works: `LegacyOptions` names those keywords, and `grouped` folds them into the groups.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.engine.interfaces import ModelClient
from toolrelay.engine.interpreter import CodeRunner
from toolrelay.engine.tasks import BackgroundTask

DEFAULT_TASKS: tuple[str, ...] = ("title", "tags", "follow_ups")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelOptions:
    """How the relay's model is driven: its name, parameters, tags and tool-call quirks."""

    name: str | None = None
    """What saved turns record as their model (a server route's name)."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Sampling parameters sent with every call (a turn's own win)."""
    tags: TagConfig | None = TagConfig()
    """The inline tags looked for in the model's text (None: none)."""
    capabilities: Mapping[str, Any] | None = None
    """The model's settings that two of the code-interpreter gates read (SPEC R5) …"""
    builtin_tools: Mapping[str, Any] | None = None
    """… and its built-in tools, the other."""
    text_tool_calls: bool = False
    """The model writes its tool calls as JSON text: run them as calls (`core.text_calls`)."""
    tool_choice_step: bool = False
    """Ask the model first which tools (at most `max_tools_per_call`) a message needs."""
    max_tools_per_call: int = 2
    context_tokens: int | None = None
    """Tokens the model reads (None: the client's own `context_tokens`, if any)."""
    prices: Mapping[str, float] | None = None
    """Per million tokens (`input`, `output`): each turn's `usage.cost`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeOptions:
    """Running code: the runner (None: no code runs) and whether `execute_code` is offered."""

    runner: CodeRunner | None = None
    tool: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOptions:
    """Background tasks after an answer (title, tags, follow-ups) and the model they use."""

    tasks: Sequence[str | BackgroundTask] = DEFAULT_TASKS
    model: ModelClient | None = None
    """The model the tasks run on (a `BackgroundTask`'s own wins)."""


class LegacyOptions(TypedDict, total=False):
    """The older keywords of `Relay(...)`, each one field of a group."""

    name: str | None
    params: Mapping[str, Any] | None
    tags: TagConfig | None
    capabilities: Mapping[str, Any] | None
    builtin_tools: Mapping[str, Any] | None
    text_tool_calls: bool
    tool_choice_step: bool
    max_tools_per_call: int
    context_tokens: int | None
    prices: Mapping[str, float] | None
    code_interpreter: CodeRunner | None
    code_runner: CodeRunner | None
    code_tool: bool
    task_model: ModelClient | None
    tasks: Sequence[str | BackgroundTask]


_MODEL_KEYS = frozenset(f.name for f in dataclasses.fields(ModelOptions))


def grouped(
    model: ModelOptions | None,
    code: CodeOptions | None,
    background: TaskOptions | None,
    legacy: LegacyOptions,
) -> tuple[ModelOptions, CodeOptions, TaskOptions]:
    """The three groups, with any older keyword given put in its place (it wins)."""
    given: dict[str, Any] = dict(legacy)
    unknown = set(given) - set(LegacyOptions.__annotations__)
    if unknown:
        raise TypeError(f"Relay() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    model = model or ModelOptions()
    changes = {k: v for k, v in given.items() if k in _MODEL_KEYS}
    if changes.get("params", ()) is None:
        changes["params"] = {}
    if changes:
        model = dataclasses.replace(model, **changes)
    code = code or CodeOptions()
    runner = given.get("code_interpreter")
    if runner is None:
        runner = given.get("code_runner")
    if runner is not None:
        code = dataclasses.replace(code, runner=runner)
    if "code_tool" in given:
        code = dataclasses.replace(code, tool=given["code_tool"])
    background = background or TaskOptions()
    if "tasks" in given:
        background = dataclasses.replace(background, tasks=given["tasks"])
    if "task_model" in given:
        background = dataclasses.replace(background, model=given["task_model"])
    return model, code, background
