"""Two tools that meet: each waits until the other has started, so they surely overlap,
then returns the id of the span current in its own task (loaded by path, in the server)."""

from __future__ import annotations

import asyncio

from opentelemetry import trace

from tests.patience import HANG
from toolrelay import tool

_waiting: list[asyncio.Future[None]] = []


async def _meet() -> str:
    before = trace.get_current_span().get_span_context().span_id
    if _waiting:  # the other call is already waiting: release it
        _waiting.pop().set_result(None)
    else:
        arrived: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        _waiting.append(arrived)
        await asyncio.wait_for(arrived, HANG)
    after = trace.get_current_span().get_span_context().span_id
    assert before == after
    return format(after, "016x")


@tool
async def left(x: int) -> str:
    """Meet `right`; say which span was current."""
    return await _meet()


@tool
async def right(x: int) -> str:
    """Meet `left`; say which span was current."""
    return await _meet()
