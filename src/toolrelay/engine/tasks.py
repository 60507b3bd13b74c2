"""Background tasks after the answer (SPEC R20): follow-ups, title, tags.

Each task runs on its own model (a `BackgroundTask` names it; unset: the
relay's `task_model`) with its own prompt, on the conversation as plain text
(tool-call visualisations, reasoning and images stripped). A failing task is
dropped: it never fails the turn.

What the finisher decides with these helpers (`engine.finish`):
1. The title is made once, on the chat's first exchange (no assistant message
   in the history yet), never later.
2. When the title task gives nothing usable (no model for it, an error, an
   answer without the JSON), the first user message is the title.
3. A store writes a made title only while the chat has none
   (`TitleStore.title_if_untitled`), so a user's rename always wins, even one
   made while the task ran.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, cast, runtime_checkable

import orjson

from toolrelay.core.items import Item, output_text
from toolrelay.core.stream.reader import BodyReader
from toolrelay.engine.interfaces import Message, ModelClient, ModelRequest

log = logging.getLogger(__name__)

_DETAILS = re.compile(r"<details[^>]*>.*?</details>", re.S)
_MD_IMAGE = re.compile(r"!\[[^\]]*\]\(data:[^)]*\)")
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)
_SPACE = re.compile(r"\s+")

TaskName = Literal["title", "tags", "follow_ups"]
TASK_NAMES: Final[tuple[TaskName, ...]] = ("title", "tags", "follow_ups")

PROMPTS: Final[Mapping[str, str]] = {
    "title": (
        "Write a concise title (3-5 words, no quotes) for this chat. Reply with JSON only: "
        '{"title": "..."}'
    ),
    "tags": ('Give 1-3 broad topic tags for this chat. Reply with JSON only: {"tags": ["..."]}'),
    "follow_ups": (
        "Suggest 3 short follow-up questions the user might ask next. Reply with JSON only: "
        '{"follow_ups": ["..."]}'
    ),
}
"""The default prompt of each task (the system message; the chat follows as the user's)."""

TITLE_MAX = 100
"""Characters of the first message kept when it becomes the title."""


@dataclass(frozen=True, slots=True)
class BackgroundTask:
    """One task to run after the answer: its model and prompt, each unset for the default."""

    name: TaskName
    model: ModelClient | None = None
    """None: the relay's `task_model` (and with none either, the task does not run)."""
    prompt: str | None = None
    """The system prompt; None: `PROMPTS[name]`. It must ask for `{"<name>": …}` as JSON."""

    def __post_init__(self) -> None:
        if self.name not in TASK_NAMES:
            raise ValueError(f"unknown background task {self.name!r} (tasks: {TASK_NAMES})")


@dataclass(frozen=True, slots=True)
class TaskResults:
    title: str | None = None
    tags: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()


@runtime_checkable
class TitleStore(Protocol):
    """A store that names a chat only while it has no title (rule 3)."""

    async def title_if_untitled(self, chat_id: str, title: str) -> bool:
        """Set `title` if the chat has none; True when it was set."""
        ...


def planned(
    tasks: Sequence[str | BackgroundTask], default_model: ModelClient | None
) -> tuple[BackgroundTask, ...]:
    """`tasks` (names or `BackgroundTask`s) with each model filled in from `default_model`."""
    out: list[BackgroundTask] = []
    for task in tasks:
        spec = task if isinstance(task, BackgroundTask) else BackgroundTask(cast(TaskName, task))
        if spec.model is None and default_model is not None:
            spec = BackgroundTask(spec.name, default_model, spec.prompt)
        out.append(spec)
    return tuple(out)


def first_exchange(messages: Sequence[Message]) -> bool:
    """No assistant message yet: this turn answers the chat's first question (rule 1)."""
    return not any(m.get("role") == "assistant" for m in messages)


def fallback_title(messages: Sequence[Message]) -> str | None:
    """The first user message as a one-line title, cut to `TITLE_MAX` characters (rule 2)."""
    for m in messages:
        if m.get("role") == "user":
            text = _SPACE.sub(" ", plain_text(m.get("content"))).strip()
            if text:
                return text if len(text) <= TITLE_MAX else text[:TITLE_MAX].rstrip() + "…"
    return None


def plain_text(value: Any) -> str:
    """A message's text with images, tool-call blocks and data URIs removed."""
    if isinstance(value, list):
        value = "\n".join(
            str(p.get("text", "")) for p in value if isinstance(p, dict) and "text" in p
        )
    text = str(value or "")
    return _MD_IMAGE.sub("", _DETAILS.sub("", text)).strip()


def conversation_text(messages: Sequence[Message], output: Sequence[Item]) -> str:
    lines = []
    for m in messages:
        if m.get("role") in ("user", "assistant") and (text := plain_text(m.get("content"))):
            lines.append(f"{m['role'].upper()}: {text}")
    if answer := plain_text(output_text(list(output))):
        lines.append(f"ASSISTANT: {answer}")
    return "\n".join(lines)


async def run_tasks(
    tasks: Sequence[BackgroundTask], messages: Sequence[Message], output: Sequence[Item]
) -> TaskResults:
    """Run the tasks that have a model, all at once; what each found, or nothing."""
    chat = conversation_text(messages, output)
    runnable = [t for t in tasks if t.model is not None]
    answers = await asyncio.gather(*(_ask(t, chat) for t in runnable))
    found: dict[str, Any] = {}
    for task, answer in zip(runnable, answers, strict=True):
        value = answer.get(task.name) if answer else None
        if task.name == "title" and isinstance(value, str) and value.strip():
            found["title"] = _SPACE.sub(" ", value).strip()[:200]
        elif task.name != "title" and isinstance(value, list):
            found[task.name] = tuple(str(v).strip() for v in value if str(v).strip())[:10]
    return TaskResults(**found)


async def _ask(task: BackgroundTask, chat: str) -> Mapping[str, Any] | None:
    assert task.model is not None
    request = ModelRequest(
        messages=[
            {"role": "system", "content": task.prompt or PROMPTS[task.name]},
            {"role": "user", "content": f"<chat>\n{chat}\n</chat>"},
        ]
    )
    try:
        stream = await task.model.open(request)
        reader = BodyReader(stream.format)
        try:
            async for chunk in stream:
                reader.feed(chunk)
        finally:
            await stream.aclose()
        reader.finish()
        text = output_text(reader.result().output)
        match = _JSON_OBJECT.search(text)
        parsed = orjson.loads(match.group(0)) if match else None
        return parsed if isinstance(parsed, dict) else None
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a background task never fails the turn
        log.warning("background task %s failed: %s", task.name, exc)
        return None
