"""The SQL store's users, API keys, signed-out sessions and per-user tool valves.

A mixin of `SQLStore` (`sql.py`): each call is one short transaction, run whole
even when its caller is cancelled (`stores.whole`). A key is stored as its hash
(`keys`), with a public prefix and its last 4 characters to tell keys apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update

from toolrelay.adapters.stores.base import ApiKey, User
from toolrelay.adapters.stores.keys import (
    generate_key,
    hash_key,
    key_matches,
    key_tail,
    public_prefix,
)
from toolrelay.adapters.stores.models import ApiKeyRow, RevokedSessionRow, UserRow, UserValvesRow
from toolrelay.adapters.stores.sql_rows import SQLParts, record, require_user
from toolrelay.core.ids import new_id

__all__ = ["UserRows"]


def _api_key(row: ApiKeyRow) -> ApiKey:
    return record(ApiKey, row, tail=row.tail or "")


class UserRows(SQLParts):
    """`Store`'s user, key, session and valve methods over their tables."""

    async def create_user(self, name: str, *, is_admin: bool = False) -> User:
        row = UserRow(id=new_id("user"), name=name, is_admin=is_admin, created_at=self._now())
        async with self._write() as session:
            session.add(row)
        return record(User, row)

    async def user_named(self, name: str) -> User | None:
        """The oldest user called `name`, if any (names are not unique)."""
        async with self._sessions() as session:
            query = select(UserRow).where(UserRow.name == name).order_by(UserRow.created_at)
            row = await session.scalar(query.limit(1))
        return None if row is None else record(User, row)

    async def create_api_key(self, user_id: str, *, name: str = "") -> tuple[ApiKey, str]:
        key = generate_key()
        return await self.create_api_key_with_value(user_id, key, name=name), key

    async def create_api_key_with_value(self, user_id: str, key: str, *, name: str = "") -> ApiKey:
        """Store a given key (TOOLRELAY_ADMIN_KEY); the same key for the same user is a no-op."""
        if not key:
            raise ValueError("an API key cannot be empty")
        digest = hash_key(key)
        async with self._write() as session:
            await require_user(session, user_id)
            existing = await session.scalar(select(ApiKeyRow).where(ApiKeyRow.key_hash == digest))
            if existing is not None:
                if existing.user_id != user_id:
                    raise ValueError("this API key already belongs to another user")
                return _api_key(existing)
            row = ApiKeyRow(
                id=new_id("key"),
                user_id=user_id,
                name=name,
                prefix=public_prefix(key),
                key_hash=digest,
                created_at=self._now(),
                revoked_at=None,
                tail=key_tail(key),
            )
            session.add(row)
        return _api_key(row)

    async def user_for_key(self, key: str) -> User | None:
        """The key's owner, or None when the key is unknown or revoked."""
        if not key:
            return None
        query = (
            select(ApiKeyRow.key_hash, UserRow)
            .join(UserRow, UserRow.id == ApiKeyRow.user_id)
            .where(ApiKeyRow.key_hash == hash_key(key), ApiKeyRow.revoked_at.is_(None))
        )
        async with self._sessions() as session:
            found = (await session.execute(query)).first()
        if found is None or not key_matches(found[0], key):
            return None
        return record(User, found[1])

    async def user_for_key_id(self, key_id: str) -> User | None:
        """The owner of the key with this id, or None when it is unknown or revoked."""
        query = (
            select(UserRow)
            .join(ApiKeyRow, UserRow.id == ApiKeyRow.user_id)
            .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
        )
        async with self._sessions() as session:
            row = await session.scalar(query)
        return None if row is None else record(User, row)

    async def find_api_key(self, key: str) -> ApiKey | None:
        """The record of this key, revoked or not."""
        query = select(ApiKeyRow).where(ApiKeyRow.key_hash == hash_key(key))
        async with self._sessions() as session:
            row = await session.scalar(query)
        return None if row is None else _api_key(row)

    async def list_api_keys(self, user_id: str | None = None) -> list[ApiKey]:
        query = select(ApiKeyRow).order_by(ApiKeyRow.created_at, ApiKeyRow.id)
        if user_id is not None:
            query = query.where(ApiKeyRow.user_id == user_id)
        async with self._sessions() as session:
            return [_api_key(row) for row in await session.scalars(query)]

    async def revoke_api_key(self, key_id: str) -> bool:
        """True when this call revoked the key; False if unknown or already revoked."""
        query = (
            update(ApiKeyRow)
            .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
            .values(revoked_at=self._now())
        )
        async with self._write() as session:
            result = await session.execute(query)
        return bool(getattr(result, "rowcount", 0))

    async def user_for_session(self, key_id: str, session_id: str) -> User | None:
        """The owner of the session's key while the key is active and the session was not
        signed out: one query."""
        revoked = select(RevokedSessionRow.id).where(RevokedSessionRow.id == session_id)
        query = (
            select(UserRow)
            .join(ApiKeyRow, UserRow.id == ApiKeyRow.user_id)
            .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None), ~revoked.exists())
        )
        async with self._sessions() as session:
            row = await session.scalar(query)
        return None if row is None else record(User, row)

    async def revoke_session(self, session_id: str, expires: datetime) -> None:
        """Record the sign-out (again: a no-op); rows of sessions past their expiry go."""
        async with self._write() as session:
            await session.execute(
                delete(RevokedSessionRow).where(RevokedSessionRow.expires_at <= self._now())
            )
            if await session.get(RevokedSessionRow, session_id) is None:
                session.add(RevokedSessionRow(id=session_id, expires_at=expires))

    async def get_user_valves(self, user_id: str, tool_id: str) -> dict[str, Any] | None:
        """The user's own valve values for the tool, or None when never set."""
        async with self._sessions() as session:
            row = await session.get(UserValvesRow, (user_id, tool_id))
        return None if row is None else dict(row.values)

    async def set_user_valves(self, user_id: str, tool_id: str, values: Mapping[str, Any]) -> None:
        """Store (replace) the user's valve values for the tool, checked by the caller."""
        async with self._write() as session:
            await require_user(session, user_id)
            row = await session.get(UserValvesRow, (user_id, tool_id))
            if row is None:
                row = UserValvesRow(user_id=user_id, tool_id=tool_id)
                session.add(row)
            row.values = dict(values)
            row.updated_at = self._now()

    async def count_users(self) -> int:
        async with self._sessions() as session:
            return int(await session.scalar(select(func.count()).select_from(UserRow)) or 0)

    async def list_users(self) -> list[User]:
        async with self._sessions() as session:
            rows = await session.scalars(select(UserRow).order_by(UserRow.created_at, UserRow.id))
            return [record(User, row) for row in rows]
