"""`/healthz` and `/readyz` over real sockets; readiness follows a backend that goes away."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.reliability.conftest import database
from tests.server.conftest import ServerThread, make_settings
from tests.server.observe.tcp_proxy import TcpProxy
from toolrelay.testing.fake_server import FakeModelServer


def test_healthz_and_readyz_answer_without_a_key(tmp_path: Path) -> None:
    with FakeModelServer() as fake, ServerThread(make_settings(tmp_path, fake)) as url:
        live = httpx2.get(url + "/healthz", timeout=10)
        ready = httpx2.get(url + "/readyz", timeout=10)
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    assert ready.status_code == 200
    assert ready.json() == {"status": "ok", "checks": {"store": "ok", "bus": "ok"}}


@pytest.fixture
def redis_proxy() -> Iterator[TcpProxy]:
    with TcpProxy(6379) as proxy:
        yield proxy


@pytest.mark.redis
def test_readyz_is_503_when_redis_goes_away(tmp_path: Path, redis_proxy: TcpProxy) -> None:
    events = f"redis://127.0.0.1:{redis_proxy.port}/0"
    with FakeModelServer() as fake:
        settings = make_settings(tmp_path, fake, events_url=events)
        with ServerThread(settings) as url:
            before = httpx2.get(url + "/readyz", timeout=10)
            redis_proxy.stop()
            after = httpx2.get(url + "/readyz", timeout=10)
            live = httpx2.get(url + "/healthz", timeout=10)
    assert before.status_code == 200, before.text
    assert after.status_code == 503
    assert after.json()["status"] == "unavailable"
    assert after.json()["checks"]["store"] == "ok"
    assert after.json()["checks"]["bus"].startswith("error: ")
    assert live.status_code == 200  # liveness does not depend on the backends


@pytest.mark.postgres
def test_readyz_is_503_when_postgres_goes_away(tmp_path: Path) -> None:
    with (
        database("postgres", tmp_path) as url,
        TcpProxy(5432) as proxy,
        FakeModelServer() as fake,
    ):
        proxied = url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
        settings = make_settings(tmp_path, fake, database_url=proxied)
        with ServerThread(settings) as base:
            before = httpx2.get(base + "/readyz", timeout=10)
            proxy.stop()
            after = httpx2.get(base + "/readyz", timeout=10)
    assert before.status_code == 200, before.text
    assert after.status_code == 503
    assert after.json()["checks"] == {"store": after.json()["checks"]["store"], "bus": "ok"}
    assert after.json()["checks"]["store"] != "ok"
