"""A real server (uvicorn on a free port, tests/server's harness) for the security checks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from toolrelay.testing.fake_server import FakeModelServer

__all__ = ["ADMIN_KEY", "Running", "serve"]


def serve(tmp_path: Path, upstream: FakeModelServer, **extra: object) -> ServerThread:
    return ServerThread(make_settings(tmp_path, upstream, **extra))


@pytest.fixture
def upstream() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def running(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    settings = make_settings(tmp_path, upstream, auth={"max_failures": 3, "window_s": 600})
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)
