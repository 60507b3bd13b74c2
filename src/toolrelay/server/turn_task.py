"""One chat turn's task on this worker: it runs, is followed, pauses, ends.

`TurnManager.launch` starts `run_turn` (the turn) and `listen` (its control
messages: cancel, client-tool results, approvals, from any worker over the bus).
`run_turn` records a new turn's run, runs the engine with the chat's bus as its
sink and the run's row as its checkpoints, and whatever happens, leaves the turn
in a state another worker can read: saved (completed, failed, cancelled — even a
cancel that came before the engine took it), or `paused` with the calls it waits
for, or taken on again at once when an answer reached it as it paused. It never
leaves the chat's lease held by a turn that no longer runs. A paused turn gives
the lease back without ending the bus's turn (`EventBus.pause`): the chat's
stream stays open for the turn's continuation, wherever it runs. One exception: when
the bus is gone with the parent process (`TurnManager.leave`), the turn is left
`in_progress` with its run, as a crash would leave it, for a take-over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolrelay.adapters.events import EventBus
from toolrelay.adapters.events.ipc import BusUnavailable
from toolrelay.core.events import Event
from toolrelay.engine.checkpoint import TurnPaused, TurnState
from toolrelay.engine.interfaces import Message, Tool
from toolrelay.engine.relay import Relay
from toolrelay.engine.request import TurnRequest
from toolrelay.server.durability import (
    TurnRecorder,
    channel,
    failure_events,
    give_back,
    keep_alive,
)
from toolrelay.server.live_events import ItemReferences
from toolrelay.server.resume import StoreCheckpoints, run_request

if TYPE_CHECKING:
    from toolrelay.server.turns import TurnManager

__all__ = ["BusSink", "RunningTurn", "listen", "run_turn"]

log = logging.getLogger(__name__)


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
class RunningTurn:
    """A turn running on this worker: its task, its relay (answers go to its pending
    calls) and its control listener."""

    task: asyncio.Task[Any]
    relay: Relay
    listener: asyncio.Task[None]


async def run_turn(
    m: TurnManager,
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
    """`context`: more `TurnRequest` fields (`__model__`, `__request__`, metadata …),
    and `on_done`, called with the ended turn's result (its spend, `server.budgets`)."""
    context = dict(context or {})
    on_done = context.pop("on_done", None)
    recorder = TurnRecorder()
    paused: TurnPaused | None = None
    left = False
    keeper = asyncio.get_running_loop().create_task(
        keep_alive(m.bus, m.store, m.durability, chat_id, message_id, recorder)
    )
    try:
        if history is None:  # a new turn: its history ends with the user message saved
            history = await m.store.load_messages(chat_id)
        if fresh:
            route = str(relay.name)  # relay_for names it after its route
            request = run_request(route, user, history, client_tools, features)
            await m.store.start_run(chat_id, message_id, owner=m.node, request=request)
            if resume is not None:  # a continued answer: a take-over keeps its items
                await m.store.save_run_state(message_id, resume.to_json())
        turn = TurnRequest(
            messages=history,
            chat_id=chat_id,
            message_id=message_id,
            user=user,
            extra_tools=client_tools,
            features=features,
            checkpoints=StoreCheckpoints(m.store, message_id),
            resume=resume,
            pause=True,
            continues=continues,
            **context,
        )
        result = await relay.run(turn, sink=BusSink(m.bus, chat_id, recorder))
        if on_done is not None:
            await on_done(result)
    except TurnPaused as waiting:  # saved: no task, no memory held until it is answered
        paused = waiting
        with contextlib.suppress(Exception):  # what a reload shows meanwhile
            await m.store.checkpoint_turn(chat_id, message_id, recorder.turn("in_progress"))
    except asyncio.CancelledError:  # the engine saved the partial turn, if it had begun
        if not m.leaving:
            await asyncio.shield(_cancelled_early(m, chat_id, message_id, recorder))
    except Exception as exc:  # never lose a turn silently
        left = await _crashed(m, chat_id, message_id, recorder, exc)
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
        if paused is not None:  # first: an answer from now on finds it paused
            await _pause(m, message_id)
        running = m.tasks.pop(chat_id, None)  # before `end`: no newer turn yet
        if running is not None:
            running.listener.cancel()
        if not (left or m.leaving) and not await _ended(m, chat_id, message_id, relay, paused):
            await give_back(m.bus, channel(chat_id), paused=paused is not None)


async def _crashed(
    m: TurnManager, chat_id: str, message_id: str, recorder: TurnRecorder, exc: Exception
) -> bool:
    """A turn that raised is reported failed, or, when the bus went with the parent
    process, left for a take-over (True)."""
    if m.leaving or _bus_lost(exc):
        log.warning("turn %s of chat %s left for a take-over: %s", message_id, chat_id, exc)
        return True
    log.exception("turn %s of chat %s crashed", message_id, chat_id)
    await _report(m, chat_id, message_id, recorder, exc)
    return False


def _bus_lost(exc: BaseException) -> bool:
    """`exc` is (or was caused by) the inter-process bus being gone (its host, the
    parent, died): the turn can be neither streamed nor recorded as ended."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BusUnavailable):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def _cancelled_early(
    m: TurnManager, chat_id: str, message_id: str, recorder: TurnRecorder
) -> None:
    """A cancel that came before the engine took the turn (while its history was read,
    its run recorded, its tools listed): nobody saved it, so its row would stay
    `in_progress` (the next post then failed it as a dead server's). Saved `cancelled`
    here; a row the engine saved already is left alone (`checkpoint_turn` writes only
    one still in progress)."""
    turn = recorder.turn("cancelled", "Cancelled.")
    try:
        if await m.store.checkpoint_turn(chat_id, message_id, turn):
            for event in failure_events(turn):
                await m.bus.publish(channel(chat_id), event)
    except Exception:
        log.exception("could not record the cancel of turn %s", message_id)


async def _pause(m: TurnManager, message_id: str) -> None:
    try:
        await m.store.pause_run(message_id)
    except Exception as exc:  # it stays `running`: a take-over asks again
        log.warning("could not mark turn %s paused: %s", message_id, exc)


async def _ended(
    m: TurnManager, chat_id: str, message_id: str, relay: Relay, paused: TurnPaused | None
) -> bool:
    """Forget a turn saved for good; a paused one answered while it paused is taken on
    again at once. True: the lease went with that (to the turn going on, or given back
    by `take_over`); False: the caller gives it back."""
    try:
        if paused is None:
            await m.store.end_run(message_id)
            return False
        state = TurnState(waiting=paused.waiting)
        answers = {
            call_id: relay.pending.expect(state.answer_key(call_id)).result()
            for call_id in paused.waiting
            if relay.pending.ready(state.answer_key(call_id))
        }
        runs = await m.store.list_runs(chat_id=chat_id) if answers else []
    except Exception as exc:  # a take-over finds it ended (or paused) all the same
        log.warning("could not record the end of turn %s: %s", message_id, exc)
        return False
    for run in runs:
        if run.message_id == message_id:
            try:
                await m.take_over(run, held=True, answers=answers)
            except Exception as exc:  # it gave the lease back; the answer's sender retries
                log.warning("could not take turn %s on with its answer: %s", message_id, exc)
            return True
    return False


async def _report(
    m: TurnManager, chat_id: str, message_id: str, recorder: TurnRecorder, exc: Exception
) -> None:
    """A turn that died (a save that kept failing, say): an error event, a last save try."""
    turn = recorder.turn("failed", f"The turn failed: {type(exc).__name__}: {exc}")
    try:
        for event in failure_events(turn):
            await m.bus.publish(channel(chat_id), event)
        await m.store.checkpoint_turn(chat_id, message_id, turn)
    except Exception:
        log.exception("could not record the failure of turn %s", message_id)


async def listen(m: TurnManager, chat_id: str, relay: Relay, task: asyncio.Task[Any]) -> None:
    try:
        await _follow_control(m, chat_id, relay, task)
    except asyncio.CancelledError:
        raise
    except Exception:  # the bus went away: the turn runs on, unreachable for control
        log.exception("control channel of chat %s failed", chat_id)


async def _follow_control(
    m: TurnManager, chat_id: str, relay: Relay, task: asyncio.Task[Any]
) -> None:
    async for message in m.bus.control(channel(chat_id)):
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
