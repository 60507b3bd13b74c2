"""What keeps a background turn from being lost: lease heartbeat, checkpoints, retried saves.

`TurnManager` (in `turns.py`) runs each chat turn with these parts:

- `TurnRecorder` follows the turn's events (the Responses item events the
  engine publishes) into the partial output, so a checkpoint or a crash
  report has the text so far without the engine knowing about either.
- `keep_alive` is one task per turn: every few seconds it renews the turn's
  lease on the bus and, when the output changed, checkpoints it into the
  `in_progress` row (never per token). A checkpoint only writes a row still in
  progress, so it can never overwrite the final save.
- `RetryingStore` retries a failed save a few times before giving up; the
  caller then reports the failure as an error event instead of dropping it.
- `repair_orphans` marks turns left `in_progress` by a dead process as
  `failed` (keeping the checkpointed output), at start-up and whenever a
  chat's lease is taken over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolrelay.adapters.events import EventBus
from toolrelay.adapters.stores import NotFoundError, Store, StoredMessage
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.responses.parse import reduce_event
from toolrelay.core.items import Item, as_items, output_text, updated
from toolrelay.engine.interfaces import Message

log = logging.getLogger(__name__)

SERVER_STOPPED: Final = "The server stopped before this turn finished; the partial answer was kept."


@dataclass(frozen=True, slots=True)
class Durability:
    """The knobs; the server takes them from settings."""

    lease_ttl: float = 30.0
    """Seconds a turn's lock outlives its last heartbeat (a crashed worker's chat frees then)."""
    checkpoint_s: float = 5.0
    """How often the partial output of a running turn is written to its row."""
    save_attempts: int = 4
    retry_delay: float = 0.25
    """Seconds before the second attempt; doubled for each further one."""
    max_resumes: int = 3
    """Take-overs of one turn (its runner died each time) before it fails instead."""
    pause_timeout: float = 86400.0
    """Seconds a paused turn waits for its answer before it ends failed; 0: for ever."""

    @property
    def watch_s(self) -> float:
        """How often a worker looks for runs whose lease ran out (their runner died)."""
        return max(0.05, self.lease_ttl / 2)

    @property
    def tick(self) -> float:
        """The heartbeat period: often enough for a lease to survive two missed beats."""
        return max(0.01, min(self.lease_ttl / 3, self.checkpoint_s))


def channel(chat_id: str) -> str:
    return f"chat:{chat_id}"


async def give_back(bus: EventBus, name: str, *, paused: bool) -> None:
    """Release a chat's lease. A turn still paused (its run saved `paused`) stays the
    channel's turn, its stream open (`pause`), so the answer goes on with it and a replay
    from its start has what came before the pause; any other turn ends."""
    if paused:
        await bus.pause(name)
    else:
        await bus.end(name)


class TurnRecorder:
    """The partial output of a turn, rebuilt from the events it publishes."""

    def __init__(self) -> None:
        self.output: list[Item] = []
        self.usage: dict[str, Any] | None = None
        self.dirty = False

    def feed(self, event: Event) -> None:
        if event.type == ev.TURN_RESUMED:  # a take-over: the checkpoint's output, anew
            self.output = as_items(event.data.get("output") or [])
            self.dirty = True
        elif event.type.startswith("response."):
            self.output, _ = reduce_event({**event.data, "type": event.type}, self.output)
            self.dirty = True
        elif event.type == ev.CHAT_COMPLETION and isinstance(event.data.get("usage"), dict):
            self.usage = event.data["usage"]

    def turn(self, status: str, error: str | None = None) -> dict[str, Any]:
        """A `save_turn` payload; items still open are marked incomplete unless in progress."""
        output = self.output if status == "in_progress" else closed(self.output)
        return {
            "output": output,
            "content": output_text(output),
            "usage": self.usage,
            "status": status,
            "error": error,
        }


def closed(output: Sequence[Item]) -> list[Item]:
    """Items a dead or failed turn left open, marked `incomplete`."""
    return [
        updated(i, status="incomplete") if i.get("status") == "in_progress" else i for i in output
    ]


class RetryingStore:
    """The store a turn saves through: transient failures are retried before they surface."""

    def __init__(self, store: Store, durability: Durability) -> None:
        self._store = store
        self._durability = durability

    async def save_turn(self, chat_id: str, message_id: str, turn: Mapping[str, Any]) -> None:
        delay = self._durability.retry_delay
        for attempt in range(1, self._durability.save_attempts + 1):
            try:
                await self._store.save_turn(chat_id, message_id, turn)
                return
            except (NotFoundError, ValueError, TypeError):
                raise  # the chat is gone or the turn is malformed: retrying cannot help
            except Exception as exc:
                if attempt == self._durability.save_attempts:
                    raise
                log.warning("saving turn %s failed (attempt %d): %s", message_id, attempt, exc)
                await asyncio.sleep(delay)
                delay *= 2

    async def load_messages(self, chat_id: str) -> list[Message]:
        return await self._store.load_messages(chat_id)

    async def update_chat(
        self, chat_id: str, *, title: str | None = None, tags: list[str] | None = None
    ) -> None:
        await self._store.update_chat(chat_id, title=title, tags=tags)

    async def title_if_untitled(self, chat_id: str, title: str) -> bool:
        return await self._store.title_if_untitled(chat_id, title)


async def keep_alive(
    bus: EventBus,
    store: Store,
    durability: Durability,
    chat_id: str,
    message_id: str,
    recorder: TurnRecorder,
) -> None:
    """Renew the lease and checkpoint the partial output until cancelled."""
    name = channel(chat_id)
    while True:
        await asyncio.sleep(durability.tick)
        try:
            if not await bus.renew(name, ttl=durability.lease_ttl):
                log.warning("turn %s of chat %s lost its lease", message_id, chat_id)
            if recorder.dirty:
                recorder.dirty = False
                await store.checkpoint_turn(chat_id, message_id, recorder.turn("in_progress"))
        except Exception as exc:  # a missed beat is retried on the next tick
            log.warning("heartbeat of chat %s failed: %s", chat_id, exc)


def failed_turn(message: StoredMessage, error: str = SERVER_STOPPED) -> dict[str, Any]:
    """A turn left `in_progress` as a failed one, its checkpointed output kept."""
    output = closed(as_items(message.output))  # the stored JSON: items as we saved them
    return {
        "output": output,
        "content": output_text(output) or str(message.content or ""),
        "usage": message.usage,
        "status": "failed",
        "error": error,
        "timings": message.timings,
    }


async def fail_orphans(store: Store, chat_id: str) -> list[dict[str, Any]]:
    """Mark this chat's unfinished turns that have no run (nothing to resume them from)
    failed; the caller holds the chat's lease."""
    repaired: list[dict[str, Any]] = []
    runs = {r.message_id for r in await store.list_runs(chat_id=chat_id)}
    for message in await store.in_progress_turns(chat_id=chat_id):
        if message.id in runs:
            continue
        turn = failed_turn(message)
        if await store.checkpoint_turn(chat_id, message.id, turn):
            repaired.append(turn)
    return repaired


def failure_events(turn: Mapping[str, Any]) -> list[Event]:
    """What a client following the chat sees when a turn fails outside the engine."""
    error: ev.ErrorText = {"content": str(turn.get("error") or "The turn failed.")}
    final: ev.CompletionData = {
        "done": True,
        "output": turn.get("output", []),
        "content": turn.get("content", ""),
        "usage": turn.get("usage") or {},
        "status": turn.get("status") or "failed",
        "error": error,
    }
    return [ev.event(ev.CHAT_MESSAGE_ERROR, {"error": error}), ev.event(ev.CHAT_COMPLETION, final)]


async def repair_orphans(store: Store, bus: EventBus, durability: Durability) -> int:
    """At start-up: fail every unfinished turn whose chat no live worker holds.

    Each chat is taken with `acquire`, so a turn still running on another worker
    (its lease renewed) is left alone; subscribers get the error and the end. A chat
    whose turn is paused is given back paused (`give_back`).
    """
    repaired = 0
    chats = {m.chat_id for m in await store.in_progress_turns()}
    for chat_id in sorted(chats):
        name = channel(chat_id)
        if await bus.acquire(name, ttl=durability.lease_ttl) is None:
            continue
        paused = False
        try:
            runs = await store.list_runs(chat_id=chat_id)
            paused = any(r.status == "paused" for r in runs)
            turns = await fail_orphans(store, chat_id)
            for event in failure_events(turns[-1]) if turns else []:
                await bus.publish(name, event)
            repaired += len(turns)
        finally:
            await give_back(bus, name, paused=paused)
    if repaired:
        log.warning("marked %d turn(s) left unfinished by a stopped server as failed", repaired)
    return repaired
