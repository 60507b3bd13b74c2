"""A library turn that outlives its process: `Relay.run(..., durable=True)` and
`Relay.resume(chat_id)` over a store that keeps runs.

The server records each chat turn in the store's `turn_runs` (`server/resume.py`);
a library `Relay` given such a store (`SQLStore` on SQLite or PostgreSQL,
`MemoryStore`) does the same when a turn is run `durable`: the run is recorded
with what rebuilds it (the messages, the user, the features, whether it pauses),
its state is checkpointed at each step boundary (`engine.checkpoint`), a pause
marks it `paused` (`TurnPaused` is raised to the caller) and its end forgets it.
`resume(chat_id)`, in this process or a new one, reads the chat's run and goes
on from its last checkpoint: a paused turn with the answers given to this relay
(`approve`, `submit_tool_result`) before the call (a call still unanswered is
asked again and the turn pauses again), a turn whose process died with its
finished calls kept and its cut ones re-run or reported as the checkpoint rules
say.

One process runs a chat's durable turn at a time: the run is leased in the store
to its process (`Store.claim_run(..., lease=)`), renewed every third of
`Relay.run_lease_s` while the turn runs, let go when it pauses or ends (a cancel
and a failure too). Another process's `resume` (or durable `run` in that chat)
raises `RunHeld` meanwhile; a killed process's lease runs out after
`run_lease_s`, as a server's turn lease does, and the run can be resumed. A server
sharing the store leaves library runs alone (their owner starts with
`LIBRARY_OWNER`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from toolrelay.engine.checkpoint import TurnPaused, TurnState
from toolrelay.engine.interfaces import Message

__all__ = [
    "LEASE_S",
    "LIBRARY_OWNER",
    "NoRunToResume",
    "RunHeld",
    "RunStore",
    "SavedRun",
    "keeps_runs",
    "library_owner",
]

T = TypeVar("T")

log = logging.getLogger(__name__)

LEASE_S = 30.0
"""How long a library process holds a durable run without renewing it (`Relay.run_lease_s`)."""

LIBRARY_OWNER = "relay:"
"""How a library run's owner starts (a server takes over only its own kind)."""


class NoRunToResume(LookupError):
    """`Relay.resume` found no unfinished durable turn in the chat."""


class RunHeld(RuntimeError):
    """Another live process runs the chat's durable turn (it holds the run's lease): this
    one neither resumes it nor starts another. Try again once that turn ends, or once its
    lease runs out if that process died."""


class SavedRun(Protocol):
    """A recorded run as a store returns it (`adapters.stores.TurnRun`)."""

    @property
    def message_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def resumes(self) -> int: ...
    @property
    def request(self) -> dict[str, Any]: ...
    @property
    def state(self) -> dict[str, Any] | None: ...


class RunStore(Protocol):
    """The part of a store that keeps runs (`adapters.stores.Store`)."""

    async def start_run(
        self,
        chat_id: str,
        message_id: str,
        *,
        owner: str,
        request: Mapping[str, Any],
        lease: float | None = None,
    ) -> bool: ...

    async def save_run_state(self, message_id: str, state: Mapping[str, Any]) -> bool: ...

    async def claim_run(
        self, message_id: str, *, owner: str, resumed: bool = True, lease: float | None = None
    ) -> SavedRun | None: ...

    async def renew_run(self, message_id: str, *, owner: str, lease: float) -> bool: ...

    async def pause_run(self, message_id: str) -> bool: ...

    async def end_run(self, message_id: str) -> None: ...

    async def list_runs(
        self, *, chat_id: str | None = None, owner: str | None = None
    ) -> Sequence[SavedRun]: ...


_RUN_METHODS = (
    "start_run",
    "save_run_state",
    "claim_run",
    "renew_run",
    "pause_run",
    "end_run",
    "list_runs",
)


def keeps_runs(store: object) -> bool:
    """Whether `store` can record runs (a `ChatStore` need not)."""
    return all(callable(getattr(store, name, None)) for name in _RUN_METHODS)


def library_owner() -> str:
    """This process as a run's owner."""
    return f"{LIBRARY_OWNER}{socket.gethostname()}:{os.getpid()}"


class RunCheckpoints:
    """`engine.checkpoint.Checkpoints` on a run's row."""

    def __init__(self, store: RunStore, message_id: str) -> None:
        self._store = store
        self._message_id = message_id

    async def save(self, state: Mapping[str, Any]) -> None:
        await self._store.save_run_state(self._message_id, state)


def run_request(
    messages: Sequence[Message],
    user: Mapping[str, Any] | None,
    features: Mapping[str, Any] | None,
    *,
    pause: bool,
) -> dict[str, Any]:
    """What `Relay.resume` rebuilds the turn from, as plain JSON."""
    return {
        "history": [dict(m) for m in messages],
        "user": dict(user) if user is not None else None,
        "features": dict(features) if features is not None else None,
        "pause": pause,
    }


async def recorded(store: RunStore, message_id: str, turn: Awaitable[T], *, lease: float) -> T:
    """Await `turn` (a `Relay.run` of a recorded run) holding its run's lease (renewed every
    third of `lease`), and keep its record right: a pause marks it `paused`, any other
    end forgets it (the engine saved the turn; a cancel too), both letting the lease go.
    A process that dies meanwhile leaves it `running`, to resume once its lease is out."""
    renewing = asyncio.create_task(_renew(store, message_id, lease))
    try:
        result: T = await turn
    except TurnPaused:
        await _stop(renewing)
        await store.pause_run(message_id)
        raise
    except BaseException:
        await asyncio.shield(_end(store, message_id, renewing))
        raise
    await _end(store, message_id, renewing)
    return result


async def _renew(store: RunStore, message_id: str, lease: float) -> None:
    owner = library_owner()
    while True:
        await asyncio.sleep(lease / 3)
        try:
            held = await store.renew_run(message_id, owner=owner, lease=lease)
        except Exception as exc:  # the store is away: try again next time
            log.warning("renewing the lease of durable run %s failed: %s", message_id, exc)
            continue
        if not held:
            log.warning("durable run %s lost its lease (another process took it)", message_id)
            return


async def _stop(renewing: asyncio.Task[None]) -> None:
    renewing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await renewing


async def _end(store: RunStore, message_id: str, renewing: asyncio.Task[None]) -> None:
    await _stop(renewing)
    await store.end_run(message_id)


async def claimed(store: RunStore, chat_id: str, run: SavedRun, lease: float) -> SavedRun:
    """`run`, taken by this process with its lease; `RunHeld` when another process holds
    it, `NoRunToResume` when it ended meanwhile."""
    owner = library_owner()
    taken = await store.claim_run(
        run.message_id, owner=owner, resumed=run.status != "paused", lease=lease
    )
    if taken is not None:
        return taken
    if any(r.message_id == run.message_id for r in await store.list_runs(chat_id=chat_id)):
        raise RunHeld(f"another process runs durable turn {run.message_id!r} (its lease is live)")
    raise NoRunToResume(f"durable turn {run.message_id!r} ended meanwhile")


async def unfinished_run(store: RunStore, chat_id: str) -> SavedRun:
    """The chat's durable run to resume; `NoRunToResume` if there is none."""
    runs = await store.list_runs(chat_id=chat_id)
    if not runs:
        raise NoRunToResume(f"chat {chat_id!r} has no unfinished durable turn")
    return runs[0]


def state_of(run: SavedRun) -> TurnState:
    """Where the run stood (nothing saved yet: from the start)."""
    return TurnState.from_json(run.state) if run.state is not None else TurnState()
