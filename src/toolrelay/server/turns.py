"""Chat turns that run in the background, published to the event bus.

`POST /api/chats/{id}/messages` starts a turn here and returns at once; the
turn's events go to the chat's channel on the bus, where any number of SSE
subscribers (on any worker) read them. Control messages (cancel, client-tool
results, approvals) travel over the bus too, so they reach whichever worker
runs the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolrelay.adapters.events import EventBus
from toolrelay.adapters.stores import Store
from toolrelay.config.registry import Registry
from toolrelay.core.events import Event
from toolrelay.engine.interfaces import Message, Tool
from toolrelay.engine.relay import Relay

log = logging.getLogger(__name__)


def channel(chat_id: str) -> str:
    return f"chat:{chat_id}"


class BusSink:
    """Publishes a turn's events to its chat channel."""

    def __init__(self, bus: EventBus, chat_id: str) -> None:
        self._bus = bus
        self._channel = channel(chat_id)

    async def emit(self, event: Event) -> None:
        await self._bus.publish(self._channel, event)


@dataclass(slots=True)
class _Running:
    task: asyncio.Task[Any]
    relay: Relay
    listener: asyncio.Task[None]


class TurnManager:
    def __init__(self, store: Store, bus: EventBus, registry: Registry) -> None:
        self.store = store
        self.bus = bus
        self.registry = registry
        self._running: dict[str, _Running] = {}

    def relay_for(self, route: str, *, store: Store | None = None) -> Relay:
        reg = self.registry
        return Relay(
            reg.client_for(route),
            reg.tools_for(route).values(),
            limits=reg.limits,
            store=store,
            filters=reg.filters,
            task_model=reg.task_client if store is not None else None,
            name=route,
        )

    async def running(self, chat_id: str) -> bool:
        return chat_id in self._running or await self.bus.turn_running(channel(chat_id))

    async def start(
        self,
        chat_id: str,
        message_id: str,
        *,
        route: str,
        history: Sequence[Message],
        user: Mapping[str, Any],
        client_tools: Sequence[Tool] = (),
    ) -> None:
        relay = self.relay_for(route, store=self.store)
        await self.bus.begin(channel(chat_id))
        # the assistant message exists (in progress) before the first event
        await self.store.save_turn(
            chat_id,
            message_id,
            {"output": [], "content": "", "status": "in_progress", "model": route},
        )
        task = asyncio.get_running_loop().create_task(
            self._run(relay, chat_id, message_id, history, user, client_tools)
        )
        listener = asyncio.get_running_loop().create_task(self._listen(chat_id, relay, task))
        self._running[chat_id] = _Running(task, relay, listener)

    async def _run(
        self,
        relay: Relay,
        chat_id: str,
        message_id: str,
        history: Sequence[Message],
        user: Mapping[str, Any],
        client_tools: Sequence[Tool],
    ) -> None:
        try:
            await relay.run(
                history,
                sink=BusSink(self.bus, chat_id),
                chat_id=chat_id,
                message_id=message_id,
                user=user,
                extra_tools=client_tools,
            )
        except asyncio.CancelledError:
            pass  # the partial turn was saved by the engine
        except Exception:  # never lose a turn silently
            log.exception("turn %s of chat %s crashed", message_id, chat_id)
        finally:
            await self.bus.end(channel(chat_id))
            running = self._running.pop(chat_id, None)
            if running is not None:
                running.listener.cancel()

    async def _listen(self, chat_id: str, relay: Relay, task: asyncio.Task[Any]) -> None:
        try:
            await self._follow_control(chat_id, relay, task)
        except asyncio.CancelledError:
            raise
        except Exception:  # the bus went away: the turn runs on, unreachable for control
            log.exception("control channel of chat %s failed", chat_id)

    async def _follow_control(self, chat_id: str, relay: Relay, task: asyncio.Task[Any]) -> None:
        async for message in self.bus.control(channel(chat_id)):
            op = message.get("op")
            if op == "cancel":
                task.cancel()
            elif op == "tool_result":
                relay.submit_tool_result(
                    str(message.get("id")), message.get("result"), headers=message.get("headers")
                )
            elif op == "approval":
                relay.approve(
                    str(message.get("id")),
                    bool(message.get("approved")),
                    reason=message.get("reason"),
                )

    async def cancel(self, chat_id: str) -> None:
        await self.bus.send_control(channel(chat_id), {"op": "cancel"})

    async def answer(self, chat_id: str, message: dict[str, Any]) -> None:
        await self.bus.send_control(channel(chat_id), message)

    async def wait(self, chat_id: str) -> None:
        running = self._running.get(chat_id)
        if running is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(running.task)

    async def aclose(self) -> None:
        for running in list(self._running.values()):
            running.task.cancel()
        for running in list(self._running.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running.task
