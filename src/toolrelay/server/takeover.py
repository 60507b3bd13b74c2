"""Taking a chat turn over from its last checkpoint, and ending turns nobody runs.

A run (`turn_runs`) goes on here when its runner died (its lease ran out; this
server's own runs at once after a restart), or when a paused run gets the answer
it waits for. The chat's lease is taken first and the run read again under it,
so of many workers exactly one takes a run on, and a run that paused (or went on)
meanwhile is left alone. A run that cannot go on (its route is gone, its state
unreadable, `max_resumes` reached) fails with the reason, its output kept. A
paused run past `pause_timeout`, or cancelled, ends here too; `settle` fails a
dead worker's turn that has no run to go on from.

A paused run's turn stays the chat's turn on the bus (`EventBus.pause`): the lease
that takes it on goes on with it, and whoever takes the lease and leaves the run
paused gives it back paused (`give_back`), never ended, so the chat's stream stays
open and a replay from the turn's start keeps what came before the pause.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from toolrelay.adapters.stores import TurnRun
from toolrelay.engine.durable_runs import LIBRARY_OWNER
from toolrelay.server.durability import (
    channel,
    fail_orphans,
    failed_turn,
    failure_events,
    give_back,
)
from toolrelay.server.resume import (
    Rebuilt,
    expiry_text,
    pause_expired,
    resume_refusal,
    unfinished,
)

if TYPE_CHECKING:
    from toolrelay.server.turns import TurnManager

__all__ = ["end_paused", "settle", "take_over", "take_over_expired", "watch_runs"]

log = logging.getLogger(__name__)


async def take_over(
    m: TurnManager,
    run: TurnRun,
    *,
    own: bool = False,
    held: bool = False,
    answers: Mapping[str, Any] | None = None,
) -> bool:
    """Go on with `run` from its last checkpoint if its chat's lease can be had (`own`:
    this server's, dead with its last life: renewed instead of waited out; `held`: the
    caller has it). A paused run goes on only with `answers` to calls it waits for.
    A run that cannot go on fails with the reason. False: not taken on, and the lease
    (taken here, or `held`) given back (`give_back`: a run left paused stays paused)."""
    chat_id, name = run.chat_id, channel(run.chat_id)
    paused = run.status == "paused"
    if not await _lease(m, run, own=own, held=held, answered=bool(answers)):
        return False
    try:
        runs = await m.store.list_runs(chat_id=chat_id)
        now = [r for r in runs if r.message_id == run.message_id]
        if now and (now[0].status == "paused") != paused:  # it paused (or went on) since
            await give_back(m.bus, name, paused=now[0].status == "paused")
            return False
        claimed = await m.store.claim_run(run.message_id, owner=m.node, resumed=not paused)
        row = unfinished(await m.store.in_progress_turns(chat_id=chat_id), run.message_id)
        if claimed is None or row is None:  # it ended just before its runner died
            await m.store.end_run(run.message_id)
            await m.bus.end(name)
            return False
        refusal = resume_refusal(claimed, m.registry.routes, m.durability.max_resumes)
        try:
            rebuilt = Rebuilt(claimed)
        except (ValueError, TypeError, KeyError) as exc:
            refusal = (
                refusal or f"The turn could not be resumed ({exc}); the partial answer was kept."
            )
        if refusal is None and answers:
            if not set(answers) & set(rebuilt.state.waiting):  # not what it waits for
                await m.store.pause_run(run.message_id)
                await m.bus.pause(name)
                return False
            rebuilt.state.answers.update(answers)
            # saved: whoever sent an answer sees that it was taken (`answer`)
            await m.store.save_run_state(run.message_id, rebuilt.state.to_json())
        if refusal is not None:
            turn = failed_turn(row, refusal)
            await m.store.checkpoint_turn(chat_id, row.id, turn)
            for event in failure_events(turn):
                await m.bus.publish(name, event)
            await m.store.end_run(run.message_id)
            await m.bus.end(name)
            log.warning("turn %s of chat %s not resumed: %s", row.id, chat_id, refusal)
            return False
        relay = m.relay_for(rebuilt.route, store=m.saves)
    except BaseException:  # a paused run stays paused for the answer's next try
        await asyncio.shield(give_back(m.bus, name, paused=paused))
        raise
    log.log(
        logging.INFO if paused else logging.WARNING,
        "resuming turn %s of chat %s from its checkpoint (%s)",
        row.id,
        chat_id,
        "answered" if paused else f"take-over {claimed.resumes}",
    )
    m.launch(
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


async def _lease(m: TurnManager, run: TurnRun, *, own: bool, held: bool, answered: bool) -> bool:
    """The chat's lease to take `run` on with, or False: its turn runs (here, or its
    runner lives), it is paused and no answer came, or a library runs it (a `held`
    lease given back then)."""
    name = channel(run.chat_id)
    paused = run.status == "paused"
    if run.chat_id in m.tasks:
        return False  # its turn runs here, with the lease
    if (paused and not answered) or library_run(run):
        if held:
            await give_back(m.bus, name, paused=paused and not library_run(run))
        return False
    ttl = m.durability.lease_ttl
    if held or (own and await m.bus.renew(name, ttl=ttl)):
        return True
    return await m.bus.acquire(name, ttl=ttl) is not None


async def take_over_expired(m: TurnManager) -> int:
    """Take over every run nobody holds a lease on (its runner died); how many."""
    taken = 0
    now = datetime.now(UTC)
    timeout = m.durability.pause_timeout
    for run in await m.store.list_runs():
        if library_run(run):  # a library process's (`Relay.resume`), not a server's
            continue
        if run.status == "running" and run.chat_id not in m.tasks:
            taken += await take_over(m, run)
        elif pause_expired(run, timeout, now):
            await end_paused(m, run, expiry_text(timeout))
    return taken


async def watch_runs(m: TurnManager) -> None:
    while True:
        await asyncio.sleep(m.durability.watch_s)
        try:
            await take_over_expired(m)
        except Exception as exc:  # the store or bus is away: try again next time
            log.warning("looking for turns to take over failed: %s", exc)


async def settle(m: TurnManager, chat_id: str) -> int:
    """Fail the chat's turns left `in_progress` by a worker whose lease ran out.

    Called when someone looks at a chat with no running turn, so a dead
    worker's turn is repaired (and its followers told) once its lease expires.
    """
    if chat_id in m.tasks or not await m.store.in_progress_turns(chat_id=chat_id):
        return 0
    for run in await m.store.list_runs(chat_id=chat_id):  # it goes on instead
        await take_over(m, run)
        return 0
    name = channel(chat_id)
    if await m.bus.acquire(name, ttl=m.durability.lease_ttl) is None:
        return 0  # still held: the turn runs somewhere, or its lease has not run out
    try:
        turns = await fail_orphans(m.store, chat_id)
        for event in failure_events(turns[-1]) if turns else []:
            await m.bus.publish(name, event)
    finally:
        await asyncio.shield(m.bus.end(name))
    return len(turns)


async def end_paused(m: TurnManager, run: TurnRun, error: str, status: str = "failed") -> bool:
    """End a paused turn (its answer came too late, or it was cancelled), output kept."""
    name = channel(run.chat_id)
    if await m.bus.acquire(name, ttl=m.durability.lease_ttl) is None:
        return False
    try:
        rows = await m.store.in_progress_turns(chat_id=run.chat_id)
        row = unfinished(rows, run.message_id)
        if row is not None:
            turn = {**failed_turn(row, error), "status": status}
            await m.store.checkpoint_turn(run.chat_id, row.id, turn)
            for event in failure_events(turn):
                await m.bus.publish(name, event)
        await m.store.end_run(run.message_id)
    finally:
        await asyncio.shield(m.bus.end(name))
    return True


def library_run(run: TurnRun) -> bool:
    """A run a library `Relay` recorded (`run(..., durable=True)`): its process resumes it."""
    return run.owner.startswith(LIBRARY_OWNER)
