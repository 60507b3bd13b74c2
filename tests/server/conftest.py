"""A real toolrelay server (uvicorn on a free port) against the real-socket fake model server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from toolrelay.config.settings import ModelRoute, Settings
from toolrelay.server.app import create_app
from toolrelay.testing.fake_server import FakeModelServer

ADMIN_KEY = "tr-test-admin-key-0123456789"
TOOLS = Path(__file__).parent / "tools_for_tests.py"


@dataclass
class Running:
    base_url: str
    upstream: FakeModelServer
    settings: Settings

    def client(self, key: str = ADMIN_KEY) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=10
        )


class ServerThread:
    def __init__(self, settings: Settings) -> None:
        config = uvicorn.Config(
            create_app(settings), host="127.0.0.1", port=0, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("toolrelay server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


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
