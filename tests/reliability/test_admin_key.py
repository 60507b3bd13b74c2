"""Issue 7 item 7: revoking the TOOLRELAY_ADMIN_KEY key must not stop the server from starting.

The server used to crash at every start ("this API key already belongs to
another user") and add one more keyless admin user per attempt. Now it
starts, the revoked key stays revoked, and the log says what to do in one line.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.testing.fake_server import FakeModelServer


def _users(database_url: str) -> int:
    async def count() -> int:
        store = await SQLStore.open(database_url)
        try:
            return await store.count_users()
        finally:
            await store.close()

    return asyncio.run(count())


def _revoke(database_url: str, key_id: str) -> bool:
    """As `toolrelay keys revoke` does: in the store, beside the running server."""

    async def revoke() -> bool:
        store = await SQLStore.open(database_url)
        try:
            return await store.revoke_api_key(key_id)
        finally:
            await store.close()

    return asyncio.run(revoke())


def test_a_revoked_admin_key_does_not_stop_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeModelServer() as upstream:
        settings = make_settings(tmp_path, upstream)
        with ServerThread(settings) as base_url:
            running = Running(base_url, upstream, settings)
            with running.client() as client:
                mine = [k for k in client.get("/api/admin/keys").json()["data"]]
                assert len(mine) == 1
                # the API refuses to revoke the last admin key (409); an operator can
                refused = client.delete(f"/api/admin/keys/{mine[0]['id']}?confirm=true")
                assert refused.status_code == 409
                assert settings.database_url is not None
                assert _revoke(settings.database_url, mine[0]["id"])
        assert settings.database_url is not None
        users = _users(settings.database_url)
        for _ in range(2):  # restarts: no crash, no new user, the key stays revoked
            caplog.clear()
            with (
                caplog.at_level(logging.WARNING, logger="toolrelay.server"),
                ServerThread(settings) as base_url,
                Running(base_url, upstream, settings).client() as client,
            ):
                assert client.get("/v1/models").status_code == 401
            warnings = [
                r.getMessage() for r in caplog.records if "TOOLRELAY_ADMIN_KEY" in r.getMessage()
            ]
            assert len(warnings) == 1 and "revoked" in warnings[0]
            assert "\n" not in warnings[0]
            assert ADMIN_KEY not in warnings[0]
        assert _users(settings.database_url) == users
