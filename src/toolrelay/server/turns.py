"""Chat turns that run in the background, published to the event bus.

`POST /api/chats/{id}/messages` starts a turn here and returns at once; the
turn's events go to the chat's channel on the bus, where any number of SSE
subscribers (on any worker) read them. Control messages (cancel, client-tool
results, approvals) travel over the bus too, so they reach whichever worker
runs the turn. The lock, heartbeat, checkpoints and repair are in
`durability.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from toolrelay.adapters.events import EventBus
from toolrelay.adapters.stores import NotFoundError, Store, TurnRun
from toolrelay.config.registry import Registry
from toolrelay.core.events import Event
from toolrelay.engine.checkpoint import TurnPaused, TurnState
from toolrelay.engine.interfaces import ChatStore, Message, Tool
from toolrelay.engine.observer import Observer
from toolrelay.engine.relay import Relay
from toolrelay.server.branches import BranchRefused, Placement, open_turn
from toolrelay.server.durability import (
    Durability,
    RetryingStore,
    TurnRecorder,
    channel,
    fail_orphans,
    failed_turn,
    failure_events,
    keep_alive,
    repair_orphans,
)
from toolrelay.server.live_events import ItemReferences
from toolrelay.server.resume import (
    Rebuilt,
    StoreCheckpoints,
    answer_of,
    call_answered,
    default_node,
    expiry_text,
    pause_expired,
    resume_refusal,
    run_request,
    unfinished,
    waiting_asks,
)

__all__ = ["BusSink", "Started", "TurnBusy", "TurnManager", "TurnNotStarted", "channel"]

log = logging.getLogger(__name__)


FINISHING_WAIT_S = 5.0
"""How long a post waits for a turn that is saved but still giving its lease back."""
FINISHING_POLL_S = 0.02


class TurnBusy(Exception):
    """Another turn holds the chat's lease."""


class TurnNotStarted(Exception):
    """Saving the turn's start failed (the store is down, say); the chat stays free."""


class BusSink:
    """Publishes a turn's events to its chat channel, recording the partial output."""

    def __init__(self, bus: EventBus, chat_id: str, recorder: TurnRecorder) -> None:
        self._bus = bus
        self._channel = channel(chat_id)
        self._recorder = recorder
        self._refs = ItemReferences()

    async def emit(self, event: Event) -> None:
        self._recorder.feed(event)
        await self._bus.publish(self._channel, self._refs.feed(event))


@dataclass(slots=True)
class _Running:
    task: asyncio.Task[Any]
    relay: Relay
    listener: asyncio.Task[None]


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
        self._saves = RetryingStore(store, self.durability)
        self._running: dict[str, _Running] = {}
        self._watcher: asyncio.Task[None] | None = None

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
        return Relay(
            reg.client_for(route),
            reg.tools_for(route),
            code_interpreter=reg.code_runner,
            builtin_tools={"code_interpreter": reg.routes[route].code_interpreter},
            limits=limits,
            store=store,
            filters=reg.filters,
            task_model=reg.task_client if store is not None else None,
            tasks=reg.background_tasks() if store is not None else (),
            name=route,
            text_tool_calls=reg.routes[route].text_tool_calls,
            tool_choice_step=reg.routes[route].tool_choice_step,
            max_tools_per_call=reg.routes[route].max_tools_per_call,
            observer=self.observer,
            tags=reg.routes[route].tag_config(),
            prices=reg.routes[route].prices,
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
        return chat_id in self._running or await self.bus.turn_running(channel(chat_id))

    async def recover(self) -> int:
        """At start-up: this server's own runs are taken back at once (it was stopped: their
        leases are dead), other runs whose lease ran out are taken over, turns with no run
        left `in_progress` become `failed`; then a watcher takes over runs whose runner dies
        later. Returns how many turns were failed."""
        for run in await self.store.list_runs(owner=self.node):
            await self._take_over(run, own=True)
        await self.take_over_expired()
        failed = await repair_orphans(self.store, self.bus, self.durability)
        self._watcher = asyncio.get_running_loop().create_task(self._watch_runs())
        return failed

    async def take_over_expired(self) -> int:
        """Take over every run nobody holds a lease on (its runner died); how many."""
        taken = 0
        now = datetime.now(UTC)
        timeout = self.durability.pause_timeout
        for run in await self.store.list_runs():
            if run.status == "running" and run.chat_id not in self._running:
                taken += await self._take_over(run)
            elif pause_expired(run, timeout, now):
                await self._end_paused(run, expiry_text(timeout))
        return taken

    async def _watch_runs(self) -> None:
        while True:
            await asyncio.sleep(self.durability.watch_s)
            try:
                await self.take_over_expired()
            except Exception as exc:  # the store or bus is away: try again next time
                log.warning("looking for turns to take over failed: %s", exc)

    async def _take_over(
        self,
        run: TurnRun,
        *,
        own: bool = False,
        held: bool = False,
        answers: Mapping[str, Any] | None = None,
    ) -> bool:
        """Go on with `run` from its last checkpoint if its chat's lease can be had (`own`:
        this server's, dead with its last life: renewed instead of waited out; `held`: the
        caller has it). A paused run goes on only with `answers` to calls it waits for.
        A run that cannot go on fails with the reason; False then."""
        chat_id, name = run.chat_id, channel(run.chat_id)
        paused = run.status == "paused"
        if chat_id in self._running or (paused and not answers):
            return False
        ttl = self.durability.lease_ttl
        leased = held or (own and await self.bus.renew(name, ttl=ttl))
        if not leased and await self.bus.acquire(name, ttl=ttl) is None:
            return False  # its runner lives (or another worker took it first)
        try:
            runs = await self.store.list_runs(chat_id=chat_id)
            now = [r for r in runs if r.message_id == run.message_id]
            if now and (now[0].status == "paused") != paused:  # it paused (or went on) since
                if not held:
                    await self.bus.end(name)
                return False
            claimed = await self.store.claim_run(
                run.message_id, owner=self.node, resumed=not paused
            )
            row = unfinished(await self.store.in_progress_turns(chat_id=chat_id), run.message_id)
            if claimed is None or row is None:  # it ended just before its runner died
                await self.store.end_run(run.message_id)
                await self.bus.end(name)
                return False
            refusal = resume_refusal(claimed, self.registry.routes, self.durability.max_resumes)
            try:
                rebuilt = Rebuilt(claimed)
            except (ValueError, TypeError, KeyError) as exc:
                refusal = (
                    refusal
                    or f"The turn could not be resumed ({exc}); the partial answer was kept."
                )
            if refusal is None and answers:
                if not set(answers) & set(rebuilt.state.waiting):  # not what it waits for
                    await self.store.pause_run(run.message_id)
                    await self.bus.end(name)
                    return False
                rebuilt.state.answers.update(answers)
                # saved: whoever sent an answer sees that it was taken (`answer`)
                await self.store.save_run_state(run.message_id, rebuilt.state.to_json())
            if refusal is not None:
                turn = failed_turn(row, refusal)
                await self.store.checkpoint_turn(chat_id, row.id, turn)
                for event in failure_events(turn):
                    await self.bus.publish(name, event)
                await self.store.end_run(run.message_id)
                await self.bus.end(name)
                log.warning("turn %s of chat %s not resumed: %s", row.id, chat_id, refusal)
                return False
            relay = self.relay_for(rebuilt.route, store=self._saves)
        except BaseException:
            await asyncio.shield(self.bus.end(name))
            raise
        log.log(
            logging.INFO if paused else logging.WARNING,
            "resuming turn %s of chat %s from its checkpoint (%s)",
            row.id,
            chat_id,
            "answered" if paused else f"take-over {claimed.resumes}",
        )
        self._launch(
            relay,
            chat_id,
            row.id,
            rebuilt.history,
            rebuilt.user,
            rebuilt.client_tools,
            rebuilt.features,
            rebuilt.state,
        )
        return True

    async def settle(self, chat_id: str) -> int:
        """Fail the chat's turns left `in_progress` by a worker whose lease ran out.

        Called when someone looks at a chat with no running turn, so a dead
        worker's turn is repaired (and its followers told) once its lease expires.
        """
        if chat_id in self._running or not await self.store.in_progress_turns(chat_id=chat_id):
            return 0
        for run in await self.store.list_runs(chat_id=chat_id):  # it goes on instead
            await self._take_over(run)
            return 0
        name = channel(chat_id)
        if await self.bus.acquire(name, ttl=self.durability.lease_ttl) is None:
            return 0  # still held: the turn runs somewhere, or its lease has not run out
        try:
            turns = await fail_orphans(self.store, chat_id)
            for event in failure_events(turns[-1]) if turns else []:
                await self.bus.publish(name, event)
        finally:
            await asyncio.shield(self.bus.end(name))
        return len(turns)

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
            if not await self._take_over(orphan[0], held=True):
                await asyncio.shield(self.bus.end(name))
            raise TurnBusy(chat_id)
        try:
            await fail_orphans(self.store, chat_id)  # a dead worker's turn, its lease expired
            relay = self.relay_for(route, store=self._saves)
            # the assistant message exists (in progress) before the first event
            opened = await open_turn(self.store, chat_id, message, place, route)
        except BaseException as exc:
            await asyncio.shield(self.bus.end(name))
            if isinstance(exc, Exception) and not isinstance(exc, NotFoundError | BranchRefused):
                log.exception("could not start a turn in chat %s", chat_id)
                raise TurnNotStarted(str(exc)) from exc
            raise
        # the history is read by the turn, after the 202: the one part that grows with the chat
        self._launch(
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

    def _launch(
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
            self._run(
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
        listener = loop.create_task(self._listen(chat_id, relay, task))
        self._running[chat_id] = _Running(task, relay, listener)

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
            running = self._running.get(chat_id)
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

    async def _run(
        self,
        relay: Relay,
        chat_id: str,
        message_id: str,
        history: Sequence[Message] | None,
        user: Mapping[str, Any],
        client_tools: Sequence[Tool],
        features: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        *,
        resume: TurnState | None = None,
        fresh: bool = False,
        continues: str | None = None,
    ) -> None:
        """`context`: more `Relay.run` arguments (`__model__`, `__request__`, metadata …),
        and `on_done`, called with the ended turn's result (its spend, `server.budgets`)."""
        context = dict(context or {})
        on_done = context.pop("on_done", None)
        recorder = TurnRecorder()
        paused: TurnPaused | None = None
        keeper = asyncio.get_running_loop().create_task(
            keep_alive(self.bus, self.store, self.durability, chat_id, message_id, recorder)
        )
        try:
            if history is None:  # a new turn: its history ends with the user message saved
                history = await self.store.load_messages(chat_id)
            if fresh:
                route = str(relay.name)  # relay_for names it after its route
                request = run_request(route, user, history, client_tools, features)
                await self.store.start_run(chat_id, message_id, owner=self.node, request=request)
                if resume is not None:  # a continued answer: a take-over keeps its items
                    await self.store.save_run_state(message_id, resume.to_json())
            result = await relay.run(
                history,
                sink=BusSink(self.bus, chat_id, recorder),
                chat_id=chat_id,
                message_id=message_id,
                user=user,
                extra_tools=client_tools,
                features=features,
                checkpoints=StoreCheckpoints(self.store, message_id),
                resume=resume,
                pause=True,
                continues=continues,
                **context,
            )
            if on_done is not None:
                await on_done(result)
        except TurnPaused as waiting:  # saved: no task, no memory held until it is answered
            paused = waiting
            with contextlib.suppress(Exception):  # what a reload shows meanwhile
                await self.store.checkpoint_turn(chat_id, message_id, recorder.turn("in_progress"))
        except asyncio.CancelledError:  # the engine saved the partial turn, if it had begun
            await asyncio.shield(self._cancelled_early(chat_id, message_id, recorder))
        except Exception as exc:  # never lose a turn silently
            log.exception("turn %s of chat %s crashed", message_id, chat_id)
            await self._report(chat_id, message_id, recorder, exc)
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
            if paused is not None:  # first: an answer from now on finds it paused
                await self._pause(message_id)
            running = self._running.pop(chat_id, None)  # before `end`: no newer turn yet
            if running is not None:
                running.listener.cancel()
            if not await self._ended(chat_id, message_id, relay, paused):
                await self.bus.end(channel(chat_id))

    async def _cancelled_early(self, chat_id: str, message_id: str, recorder: TurnRecorder) -> None:
        """A cancel that came before the engine took the turn (while its history was read,
        its run recorded, its tools listed): nobody saved it, so its row would stay
        `in_progress` (the next post then failed it as a dead server's). Saved `cancelled`
        here; a row the engine saved already is left alone (`checkpoint_turn` writes only
        one still in progress)."""
        turn = recorder.turn("cancelled", "Cancelled.")
        try:
            if await self.store.checkpoint_turn(chat_id, message_id, turn):
                for event in failure_events(turn):
                    await self.bus.publish(channel(chat_id), event)
        except Exception:
            log.exception("could not record the cancel of turn %s", message_id)

    async def _pause(self, message_id: str) -> None:
        try:
            await self.store.pause_run(message_id)
        except Exception as exc:  # it stays `running`: a take-over asks again
            log.warning("could not mark turn %s paused: %s", message_id, exc)

    async def _ended(
        self, chat_id: str, message_id: str, relay: Relay, paused: TurnPaused | None
    ) -> bool:
        """Forget a turn saved for good; a paused one answered while it paused is taken on
        again at once (True: it runs, keeping the lease)."""
        try:
            if paused is None:
                await self.store.end_run(message_id)
                return False
            state = TurnState(waiting=paused.waiting)
            answers = {
                call_id: relay.pending.expect(state.answer_key(call_id)).result()
                for call_id in paused.waiting
                if relay.pending.ready(state.answer_key(call_id))
            }
            if not answers:
                return False
            for run in await self.store.list_runs(chat_id=chat_id):
                if run.message_id == message_id:
                    return await self._take_over(run, held=True, answers=answers)
        except Exception as exc:  # a take-over finds it ended (or paused) all the same
            log.warning("could not record the end of turn %s: %s", message_id, exc)
        return False

    async def _end_paused(self, run: TurnRun, error: str, status: str = "failed") -> bool:
        """End a paused turn (its answer came too late, or it was cancelled), output kept."""
        name = channel(run.chat_id)
        if await self.bus.acquire(name, ttl=self.durability.lease_ttl) is None:
            return False
        try:
            rows = await self.store.in_progress_turns(chat_id=run.chat_id)
            row = unfinished(rows, run.message_id)
            if row is not None:
                turn = {**failed_turn(row, error), "status": status}
                await self.store.checkpoint_turn(run.chat_id, row.id, turn)
                for event in failure_events(turn):
                    await self.bus.publish(name, event)
            await self.store.end_run(run.message_id)
        finally:
            await asyncio.shield(self.bus.end(name))
        return True

    async def _report(
        self, chat_id: str, message_id: str, recorder: TurnRecorder, exc: Exception
    ) -> None:
        """A turn that died (a save that kept failing, say): an error event, a last save try."""
        turn = recorder.turn("failed", f"The turn failed: {type(exc).__name__}: {exc}")
        try:
            for event in failure_events(turn):
                await self.bus.publish(channel(chat_id), event)
            await self.store.checkpoint_turn(chat_id, message_id, turn)
        except Exception:
            log.exception("could not record the failure of turn %s", message_id)

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

    async def cancel(self, chat_id: str) -> bool:
        """True only when the turn's worker got the request (this one, or a listener)."""
        running = self._running.get(chat_id)
        if running is not None:
            running.task.cancel()
            return True
        if await self.bus.send_control(channel(chat_id), {"op": "cancel"}) > 0:
            return True
        for run in await self.store.list_runs(chat_id=chat_id):
            if run.status == "paused":
                return await self._end_paused(run, "Cancelled.", "cancelled")
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
                if await self._take_over(run, answers={call_id: answer}):
                    return True
            elif not delivered:
                delivered = await self.bus.send_control(channel(chat_id), message) > 0
            if loop.time() >= deadline:
                return delivered
            await asyncio.sleep(FINISHING_POLL_S)

    async def wait(self, chat_id: str) -> None:
        running = self._running.get(chat_id)
        if running is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(running.task)

    async def aclose(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        for running in list(self._running.values()):
            running.task.cancel()
        for running in list(self._running.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running.task
