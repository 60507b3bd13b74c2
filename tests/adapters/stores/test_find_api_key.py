"""`find_api_key`: the record of a key whatever its state (start-up checks the admin key)."""

from __future__ import annotations

import pytest

from toolrelay.adapters.stores import Store

pytestmark = pytest.mark.anyio


async def test_find_api_key_sees_revoked_keys(store: Store) -> None:
    user = await store.create_user("admin", is_admin=True)
    record = await store.create_api_key_with_value(user.id, "tr-configured-key", name="env")
    assert await store.find_api_key("tr-configured-key") == record
    assert await store.revoke_api_key(record.id)
    found = await store.find_api_key("tr-configured-key")
    assert found is not None and found.id == record.id and found.revoked_at is not None
    assert await store.user_for_key("tr-configured-key") is None
    assert await store.find_api_key("tr-unknown") is None


async def test_user_for_key_id_only_while_the_key_is_active(store: Store) -> None:
    """Browser sessions name their key by id: revoking the key ends them."""
    user = await store.create_user("ann")
    record, _ = await store.create_api_key(user.id, name="laptop")
    assert await store.user_for_key_id(record.id) == user
    assert await store.user_for_key_id("key_unknown") is None
    assert await store.revoke_api_key(record.id)
    assert await store.user_for_key_id(record.id) is None
