"""The body timeout counts a stall of the client, never a pause of the server's own loop.

On a loaded machine the event loop can be descheduled for longer than the
timeout; when it runs again, the bytes that came meanwhile and the expired
timer are handled in the same iteration. The body arrived, so the request
must go on (else a spurious 408: the front-door tests use a 0.5 s timeout, which
a loaded 2-core machine can pause a loop for).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from starlette.types import Message, Receive, Scope, Send

from toolrelay.server.error_responses import BodyLimit

pytestmark = pytest.mark.anyio

TIMEOUT = 0.05
BODY = b'{"a": 1}'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _echo(scope: Scope, receive: Receive, send: Send) -> None:
    message = await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": message.get("body", b"")})


async def _call(receive: Receive) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {"type": "http", "headers": [(b"content-length", b"%d" % len(BODY))]}
    await BodyLimit(_echo, limit=1000, timeout=TIMEOUT)(scope, receive, send)
    return sent


async def test_a_body_that_arrives_while_the_loop_was_paused_is_read() -> None:
    loop = asyncio.get_running_loop()
    arrived = asyncio.Event()

    async def receive() -> Message:
        await arrived.wait()
        return {"type": "http.request", "body": BODY, "more_body": False}

    def pause_then_deliver() -> None:
        time.sleep(4 * TIMEOUT)  # the loop does not run: the timer expires meanwhile
        loop.call_soon(arrived.set)  # the socket's data, handled before the expired timer

    loop.call_soon(pause_then_deliver)
    sent = await _call(receive)
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == BODY


async def test_a_body_that_stops_arriving_is_a_408() -> None:
    async def receive() -> Message:
        await asyncio.Event().wait()  # never comes
        raise AssertionError("unreachable")

    sent = await _call(receive)
    assert sent[0]["status"] == 408
