"""Chat turns that run in the background, published to the event bus.

`POST /api/chats/{id}/messages` starts a turn here and returns at once; the
turn's events go to the chat's channel on the bus, where any number of SSE
subscribers (on any worker) read them. Control messages (cancel, client-tool
results, approvals) travel over the bus too, so they reach whichever worker
runs the turn. `TurnManager` is the front: it starts turns (the chat's lease
first), cancels them and delivers answers. One turn's task is in
`turn_task.py`, taking a turn over from its checkpoint (a dead runner, an
answered pause) in `takeover.py`, the run records in `resume.py`; the lease,
heartbeat, checkpoints of the partial output and repair are in `durability.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolrelay.adapters.events import EventBus
from toolrelay.adapters.stores import NotFoundError, Store, TurnRun
from toolrelay.config.registry import Registry
from toolrelay.engine.checkpoint import TurnState
from toolrelay.engine.interfaces import ChatStore, Message, Tool
from toolrelay.engine.observer import Observer
from toolrelay.engine.options import CodeOptions, ModelOptions, TaskOptions
from toolrelay.engine.relay import Relay
from toolrelay.server.branches import BranchRefused, Placement, open_turn
from toolrelay.server.durability import (
    Durability,
    RetryingStore,
    channel,
    fail_orphans,
    repair_orphans,
)
from toolrelay.server.resume import answer_of, call_answered, default_node, waiting_asks
from toolrelay.server.takeover import end_paused, settle, take_over, take_over_expired, watch_runs
from toolrelay.server.turn_task import BusSink, RunningTurn, listen, run_turn

__all__ = ["BusSink", "Started", "TurnBusy", "TurnManager", "TurnNotStarted", "channel"]

log = logging.getLogger(__name__)


FINISHING_WAIT_S = 5.0
"""How long a post waits for a turn that is saved but still giving its lease back."""
FINISHING_POLL_S = 0.02


class TurnBusy(Exception):
    """Another turn holds the chat's lease."""


class TurnNotStarted(Exception):
    """Saving the turn's start failed (the store is down, say); the chat stays free."""


@dataclass(frozen=True, slots=True)
class Started:
    message_id: str
    user_message_id: str


class TurnManager:
    """Starts, follows and ends chat turns; the one place their lifecycle lives (DESIGN 2.1)."""

    def __init__(
        self,
        store: Store,
        bus: EventBus,
        registry: Registry,
        durability: Durability | None = None,
        *,
        observer: Observer | None = None,
        node: str | None = None,
    ) -> None:
        self.store = store
        self.node = node or default_node()
        """This server's name on the runs it owns (`server.resume.default_node`)."""
        self.observer = observer
        """Logs, metrics and traces of every turn this server runs (chat API and /v1)."""
        self.bus = bus
        self.registry = registry
        self.durability = durability or Durability()
        self.saves = RetryingStore(store, self.durability)
        """Where turns save (failed saves retried)."""
        self.tasks: dict[str, RunningTurn] = {}
        """The turns running on this worker, by chat id."""
        self._watcher: asyncio.Task[None] | None = None
        self.leaving = False
        """Set by `leave()`: turns that end from then on are left for a take-over."""

    def relay_for(
        self,
        route: str,
        *,
        store: ChatStore | None = None,
        tasks: bool = True,
        coalesce_ms: float | None = None,
    ) -> Relay:
        """A `Relay` for one turn; background tasks (title, tags …) run for saved chat turns
        unless `tasks` is False (a `/v1` turn saved only in the request log). Deltas are
        merged within `coalesce_ms` (the request's), else the route's, else the global one."""
        reg = self.registry
        limits = reg.limits
        window = reg.routes[route].coalesce_ms if coalesce_ms is None else coalesce_ms
        if window is not None and window != limits.coalesce_ms:
            limits = dataclasses.replace(limits, coalesce_ms=window)
        chosen = reg.routes[route]
        return Relay(
            reg.client_for(route),
            reg.tools_for(route),
            limits=limits,
            store=store,
            filters=reg.filters,
            observer=self.observer,
            model_options=ModelOptions(
                name=route,
                tags=chosen.tag_config(),
                builtin_tools={"code_interpreter": chosen.code_interpreter},
                text_tool_calls=chosen.text_tool_calls,
                tool_choice_step=chosen.tool_choice_step,
                max_tools_per_call=chosen.max_tools_per_call,
                prices=chosen.prices,
            ),
            code=CodeOptions(runner=reg.code_runner),
            background=TaskOptions(
                tasks=reg.background_tasks() if store is not None else (),
                model=reg.task_client if store is not None else None,
            ),
        )

    async def waiting(self, chat_id: str) -> list[dict[str, Any]]:
        """What a paused turn of the chat waits for: `{id, kind, name, arguments}` each (the
        page asks again after a reload: the question is in the event log only)."""
        return [
            ask
            for run in await self.store.list_runs(chat_id=chat_id)
            if run.status == "paused" and run.state is not None
            for ask in waiting_asks(run.state)
        ]

    async def running(self, chat_id: str) -> bool:
        return chat_id in self.tasks or await self.bus.turn_running(channel(chat_id))

    async def recover(self) -> int:
        """At start-up: this server's own runs are taken back at once (it was stopped: their
        leases are dead), other runs whose lease ran out are taken over, turns with no run
        left `in_progress` become `failed`; then a watcher takes over runs whose runner dies
        later. Returns how many turns were failed."""
        for run in await self.store.list_runs(owner=self.node):
            await self.take_over(run, own=True)
        await self.take_over_expired()
        failed = await repair_orphans(self.store, self.bus, self.durability)
        self._watcher = asyncio.get_running_loop().create_task(watch_runs(self))
        return failed

    async def take_over_expired(self) -> int:
        """Take over every run nobody holds a lease on (its runner died); how many."""
        return await take_over_expired(self)

    async def take_over(
        self,
        run: TurnRun,
        *,
        own: bool = False,
        held: bool = False,
        answers: Mapping[str, Any] | None = None,
    ) -> bool:
        """Go on with `run` from its last checkpoint (`server.takeover.take_over`)."""
        return await take_over(self, run, own=own, held=held, answers=answers)

    async def settle(self, chat_id: str) -> int:
        """Fail the chat's turns a dead worker left `in_progress` (`server.takeover`)."""
        return await settle(self, chat_id)

    async def start(
        self,
        chat_id: str,
        message: Message | None,
        *,
        route: str,
        user: Mapping[str, Any],
        client_tools: Sequence[Tool] = (),
        features: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        place: Placement | None = None,
    ) -> Started:
        """Take the chat's lease, save the user message and start the turn; else `TurnBusy`.

        The lease is taken first, so of many concurrent posts exactly one starts a
        turn and the others change nothing; any failure before the turn runs gives
        the lease back, so the chat never stays locked. `place`: a regenerated answer,
        an edited question or a continued answer (`server.branches`; `BranchRefused`
        when it does not apply).
        """
        name = channel(chat_id)
        await self._take_lease(chat_id)
        try:
            orphan = await self.store.list_runs(chat_id=chat_id)
        except BaseException:
            await asyncio.shield(self.bus.end(name))
            raise
        if orphan:  # a dead worker's turn (it goes on) or a paused one: this post waits
            await self.take_over(orphan[0], held=True)  # False: it gave the lease back
            raise TurnBusy(chat_id)
        try:
            await fail_orphans(self.store, chat_id)  # a dead worker's turn, its lease expired
            relay = self.relay_for(route, store=self.saves)
            # the assistant message exists (in progress) before the first event
            opened = await open_turn(self.store, chat_id, message, place, route)
        except BaseException as exc:
            await asyncio.shield(self.bus.end(name))
            if isinstance(exc, Exception) and not isinstance(exc, NotFoundError | BranchRefused):
                log.exception("could not start a turn in chat %s", chat_id)
                raise TurnNotStarted(str(exc)) from exc
            raise
        # the history is read by the turn, after the 202: the one part that grows with the chat
        self.launch(
            relay,
            chat_id,
            opened.message_id,
            opened.history,
            user,
            client_tools,
            features,
            opened.resume,
            context=context,
            fresh=True,
            continues=opened.continues,
        )
        return Started(opened.message_id, opened.user_message_id)

    def launch(
        self,
        relay: Relay,
        chat_id: str,
        message_id: str,
        history: Sequence[Message] | None,
        user: Mapping[str, Any],
        client_tools: Sequence[Tool],
        features: Mapping[str, Any] | None,
        resume: TurnState | None,
        *,
        context: Mapping[str, Any] | None = None,
        fresh: bool = False,
        continues: str | None = None,
    ) -> None:
        """The turn's task and its control listener; the caller holds the chat's lease.
        A new turn (`fresh`) reads its history (unless given) and records its run first.
        `context`: `Relay.run`'s `__request__`/`__model__`/metadata (a resumed turn has none)."""
        loop = asyncio.get_running_loop()
        task = loop.create_task(
            run_turn(
                self,
                relay,
                chat_id,
                message_id,
                history,
                user,
                client_tools,
                features,
                context,
                resume=resume,
                fresh=fresh,
                continues=continues,
            )
        )
        listener = loop.create_task(listen(self, chat_id, relay, task))
        self.tasks[chat_id] = RunningTurn(task, relay, listener)

    async def _take_lease(self, chat_id: str) -> None:
        """The chat's lease, or `TurnBusy` while a turn runs.

        A turn is saved (and its `done` event sent) a moment before its worker gives
        the lease back; a client that posts on `done` must not get a 409 for that
        moment. So while no turn of the chat is `in_progress`, the holder is only
        letting go: wait for it (bounded by `FINISHING_WAIT_S`) instead of refusing.
        """
        name = channel(chat_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FINISHING_WAIT_S
        while True:
            running = self.tasks.get(chat_id)
            if running is None and (
                await self.bus.acquire(name, ttl=self.durability.lease_ttl) is not None
            ):
                return
            if loop.time() >= deadline or await self.store.in_progress_turns(chat_id=chat_id):
                raise TurnBusy(chat_id)
            if running is not None:  # finishing here: wait for its task, not a clock
                await asyncio.wait({running.task}, timeout=deadline - loop.time())
            else:  # finishing on another worker (or just starting there: then in_progress soon)
                await asyncio.sleep(FINISHING_POLL_S)

    async def cancel(self, chat_id: str) -> bool:
        """True only when the turn's worker got the request (this one, or a listener)."""
        running = self.tasks.get(chat_id)
        if running is not None:
            running.task.cancel()
            return True
        if await self.bus.send_control(channel(chat_id), {"op": "cancel"}) > 0:
            return True
        for run in await self.store.list_runs(chat_id=chat_id):
            if run.status == "paused":
                return await end_paused(self, run, "Cancelled.", "cancelled")
        return False

    async def answer(self, chat_id: str, message: dict[str, Any]) -> bool:
        """Deliver an approval or a client tool's result; False: nobody waits for it.

        The run's saved state says whether its call is still unanswered. A paused turn is
        taken on here with the answer. A running one gets it over the bus, then is
        watched until the answer shows in its state: an answer that reached the runner
        as it was pausing (its listener stopped before reading it) would be lost, so
        when the turn turns out paused with the call still waiting, it is taken on here.
        A turn pausing right now still holds its lease a moment: waited for (bounded)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FINISHING_WAIT_S
        call_id, answer = answer_of(message)
        delivered = False
        while True:
            runs = await self.store.list_runs(chat_id=chat_id)
            if not runs:
                return delivered  # ended: it read the answer, or it never asked
            run = runs[0]
            answered = call_answered(run.state, call_id)
            if answered:
                return delivered  # ours (delivered) or an earlier one: nobody waits now
            if answered is None and run.status == "running":  # an event call's answer
                return await self.bus.send_control(channel(chat_id), message) > 0
            if run.status == "paused":
                if call_id not in (run.state or {}).get("waiting", {}):
                    return False
                if await self.take_over(run, answers={call_id: answer}):
                    return True
            elif not delivered:
                delivered = await self.bus.send_control(channel(chat_id), message) > 0
            if loop.time() >= deadline:
                return delivered
            await asyncio.sleep(FINISHING_POLL_S)

    async def wait(self, chat_id: str) -> None:
        running = self.tasks.get(chat_id)
        if running is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(running.task)

    def leave(self) -> None:
        """This process lost its parent, and the bus the parent hosted: a turn that ends
        from now on (crashing on the lost bus, or cancelled by the stop) is left as it
        is, `in_progress` with its run and last checkpoint, for the next server on the
        same database to take over (`server/processes`). Recording it failed or
        cancelled would fail on the bus anyway, once per turn. A plain assignment:
        callable from the thread that watches the parent."""
        self.leaving = True

    async def aclose(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        for running in list(self.tasks.values()):
            running.task.cancel()
        for running in list(self.tasks.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running.task
