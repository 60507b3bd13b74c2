"""Suite-wide fixtures."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tests.sdk_clients import close_all

_SOCKET_DIRS = (
    "/server/",
    "/cli/",
    "/engine/",
    "/testing/",
    "/models/",
    "/events/",
    "/reliability/",
)


@pytest.fixture(autouse=True)
def _close_sdk_clients(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    close_all()
    if any(part in str(request.node.path) for part in _SOCKET_DIRS):
        gc.collect()  # a leaked socket warns here, in the test that leaked it, not later
