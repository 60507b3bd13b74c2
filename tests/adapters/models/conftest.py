"""Fixtures for the model-client tests: a real-socket fake server and a body-counting transport."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http_tracking import TrackingTransport
from toolrelay.adapters.models.http import UpstreamBody
from toolrelay.testing import FakeModelServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the clients use asyncio.timeout


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


@pytest.fixture
def tracker() -> TrackingTransport:
    """Pass as a client's `transport` to count the response bodies it leaves open."""
    return TrackingTransport()


async def read_all(stream: UpstreamBody) -> bytes:
    return b"".join([chunk async for chunk in stream])
