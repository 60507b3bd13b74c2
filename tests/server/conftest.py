"""A real toolrelay server (uvicorn on a free port) against the real-socket fake model server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest
from benchmarks.harness import AppThread

from toolrelay.config.settings import ModelRoute, Settings
from toolrelay.testing.fake_server import FakeModelServer

ADMIN_KEY = "tr-test-admin-key-0123456789"
TOOLS = Path(__file__).parent / "tools_for_tests.py"


@dataclass
class Running:
    base_url: str
    upstream: FakeModelServer
    settings: Settings

    def client(self, key: str = ADMIN_KEY) -> httpx2.Client:
        return httpx2.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=10
        )


ServerThread = AppThread
"""The app in a thread of the test process (`benchmarks.harness.AppThread`)."""


def make_settings(tmp_path: Path, upstream: FakeModelServer, **extra: object) -> Settings:
    routes = [
        ModelRoute(name="fake", kind="openai-chat", base_url=upstream.base_url, model="fake-model"),
        ModelRoute(
            name="fake-responses",
            kind="openai-responses",
            base_url=upstream.base_url,
            model="fake-model",
        ),
        ModelRoute(
            name="fake-ollama", kind="ollama", base_url=upstream.base_url, model="fake-model"
        ),
    ]
    options: dict[str, object] = {
        "data_dir": tmp_path / "data",
        "models": routes,
        "tools": [str(TOOLS)],
        "admin_key": ADMIN_KEY,
        "database_url": None,
        "events_url": None,
    }
    options.update(extra)
    return Settings(**options)  # type: ignore[arg-type]


@pytest.fixture
def upstream() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        yield server


@pytest.fixture
def running(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    settings = make_settings(tmp_path, upstream)
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)
