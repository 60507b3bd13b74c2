"""The memory store's users, API keys, web sessions and user valves.

A mixin of `MemoryStore` (`memory.py`), split out as `SQLStore`'s `sql_users` is:
`MemoryUsers` declares the dicts it reads, `MemoryStore.__init__` makes them. Keys
are kept as sha256 hashes only; `user_for_key` compares every hash (no early exit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from toolrelay.adapters.stores import (
    ApiKey,
    Clock,
    NotFoundError,
    User,
    generate_key,
    hash_key,
    key_matches,
    key_tail,
    public_prefix,
)
from toolrelay.core.ids import new_id

__all__ = ["MemoryUsers"]


class MemoryUsers:
    """`Store`'s user and key methods over dicts (declared here, assigned in `MemoryStore`)."""

    _now: Clock
    _users: dict[str, User]
    _keys: dict[str, ApiKey]
    _revoked_sessions: dict[str, datetime]
    _key_hashes: dict[str, str]  # key id -> sha256 hex
    _user_valves: dict[tuple[str, str], dict[str, Any]]

    async def create_user(self, name: str, *, is_admin: bool = False) -> User:
        user = User(id=new_id("user"), name=name, is_admin=is_admin, created_at=self._now())
        self._users[user.id] = user
        return user

    async def user_named(self, name: str) -> User | None:
        """The oldest user called `name`, if any (names are not unique)."""
        named = [u for u in self._users.values() if u.name == name]
        return min(named, key=lambda u: u.created_at) if named else None

    async def create_api_key(self, user_id: str, *, name: str = "") -> tuple[ApiKey, str]:
        key = generate_key()
        return await self.create_api_key_with_value(user_id, key, name=name), key

    async def create_api_key_with_value(self, user_id: str, key: str, *, name: str = "") -> ApiKey:
        if not key:
            raise ValueError("an API key cannot be empty")
        self._require_user(user_id)
        digest = hash_key(key)
        for key_id, stored in self._key_hashes.items():
            if stored == digest:
                existing = self._keys[key_id]
                if existing.user_id != user_id:
                    raise ValueError("this API key already belongs to another user")
                return existing
        record = ApiKey(
            id=new_id("key"),
            user_id=user_id,
            name=name,
            prefix=public_prefix(key),
            created_at=self._now(),
            revoked_at=None,
            tail=key_tail(key),
        )
        self._keys[record.id] = record
        self._key_hashes[record.id] = digest
        return record

    async def user_for_key(self, key: str) -> User | None:
        if not key:
            return None
        found: User | None = None
        for key_id, digest in self._key_hashes.items():  # every hash compared: no early exit
            record = self._keys[key_id]
            if key_matches(digest, key) and record.revoked_at is None:
                found = self._users.get(record.user_id)
        return found

    async def user_for_key_id(self, key_id: str) -> User | None:
        record = self._keys.get(key_id)
        if record is None or record.revoked_at is not None:
            return None
        return self._users.get(record.user_id)

    async def find_api_key(self, key: str) -> ApiKey | None:
        digest = hash_key(key)
        for key_id, stored in self._key_hashes.items():
            if stored == digest:
                return self._keys[key_id]
        return None

    async def list_api_keys(self, user_id: str | None = None) -> list[ApiKey]:
        keys = [k for k in self._keys.values() if user_id is None or k.user_id == user_id]
        return sorted(keys, key=lambda k: (k.created_at, k.id))

    async def revoke_api_key(self, key_id: str) -> bool:
        record = self._keys.get(key_id)
        if record is None or record.revoked_at is not None:
            return False
        self._keys[key_id] = replace(record, revoked_at=self._now())
        return True

    async def user_for_session(self, key_id: str, session_id: str) -> User | None:
        if session_id in self._revoked_sessions:
            return None
        return await self.user_for_key_id(key_id)

    async def revoke_session(self, session_id: str, expires: datetime) -> None:
        now = self._now()
        for gone in [s for s, until in self._revoked_sessions.items() if until <= now]:
            del self._revoked_sessions[gone]
        self._revoked_sessions[session_id] = expires

    async def get_user_valves(self, user_id: str, tool_id: str) -> dict[str, Any] | None:
        found = self._user_valves.get((user_id, tool_id))
        return None if found is None else dict(found)

    async def set_user_valves(self, user_id: str, tool_id: str, values: Mapping[str, Any]) -> None:
        if user_id not in self._users:
            raise NotFoundError(f"user {user_id!r} not found")
        self._user_valves[(user_id, tool_id)] = dict(values)

    async def count_users(self) -> int:
        return len(self._users)

    async def list_users(self) -> list[User]:
        return sorted(self._users.values(), key=lambda u: (u.created_at, u.id))

    def _require_user(self, user_id: str) -> None:
        if user_id not in self._users:
            raise NotFoundError(f"user {user_id!r} not found")
