"""Which httpx pool a model call goes to (`Upstream.client`): the first with room.

Sequential calls stay on one pool and so reuse one connection (a real server
counts them); a burst spreads over pools of at most PER_POOL calls each.
"""

from __future__ import annotations

import pytest

from toolrelay.adapters.models import OpenAIChat, Retry
from toolrelay.adapters.models.http import PER_POOL, POOLS, HTTPOptions, Upstream
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError
from toolrelay.testing import JSONReply, SSEReply
from toolrelay.testing.fake_server import FakeModelServer

from .conftest import read_all

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])


@pytest.mark.anyio
async def test_a_burst_fills_pools_in_order_and_a_freed_one_is_used_first() -> None:
    upstream = Upstream(HTTPOptions())
    burst = [upstream.client for _ in range(1)]
    dones = [burst[0].counted()]
    for _ in range(3 * PER_POOL - 1):
        sender = upstream.client
        dones.append(sender.counted())
        burst.append(sender)
    pools = [burst[i * PER_POOL] for i in range(3)]
    assert len({id(p) for p in pools}) == 3
    assert [burst.count(p) for p in pools] == [PER_POOL] * 3  # each full before the next
    dones[0]()
    dones[0]()  # counted done once only
    assert upstream.client is pools[0] and pools[0].open == PER_POOL - 1
    for done in dones:
        done()
    assert [p.open for p in pools] == [0, 0, 0]
    await upstream.aclose()


@pytest.mark.anyio
async def test_past_every_pool_the_least_busy_one_takes_more() -> None:
    upstream = Upstream(HTTPOptions())
    dones = []
    for _ in range(POOLS * PER_POOL):
        dones.append(upstream.client.counted())
    dones[5]()  # a call in the first pool ends
    chosen = upstream.client
    assert chosen.open == PER_POOL - 1
    await upstream.aclose()


@pytest.mark.anyio
async def test_sequential_calls_reuse_one_connection_without_a_given_transport() -> None:
    with FakeModelServer() as server:
        server.set_default(SSEReply([{"a": 1}]))
        client = OpenAIChat(base_url=server.base_url, model="m")  # httpx's own pools
        for _ in range(5):
            assert (
                await read_all(await client.open(REQUEST)) == b'data: {"a":1}\n\ndata: [DONE]\n\n'
            )
        assert len(server.requests) == 5
        assert server.open_connections == 1  # taken in turn, five pools opened five
        await client.aclose()


@pytest.mark.anyio
async def test_a_failed_call_does_not_keep_its_pool_busy() -> None:
    with FakeModelServer() as server:
        server.set_default(JSONReply({"error": {"message": "no"}}, status=503))  # retryable
        http = HTTPOptions(retry=Retry(attempts=1))
        client = OpenAIChat(base_url=server.base_url, model="m", http=http)
        for _ in range(PER_POOL + 1):
            with pytest.raises(ProviderError, match="no"):
                await client.open(REQUEST)
        assert [s.open for s in client.upstream._clients] == [0]  # one pool, nothing held
        await client.aclose()
