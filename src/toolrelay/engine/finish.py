"""Finishing a turn (SPEC R18–R20): close items, outlets, tasks, save once, final event.

The finisher is handed a `TurnEnd` (a value: the turn's output, usage and
history as they stand) and an `emit` callable; it never sees the loop.

Order: every `in_progress` item is closed (`completed`, or `incomplete` when
the turn failed or was cancelled); outlet filters run (pipelines first) and
may rewrite the output (then `chat:outlet`); the turn is saved; the final
`chat:completion` event with `done: true` goes out. Background tasks run on
the task model after that (`after`): their events follow the final one, as
in Open WebUI, so a client never waits for three task-model calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.items import Item, as_items, is_message, message_item, output_text, updated
from toolrelay.core.tools.results import strip_base64
from toolrelay.core.turn.status import TurnStatus
from toolrelay.engine.filters import run_outlets
from toolrelay.engine.interfaces import ChatStore, Message, ModelClient
from toolrelay.engine.tasks import (
    BackgroundTask,
    TaskResults,
    TitleStore,
    fallback_title,
    first_exchange,
    planned,
    run_tasks,
)

log = logging.getLogger(__name__)

Emit = Callable[[Event], Awaitable[None]]
"""Where the finisher's events go (the turn's coalescer, in order with the rest)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of one turn, as `Relay.run` returns it."""

    output: list[Item]
    text: str
    usage: dict[str, Any]
    status: TurnStatus
    error: str | None = None
    finish_reason: str | None = None
    timings: dict[str, Any] = field(default_factory=dict)
    title: str | None = None
    tags: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()
    whole_outputs: Mapping[str, str] = field(default_factory=dict)
    """The whole text of each tool result cut for the model, by its output item's id."""

    def saved(self, model: str | None) -> dict[str, Any]:
        """The record a store keeps of this turn (`ChatStore.save_turn`), answered by `model`."""
        return {
            "output": self.output,
            "content": self.text,
            "usage": self.usage,
            "status": self.status,
            "error": self.error,
            "timings": self.timings,
            "model": model,
            "follow_ups": list(self.follow_ups),
            "whole_outputs": dict(self.whole_outputs),
        }


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """A turn as it stopped: what the finisher needs of it, nothing more."""

    messages: Sequence[Message]
    """The history the turn answered (outlets and tasks see it)."""
    output: list[Item]
    usage: dict[str, Any]
    status: TurnStatus
    error: str | None
    finish_reason: str | None
    timings: dict[str, Any]
    quiet: bool = False
    """Nobody is listening: the final event is not built."""
    whole_outputs: Mapping[str, str] = field(default_factory=dict)
    """Tool results cut for the model, whole, by output item id (kept for the user)."""


@dataclass(slots=True)
class Finisher:
    """The end-of-turn steps; each part is optional."""

    store: ChatStore | None = None
    chat_id: str | None = None
    message_id: str | None = None
    filters: Sequence[Any] = ()
    task_model: ModelClient | None = None
    tasks: Sequence[str | BackgroundTask] = ("title", "tags", "follow_ups")
    """Names run on `task_model`, or `BackgroundTask`s with their own model and prompt."""
    user: Mapping[str, Any] | None = None
    model_name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Reserved parameters for outlet filters (`__request__`, `__model__`, `__metadata__` …)."""

    async def finish(self, end: TurnEnd, emit: Emit) -> RunResult:
        """Run the end-of-turn steps; the caller flushes `emit`'s events afterwards."""
        status = end.status
        ended_well = status in (TurnStatus.COMPLETED, TurnStatus.CAPPED)
        closing = "completed" if ended_well else "incomplete"
        output = [_closed(i, closing) for i in end.output]
        if status != TurnStatus.CANCELLED:
            output = await self._outlets(end.messages, output, emit)
        result = RunResult(
            output=output,
            text=output_text(output),
            usage=dict(end.usage),
            status=status,
            error=end.error,
            finish_reason=end.finish_reason,
            timings=end.timings,
            whole_outputs=dict(end.whole_outputs),
        )
        await self._save(result)
        if not end.quiet:
            await emit(ev.event(ev.CHAT_COMPLETION, _final_data(result)))
        return result

    async def after(self, history: Sequence[Message], result: RunResult, emit: Emit) -> RunResult:
        """Background tasks (R20), after the final event: the answer is never held up by them.

        Title, tags and follow-ups arrive as their own events; the follow-ups
        join the saved turn, title and tags the chat. The title is made on the
        first exchange only (`engine.tasks`, rules 1-3).
        """
        if result.status != TurnStatus.COMPLETED:
            return result
        tasks = planned(self.tasks, self.task_model)
        first = first_exchange(history)
        wanted = [t for t in tasks if t.name != "title" or first]
        saved_chat = self.store is not None and self.chat_id is not None
        titles = first and any(t.name == "title" for t in tasks)
        if not any(t.model is not None for t in wanted) and not (titles and saved_chat):
            return result
        result = await self._tasks(history, result, wanted, emit)
        if result.follow_ups:
            await self._save(result)
        return result

    async def _outlets(
        self, history: Sequence[Message], output: list[Item], emit: Emit
    ) -> list[Item]:
        if not self.filters:
            return output
        content = output_text(output)
        messages: list[Message] = [*history]
        body = {
            "model": self.model_name,
            "chat_id": self.chat_id,
            "id": self.message_id,
            "messages": [*messages, {"role": "assistant", "content": content, "output": output}],
        }
        try:
            changed = await run_outlets(self.filters, body, self.user, self.extra)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken filter must not lose the answer
            log.warning("outlet filter failed: %s", exc)
            return output
        new = _assistant_after(changed)
        if new is None:
            return output
        new_output = _rewritten(output, new)
        if new_output == output:
            return output
        await emit(
            ev.event(
                ev.CHAT_OUTLET,
                {"content": output_text(new_output), "output": strip_base64(new_output)},
            )
        )
        return new_output

    async def _tasks(
        self,
        history: Sequence[Message],
        result: RunResult,
        tasks: Sequence[BackgroundTask],
        emit: Emit,
    ) -> RunResult:
        found = await run_tasks(tasks, history, result.output)
        title = None
        if any(t.name == "title" for t in tasks):
            title = await self._title(found.title or fallback_title(history))
        if title:
            await emit(ev.event(ev.CHAT_TITLE, {"title": title}))
        if found.tags:
            await emit(ev.event(ev.CHAT_TAGS, {"tags": list(found.tags)}))
        if found.follow_ups:
            await emit(ev.event(ev.CHAT_FOLLOW_UPS, {"follow_ups": list(found.follow_ups)}))
        update = getattr(self.store, "update_chat", None)
        if self.chat_id and update is not None and found.tags:
            await update(self.chat_id, tags=list(found.tags))
        return RunResult(**{**_fields(result), **_found(found, title)})

    async def _title(self, title: str | None) -> str | None:
        """The title as the chat keeps it: None when the chat has one already (a rename)."""
        if title is None or self.store is None or self.chat_id is None:
            return title
        try:
            if isinstance(self.store, TitleStore):
                return title if await self.store.title_if_untitled(self.chat_id, title) else None
            update = getattr(self.store, "update_chat", None)
            if update is not None:
                await update(self.chat_id, title=title)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a title is not worth a failed turn
            log.warning("saving the title of chat %s failed: %s", self.chat_id, exc)
            return None
        return title

    async def _save(self, result: RunResult) -> None:
        if self.store is None or self.chat_id is None or self.message_id is None:
            return
        await self.store.save_turn(self.chat_id, self.message_id, result.saved(self.model_name))


def _found(found: TaskResults, title: str | None) -> dict[str, Any]:
    return {"title": title, "tags": found.tags, "follow_ups": found.follow_ups}


def _fields(result: RunResult) -> dict[str, Any]:
    return {name: getattr(result, name) for name in RunResult.__dataclass_fields__}


def _closed(item: Item, status: str) -> Item:
    return updated(item, status=status) if item.get("status") == "in_progress" else item


def _final_data(result: RunResult) -> ev.CompletionData:
    data: ev.CompletionData = {
        "done": True,
        "output": strip_base64(result.output),
        "content": result.text,
        "usage": result.usage,
        "status": result.status,
        "finish_reason": result.finish_reason,
    }
    if result.error:
        data["error"] = {"content": result.error}
    return data


def _assistant_after(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    last = messages[-1]
    return last if isinstance(last, Mapping) and last.get("role") == "assistant" else None


def _rewritten(output: list[Item], message: Mapping[str, Any]) -> list[Item]:
    """A filter may return a new `output`, or only a new `content`: the text is then replaced."""
    new_output = message.get("output")
    if isinstance(new_output, list) and new_output != output:
        return as_items([dict(i) for i in new_output if isinstance(i, dict)])  # the filter's word
    content = message.get("content")
    if not isinstance(content, str) or content == output_text(output):
        return output
    kept = [i for i in output if not is_message(i)]
    return [*kept, message_item(content, status="completed")]
