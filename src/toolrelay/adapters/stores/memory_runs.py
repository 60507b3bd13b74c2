"""The memory store's turn runs: turns not ended yet, their state and their leases.

A mixin of `MemoryStore` (`memory.py`), split out as `SQLStore`'s `sql_runs` is:
`MemoryRuns` declares the dicts it reads, `MemoryStore.__init__` makes them. A run
is keyed by its message id; a lease held by another owner refuses a start or a claim,
as `SQLStore` does. Runs are copied out, so callers cannot edit the store.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from toolrelay.adapters.stores import Chat, Clock, NotFoundError, TurnRun, plain_json

__all__ = ["MemoryRuns"]


class MemoryRuns:
    """`Store`'s run methods over dicts (declared here, assigned in `MemoryStore`)."""

    _now: Clock
    _chats: dict[str, Chat]
    _runs: dict[str, TurnRun]  # message id -> the run of a turn not ended

    async def start_run(
        self,
        chat_id: str,
        message_id: str,
        *,
        owner: str,
        request: Mapping[str, Any],
        lease: float | None = None,
    ) -> bool:
        if chat_id not in self._chats:
            raise NotFoundError(f"chat {chat_id!r} not found")
        now = self._now()
        if lease is not None and any(
            r.chat_id == chat_id and _held(r, owner, now) for r in self._runs.values()
        ):
            return False
        until = None if lease is None else now + timedelta(seconds=lease)
        self._runs[message_id] = TurnRun(
            message_id, chat_id, owner, "running", 0, plain_json(request), None, now, until
        )
        return True

    async def save_run_state(self, message_id: str, state: Mapping[str, Any]) -> bool:
        run = self._runs.get(message_id)
        if run is None:
            return False
        self._runs[message_id] = replace(run, state=plain_json(state), updated_at=self._now())
        return True

    async def claim_run(
        self, message_id: str, *, owner: str, resumed: bool = True, lease: float | None = None
    ) -> TurnRun | None:
        run = self._runs.get(message_id)
        now = self._now()
        if run is None or (lease is not None and _held(run, owner, now)):
            return None
        resumes = run.resumes + 1 if resumed else run.resumes
        until = run.lease_until if lease is None else now + timedelta(seconds=lease)
        run = replace(
            run, owner=owner, status="running", resumes=resumes, updated_at=now, lease_until=until
        )
        self._runs[message_id] = run
        return copy.deepcopy(run)

    async def renew_run(self, message_id: str, *, owner: str, lease: float) -> bool:
        run = self._runs.get(message_id)
        if run is None or run.owner != owner or run.status != "running":
            return False
        until = self._now() + timedelta(seconds=lease)
        self._runs[message_id] = replace(run, lease_until=until)
        return True

    async def pause_run(self, message_id: str) -> bool:
        run = self._runs.get(message_id)
        if run is None:
            return False
        self._runs[message_id] = replace(
            run, status="paused", updated_at=self._now(), lease_until=None
        )
        return True

    async def end_run(self, message_id: str) -> None:
        self._runs.pop(message_id, None)

    async def list_runs(
        self, *, chat_id: str | None = None, owner: str | None = None
    ) -> list[TurnRun]:
        return [
            copy.deepcopy(r)
            for r in self._runs.values()
            if r.chat_id in self._chats
            and (chat_id is None or r.chat_id == chat_id)
            and (owner is None or r.owner == owner)
        ]


def _held(run: TurnRun, owner: str, now: datetime) -> bool:
    """Whether another owner holds a live lease on `run` (`SQLStore`'s `_free`, negated)."""
    return (
        run.status == "running"
        and run.owner != owner
        and run.lease_until is not None
        and run.lease_until > now
    )
