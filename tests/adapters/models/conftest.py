"""Fixtures for the model-client tests: a real-socket fake server and pool inspection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from toolrelay.adapters.models.http import HTTPModelStream, ModelHTTP
from toolrelay.testing import FakeModelServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the clients use asyncio.timeout


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


def pool_connections(http: ModelHTTP) -> list[Any]:
    """The httpcore connections of a client's pool (empty before first use)."""
    client = http._client
    if client is None:
        return []
    return list(client._transport._pool.connections)  # type: ignore[attr-defined]


def busy_connections(http: ModelHTTP) -> list[Any]:
    """Connections still tied to a response: neither idle in the pool nor closed."""
    return [c for c in pool_connections(http) if not (c.is_idle() or c.is_closed())]


async def read_all(stream: HTTPModelStream) -> bytes:
    return b"".join([chunk async for chunk in stream])
