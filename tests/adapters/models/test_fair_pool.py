"""`FairPool`: one idle connection handed to one request at a time, against a real server.

A burst of requests on a warm pool is the case: httpcore's own pass hands every
request of the burst the same idle connection, all but one fail to start on it
and are queued again (`AsyncPoolRequest.clear_connection` counts those retries).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import httpcore
import httpx
import pytest
from httpcore._async import http11
from httpcore._async.connection_pool import AsyncPoolRequest

from toolrelay.adapters.models.http import HTTPOptions, Upstream
from toolrelay.adapters.models.pool import FairPool, make_fair
from toolrelay.testing import SSEReply
from toolrelay.testing.fake_server import FakeModelServer

BURST = 8


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as fake:
        fake.set_default(SSEReply([{"choices": [{"delta": {"content": "hi"}}]}]))
        yield fake


@pytest.fixture
def retries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a request handed a connection had to be queued again."""
    count = [0]
    original = AsyncPoolRequest.clear_connection

    def counted(self: AsyncPoolRequest) -> None:
        count[0] += 1
        original(self)

    monkeypatch.setattr(AsyncPoolRequest, "clear_connection", counted)
    return count


def client(keepalive: int = BURST, connections: int = 64) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=keepalive)
    return httpx.AsyncClient(limits=limits, timeout=10)


def pool_of(http: httpx.AsyncClient) -> httpcore.AsyncConnectionPool:
    pool = http._transport._pool  # type: ignore[attr-defined]
    assert isinstance(pool, httpcore.AsyncConnectionPool)
    return pool


async def burst(http: httpx.AsyncClient, url: str, n: int = BURST) -> None:
    replies = await asyncio.gather(*(http.post(url, json={}) for _ in range(n)))
    assert [r.status_code for r in replies] == [200] * n


@pytest.mark.anyio
async def test_a_burst_on_warm_connections_takes_one_each_without_retries(
    server: FakeModelServer, retries: list[int]
) -> None:
    async with client() as http:
        assert make_fair(http)
        url = f"{server.base_url}/v1/chat/completions"
        await burst(http, url)  # cold: BURST new connections, then idle
        assert len(pool_of(http).connections) == BURST
        await burst(http, url)
        await burst(http, url)
        assert retries[0] == 0
        assert len(pool_of(http).connections) == BURST
        assert server.open_connections == BURST  # each reused, none opened anew


@pytest.mark.anyio
async def test_httpcore_own_pool_still_hands_one_connection_to_many(
    server: FakeModelServer, retries: list[int]
) -> None:
    """The reason FairPool exists; if this fails, httpcore fixed it and FairPool can go."""
    async with client() as http:
        url = f"{server.base_url}/v1/chat/completions"
        await burst(http, url)
        await burst(http, url)
        assert retries[0] >= BURST - 1


@pytest.mark.anyio
async def test_the_keep_alive_limit_counts_busy_connections_as_httpcore_does(
    server: FakeModelServer,
) -> None:
    """Idle connections are closed while the pool holds more than the limit, busy ones
    included: FairPool changes who gets a connection, not how many are kept."""
    release = threading.Event()
    held = SSEReply([{"choices": [{"delta": {"content": "x"}}]}], holds={1: release})
    async with client(keepalive=2) as http:
        assert make_fair(http)
        url = f"{server.base_url}/v1/chat/completions"
        server.script(held, held)  # the first two requests stream until released
        streams = [http.stream("POST", url, json={}) for _ in range(2)]
        opened = [await s.__aenter__() for s in streams]
        try:
            await burst(http, url, 2)  # two more connections, closed once answered
            pool = pool_of(http)
            assert len(pool.connections) == 2
            assert not any(c.is_idle() for c in pool.connections)
        finally:
            release.set()
            for response in opened:
                await response.aread()
            for s in streams:
                await s.__aexit__(None, None, None)
        assert len(pool_of(http).connections) == 2  # the two, idle now, are kept
        assert all(c.is_idle() for c in pool_of(http).connections)


@pytest.mark.anyio
async def test_requests_beyond_max_connections_wait_for_a_released_one(
    server: FakeModelServer, retries: list[int]
) -> None:
    async with client(keepalive=2, connections=2) as http:
        assert make_fair(http)
        url = f"{server.base_url}/v1/chat/completions"
        await burst(http, url, 7)
        assert len(server.requests) == 7
        assert server.open_connections <= 2
        assert retries[0] == 0


@pytest.mark.anyio
async def test_model_clients_get_the_fair_pool_and_custom_transports_are_left_alone() -> None:
    upstream = Upstream(HTTPOptions())
    try:
        assert type(pool_of(upstream.client.client)) is FairPool
    finally:
        await upstream.aclose()

    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as mocked:
        assert not make_fair(mocked)


@pytest.mark.anyio
async def test_connections_expiring_under_a_burst_are_not_closed_under_their_requests(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst arrives just before the idle connections' keep-alive runs out: each request
    is handed its own idle connection, then a later pass finds them expired and closes them
    one by one, awaiting each close. A request handed one that is not closed yet must not
    start on it (it would be closed under the request: a ReadError mid-answer); it takes
    another connection instead."""
    now = [1000.0]
    monkeypatch.setattr(http11, "time", SimpleNamespace(monotonic=lambda: now[0]))
    async with httpx.AsyncClient(
        limits=httpx.Limits(
            max_connections=64, max_keepalive_connections=BURST, keepalive_expiry=5
        ),
        timeout=10,
    ) as http:
        assert make_fair(http)
        url = f"{server.base_url}/v1/chat/completions"
        await burst(http, url)  # BURST idle connections, expiring at 1005
        requests = [asyncio.create_task(http.post(url, json={})) for _ in range(BURST)]
        await asyncio.sleep(0)  # each is handed its idle connection and is on its way to it
        now[0] += 10  # they all expire before the requests start on them
        late = asyncio.create_task(http.post(url, json={}))  # its pass closes them
        replies = await asyncio.gather(*requests, late, return_exceptions=True)
        assert [getattr(r, "status_code", r) for r in replies] == [200] * (BURST + 1)
        assert all(r.text for r in replies if isinstance(r, httpx.Response))
