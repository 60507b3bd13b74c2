"""The SQL store's `turn_runs`: turns not ended yet and their last checkpoint.

A mixin of `SQLStore` (`sql.py`): each call is one short
transaction, run whole even when its caller is cancelled (`stores.whole`); a
checkpoint is one UPDATE of one row, never per token. A library process's lease
(`lease_until`) is taken by one conditional UPDATE (or, for a new run, under the
chat row's lock), so of two processes exactly one gets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, or_, select, update

from toolrelay.adapters.stores.base import NotFoundError, TurnRun
from toolrelay.adapters.stores.models import ChatRow, TurnRunRow
from toolrelay.adapters.stores.records import plain_json
from toolrelay.adapters.stores.sql_rows import SQLParts, record


def _run(row: TurnRunRow) -> TurnRun:
    state = dict(row.state) if row.state is not None else None
    return record(TurnRun, row, request=dict(row.request or {}), state=state)


class RunRows(SQLParts):
    """`Store`'s run methods over `turn_runs`; `SQLStore` provides the session makers."""

    async def start_run(
        self,
        chat_id: str,
        message_id: str,
        *,
        owner: str,
        request: Mapping[str, Any],
        lease: float | None = None,
    ) -> bool:
        now = self._now()
        row = TurnRunRow(
            message_id=message_id,
            chat_id=chat_id,
            owner=owner,
            status="running",
            resumes=0,
            request=plain_json(request),
            state=None,
            created_at=now,
            updated_at=now,
            lease_until=None if lease is None else now + timedelta(seconds=lease),
        )
        async with self._write() as session:
            chat = select(ChatRow.id).where(ChatRow.id == chat_id).with_for_update()
            if await session.scalar(chat) is None:  # locked: one start at a time per chat
                raise NotFoundError(f"chat {chat_id!r} not found")
            if lease is not None:
                held = select(TurnRunRow.message_id).where(
                    TurnRunRow.chat_id == chat_id,
                    TurnRunRow.status == "running",
                    TurnRunRow.owner != owner,
                    TurnRunRow.lease_until > now,
                )
                if await session.scalar(held.limit(1)) is not None:
                    return False
            session.add(row)
        return True

    async def save_run_state(self, message_id: str, state: Mapping[str, Any]) -> bool:
        query = (
            update(TurnRunRow)
            .where(TurnRunRow.message_id == message_id)
            .values(state=plain_json(state), updated_at=self._now())
        )
        async with self._write() as session:
            result = await session.execute(query)
        return bool(getattr(result, "rowcount", 0))

    async def claim_run(
        self, message_id: str, *, owner: str, resumed: bool = True, lease: float | None = None
    ) -> TurnRun | None:
        now = self._now()
        values: dict[str, Any] = {"owner": owner, "updated_at": now, "status": "running"}
        if resumed:
            values["resumes"] = TurnRunRow.resumes + 1
        claim = update(TurnRunRow).where(TurnRunRow.message_id == message_id)
        if lease is not None:
            values["lease_until"] = now + timedelta(seconds=lease)
            claim = claim.where(_free(owner, now))
        async with self._write() as session:
            result = await session.execute(claim.values(**values))
            if not getattr(result, "rowcount", 0):
                return None
            row = await session.get(TurnRunRow, message_id, populate_existing=True)
            return None if row is None else _run(row)

    async def renew_run(self, message_id: str, *, owner: str, lease: float) -> bool:
        now = self._now()
        query = (
            update(TurnRunRow)
            .where(
                TurnRunRow.message_id == message_id,
                TurnRunRow.owner == owner,
                TurnRunRow.status == "running",
            )
            .values(lease_until=now + timedelta(seconds=lease))
        )
        async with self._write() as session:
            result = await session.execute(query)
        return bool(getattr(result, "rowcount", 0))

    async def pause_run(self, message_id: str) -> bool:
        query = (
            update(TurnRunRow)
            .where(TurnRunRow.message_id == message_id)
            .values(status="paused", updated_at=self._now(), lease_until=None)
        )
        async with self._write() as session:
            result = await session.execute(query)
        return bool(getattr(result, "rowcount", 0))

    async def end_run(self, message_id: str) -> None:
        async with self._write() as session:
            await session.execute(delete(TurnRunRow).where(TurnRunRow.message_id == message_id))

    async def list_runs(
        self, *, chat_id: str | None = None, owner: str | None = None
    ) -> list[TurnRun]:
        query = select(TurnRunRow)
        if chat_id is not None:
            query = query.where(TurnRunRow.chat_id == chat_id)
        if owner is not None:
            query = query.where(TurnRunRow.owner == owner)
        async with self._sessions() as session:
            rows = await session.scalars(query.order_by(TurnRunRow.created_at))
            return [_run(row) for row in rows]


def _free(owner: str, now: Any) -> Any:
    """A run `owner` may take: paused, its lease free (none, or run out) or theirs."""
    return or_(
        TurnRunRow.status == "paused",
        TurnRunRow.lease_until.is_(None),
        TurnRunRow.lease_until <= now,
        TurnRunRow.owner == owner,
    )


__all__ = ["RunRows"]
