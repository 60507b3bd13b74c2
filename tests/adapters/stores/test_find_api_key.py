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
