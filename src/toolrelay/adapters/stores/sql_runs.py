"""The SQL store's `turn_runs`: turns not ended yet and their last checkpoint.

A mixin of `SQLStore` (`sql.py`): each call is one short
transaction, run whole even when its caller is cancelled (`stores.whole`); a
checkpoint is one UPDATE of one row, never per token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import delete, select, update

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
        self, chat_id: str, message_id: str, *, owner: str, request: Mapping[str, Any]
    ) -> None:
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
        )
        async with self._write() as session:
            if await session.get(ChatRow, chat_id) is None:
                raise NotFoundError(f"chat {chat_id!r} not found")
            session.add(row)

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
        self, message_id: str, *, owner: str, resumed: bool = True
    ) -> TurnRun | None:
        async with self._write() as session:
            row = await session.get(TurnRunRow, message_id)
            if row is None:
                return None
            row.owner, row.updated_at, row.status = owner, self._now(), "running"
            if resumed:
                row.resumes += 1
            return _run(row)

    async def pause_run(self, message_id: str) -> bool:
        query = (
            update(TurnRunRow)
            .where(TurnRunRow.message_id == message_id)
            .values(status="paused", updated_at=self._now())
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


__all__ = ["RunRows"]
