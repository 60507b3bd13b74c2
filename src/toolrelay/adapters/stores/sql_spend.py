"""The SQL store's `spend`: tokens and cost per user and per API key per UTC day.

A mixin of `SQLStore` (`sql.py`). One row per
(scope, subject, day), added to with one upsert per ended turn, so reading a
day's spend is one primary-key lookup however many turns it had.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from toolrelay.adapters.stores.base import Spend
from toolrelay.adapters.stores.models import SpendRow
from toolrelay.adapters.stores.sql_rows import SQLParts


class SpendRows(SQLParts):
    """`Store`'s spend methods over `spend`; `SQLStore` provides the sessions."""

    async def add_spend(self, subjects: list[tuple[str, str]], day: str, spend: Spend) -> None:
        insert: Any = sqlite_insert if self._immediate else pg_insert
        async with self._write() as session:
            for scope, subject in subjects:
                values = {
                    "scope": scope,
                    "subject": subject,
                    "day": day,
                    "input_tokens": spend.input_tokens,
                    "output_tokens": spend.output_tokens,
                    "cost": spend.cost,
                    "turns": spend.turns,
                }
                statement = insert(SpendRow).values(**values)
                table = SpendRow.__table__.c
                await session.execute(
                    statement.on_conflict_do_update(
                        index_elements=["scope", "subject", "day"],
                        set_={
                            "input_tokens": table.input_tokens + spend.input_tokens,
                            "output_tokens": table.output_tokens + spend.output_tokens,
                            "cost": table.cost + spend.cost,
                            "turns": table.turns + spend.turns,
                        },
                    )
                )

    async def spend_of(self, scope: str, subject: str, day: str) -> Spend:
        async with self._sessions() as session:
            row = (
                await session.execute(
                    select(SpendRow).where(
                        SpendRow.scope == scope, SpendRow.subject == subject, SpendRow.day == day
                    )
                )
            ).scalar_one_or_none()
        if row is None:
            return Spend()
        return Spend(row.input_tokens, row.output_tokens, row.cost, row.turns)
