"""Signed-out browser sessions, and the key tail that tells keys apart, on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from toolrelay.adapters.stores import Store

pytestmark = pytest.mark.anyio


async def test_a_signed_out_session_is_refused_and_others_of_its_key_are_not(
    store: Store,
) -> None:
    user = await store.create_user("ann")
    record, _ = await store.create_api_key(user.id)
    assert await store.user_for_session(record.id, "s1") == user
    await store.revoke_session("s1", datetime.now(UTC) + timedelta(days=7))
    await store.revoke_session("s1", datetime.now(UTC) + timedelta(days=7))  # twice: no error
    assert await store.user_for_session(record.id, "s1") is None
    assert await store.user_for_session(record.id, "s2") == user
    assert await store.revoke_api_key(record.id)
    assert await store.user_for_session(record.id, "s2") is None


async def test_keys_keep_their_last_four_characters_and_no_more(store: Store) -> None:
    user = await store.create_user("ann")
    made, key = await store.create_api_key(user.id)
    assert made.tail == key[-4:] and made.prefix == "tr-"
    listed = await store.list_api_keys(user.id)
    assert [k.tail for k in listed] == [key[-4:]]
    short = await store.create_api_key_with_value(user.id, "tr-short-key")
    assert short.tail == ""  # a short (chosen) key keeps none of its characters
