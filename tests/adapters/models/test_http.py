"""Shared HTTP behaviour, over real sockets: retries, timeouts, errors, pooling, no leaks."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.http_tracking import TrackingTransport
from tests.patience import HANG
from toolrelay.adapters.models import OpenAIChat, Retry, Timeouts
from toolrelay.adapters.models.http import (
    DEFAULT_TIMEOUTS,
    HTTPOptions,
    error_from_response,
    parse_retry_after,
    retry_delay,
    v1_url,
)
from toolrelay.core.formats.content import detect_format
from toolrelay.engine.interfaces import ModelRequest
from toolrelay.errors import ProviderError
from toolrelay.testing import JSONReply, RawReply, SSEReply, wire
from toolrelay.testing.fake_server import FakeModelServer

from .conftest import read_all

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])
FAST = Retry(attempts=3, backoff=0.001, max_backoff=0.01, jitter=0.0)
OPENAI_401 = {
    "error": {
        "message": "Incorrect API key provided",
        "type": "invalid_request_error",
        "code": "invalid_api_key",
    }
}


def chat(
    server: FakeModelServer,
    tracker: TrackingTransport | None = None,
    *,
    retry: Retry = FAST,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
) -> OpenAIChat:
    http = HTTPOptions(retry=retry, timeouts=timeouts, transport=tracker)
    return OpenAIChat(base_url=server.base_url, model="m", http=http)


def sse_events(count: int) -> list[dict[str, object]]:
    return [{"i": i} for i in range(count)]


# --------------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(
    "base", ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/"]
)
def test_v1_url_accepts_base_with_or_without_v1(base: str) -> None:
    assert v1_url(base, "chat/completions") == "http://h:8000/v1/chat/completions"


@pytest.mark.parametrize(
    ("content_type", "head", "expected"),
    [
        ("text/event-stream; charset=utf-8", b"{}", "sse"),
        ("application/x-ndjson", b"data: x", "ndjson"),
        ("application/json", b"data: x", "json"),
        (None, b"{}", "json"),
        (None, b'{"a":1}\n{"a":2}\n', "ndjson"),
        ("text/plain", b"\xef\xbb\xbf\ndata: {}", "sse"),
        ("text/plain", b": keep-alive\n\n", "sse"),
    ],
)
def test_body_format_follows_content_type_then_first_bytes(
    content_type: str | None, head: bytes, expected: str
) -> None:
    assert detect_format(head, content_type) == expected


def test_retry_after_seconds_ms_and_http_date() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    when = datetime(2024, 1, 1, 0, 0, 30, tzinfo=UTC)
    now = datetime(2024, 1, 1, 0, 0, 0, tzinfo=UTC).timestamp()
    header = {"Retry-After": format_datetime(when, usegmt=True)}
    assert parse_retry_after(header, now=now) == 30.0
    assert parse_retry_after(header, now=now + 60) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_retry_delay_honours_retry_after_capped_at_twice_max_backoff() -> None:
    retry = Retry(backoff=0.5, max_backoff=1.0)
    assert retry_delay(retry, 1, 0.3) == 0.3
    assert retry_delay(retry, 1, 60.0) == 2.0


def test_retry_delay_doubles_up_to_max_backoff() -> None:
    retry = Retry(backoff=0.5, max_backoff=1.5, jitter=0.25)
    mid = [retry_delay(retry, n, rand=lambda: 0.5) for n in (1, 2, 3, 4)]
    assert mid == [0.5, 1.0, 1.5, 1.5]
    assert retry_delay(retry, 1, rand=lambda: 0.0) == 0.375
    assert retry_delay(retry, 1, rand=lambda: 1.0) == 0.625


@given(
    attempt=st.integers(1, 30),
    r=st.floats(0, 1),
    backoff=st.floats(0.001, 5),
    cap=st.floats(0.001, 30),
    jitter=st.floats(0, 1),
)
def test_retry_delay_stays_within_jittered_cap(
    attempt: int, r: float, backoff: float, cap: float, jitter: float
) -> None:
    retry = Retry(backoff=backoff, max_backoff=cap, jitter=jitter)
    base = min(cap, backoff * 2.0 ** (attempt - 1))
    delay = retry_delay(retry, attempt, rand=lambda: r)
    assert base * (1 - jitter) - 1e-9 <= delay <= base * (1 + jitter) + 1e-9


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (wire.dumps(OPENAI_401), "application/json", "Incorrect API key provided"),
        (b'{"error": "model \\"x\\" not found"}', "application/json", 'model "x" not found'),
        (b'{"detail": "Not Found"}', "application/json", "Not Found"),
        (b"  upstream overloaded\n", "text/plain", "upstream overloaded"),
        (
            b"<html><head><title>502</title><style>p{}</style></head>"
            b"<body><h1>Bad&nbsp;Gateway</h1><p>nginx</p></body></html>",
            "text/html",
            "502 Bad Gateway nginx",
        ),
        (b"", None, "Service Unavailable"),
    ],
)
def test_error_message_extraction(body: bytes, content_type: str | None, message: str) -> None:
    error = error_from_response(503, body, content_type, "Service Unavailable")
    assert error.message == f"Model server returned 503: {message}"
    assert error.status == 503


def test_error_message_from_long_html_is_cut_to_200_chars() -> None:
    error = error_from_response(500, b"<p>" + b"x" * 500 + b"</p>", "text/html")
    assert error.message == "Model server returned 500: " + "x" * 200


# --------------------------------------------------------------------------- retries


@pytest.mark.anyio
async def test_429_retry_after_is_honoured_instead_of_backoff(server: FakeModelServer) -> None:
    events = sse_events(2)
    server.script(
        RawReply(429, wire.dumps(OPENAI_401), {"retry-after": "0.05"}),
        SSEReply(events),
    )
    # the backoff would park the test for an hour: only the server's 0.05 s lets it finish
    client = chat(server, retry=Retry(attempts=3, backoff=3600.0, max_backoff=3600.0))
    started = time.monotonic()
    async with asyncio.timeout(HANG):
        body = await read_all(await client.open(REQUEST))
    elapsed = time.monotonic() - started
    await client.aclose()
    assert body == wire.render_sse(events)
    assert len(server.requests) == 2
    assert elapsed >= 0.05


@pytest.mark.anyio
async def test_5xx_then_success_retries_each(server: FakeModelServer) -> None:
    server.script(
        RawReply(500, b"boom"), RawReply(502, b"bad gateway"), RawReply(503), SSEReply([{"a": 1}])
    )
    client = chat(server, retry=Retry(attempts=4, backoff=0.001, max_backoff=0.01))
    body = await read_all(await client.open(REQUEST))
    await client.aclose()
    assert body == b'data: {"a":1}\n\ndata: [DONE]\n\n'
    assert len(server.requests) == 4


@pytest.mark.anyio
async def test_retries_exhausted_raise_the_last_error(server: FakeModelServer) -> None:
    server.script(RawReply(500, b"first"), RawReply(504, b"gateway timeout"))
    client = chat(server, retry=Retry(attempts=2, backoff=0.001))
    with pytest.raises(ProviderError) as info:
        await client.open(REQUEST)
    await client.aclose()
    assert info.value.message == "Model server returned 504: gateway timeout"
    assert info.value.status == 504
    assert len(server.requests) == 2


@pytest.mark.anyio
async def test_other_4xx_is_not_retried(server: FakeModelServer) -> None:
    server.script(JSONReply(OPENAI_401, status=401), SSEReply([{"a": 1}]))
    client = chat(server)
    with pytest.raises(ProviderError) as info:
        await client.open(REQUEST)
    await client.aclose()
    assert info.value.message == "Model server returned 401: Incorrect API key provided"
    assert info.value.body == OPENAI_401
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_drop_after_first_byte_is_not_retried(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    events = sse_events(5)
    server.script(SSEReply(events, drop_after=2), SSEReply(events))
    client = chat(server, tracker)
    stream = await client.open(REQUEST)
    got: list[bytes] = []
    with pytest.raises(ProviderError) as info:
        async for chunk in stream:
            got.append(chunk)
    assert info.value.message.startswith("Connection to the model server was lost mid-response: ")
    assert b"".join(got) == wire.render_sse(events[:2], done=False)
    assert len(server.requests) == 1
    assert tracker.open_bodies == 0
    assert server.wait_for_connections(0)
    await client.aclose()


@pytest.mark.anyio
async def test_connection_refused_logs_the_url_but_does_not_show_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Behind the server the message reaches API users: the internal URL stays in the log."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIChat(
        base_url=f"http://127.0.0.1:{port}", model="m", http=HTTPOptions(retry=FAST)
    )
    with pytest.raises(ProviderError) as info:
        await client.open(REQUEST)
    await client.aclose()
    expected = "Cannot connect to the model server: "
    assert info.value.message.startswith(expected)
    assert len(info.value.message) > len(expected)
    assert str(port) not in info.value.message
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in caplog.text


HI_BODY = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
HI_ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    + b"content-length: %d\r\n\r\n" % len(HI_BODY)
    + HI_BODY
)


async def read_request(reader: asyncio.StreamReader) -> None:
    """One request off a raw connection: its head, then its body by its length."""
    request = await reader.readuntil(b"\r\n\r\n")
    size = next(
        int(line.split(b":")[1])
        for line in request.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(size)


@contextlib.asynccontextmanager
async def retrying_client(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[OpenAIChat]:
    """A client of a raw server running `serve`, allowed one retry with no backoff waited."""
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    slow = Retry(attempts=2, backoff=HANG, max_backoff=HANG, jitter=0.0)
    client = OpenAIChat(
        base_url=f"http://127.0.0.1:{port}", model="m", http=HTTPOptions(retry=slow)
    )
    try:
        yield client
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


@pytest.mark.anyio
async def test_a_kept_alive_connection_closed_unanswered_is_tried_again_at_once() -> None:
    """llama.cpp's server closes a kept-alive connection a millisecond after a streamed
    answer; a request sent on it in that millisecond meets a hang-up with no answer. The
    server read nothing of it, so it goes again at once, on a new connection."""
    body, answer = HI_BODY, HI_ANSWER
    seen = {"connections": 0, "requests": 0}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        first = seen["connections"] == 1
        try:
            while True:
                await read_request(reader)
                seen["requests"] += 1
                if first and seen["requests"] == 2:
                    return  # the kept-alive connection, reused: hung up unanswered
                writer.write(answer)
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    async with retrying_client(serve) as client:
        assert await read_all(await client.open(REQUEST)) == body
        async with asyncio.timeout(HANG / 2):  # a backoff would wait HANG
            assert await read_all(await client.open(REQUEST)) == body
    assert seen == {"connections": 2, "requests": 3}


@pytest.mark.anyio
async def test_a_kept_alive_connection_closing_as_it_is_reused_is_tried_again_at_once() -> None:
    """The other side of the same race: the server closes the connection right after its
    answer, and the next request is handed that connection before its close is processed
    (aiohttp: "Cannot write to closing transport"). Nothing was sent, so it goes again at
    once, on a new connection."""
    body, answer = HI_BODY, HI_ANSWER
    seen = {"connections": 0, "requests": 0}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        try:
            await read_request(reader)
            seen["requests"] += 1
            writer.write(answer)  # the answer and the hang-up in one go
        finally:
            writer.close()

    async with retrying_client(serve) as client:
        for _ in range(5):
            async with asyncio.timeout(HANG / 2):  # a backoff would wait HANG
                assert await read_all(await client.open(REQUEST)) == body
    assert seen["requests"] == 5


# --------------------------------------------------------------------------- timeouts


@pytest.mark.anyio
async def test_first_byte_timeout_before_headers(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    # the headers would come after an hour: only the timeout can end the wait
    server.script(SSEReply([{"a": 1}], ttfb_delay=3600))
    client = chat(server, tracker, timeouts=Timeouts(first_byte=0.3))
    with pytest.raises(ProviderError) as info:
        async with asyncio.timeout(HANG):
            await client.open(REQUEST)
    assert info.value.message == "Model server timed out: no data for 0.3 s"
    assert len(server.requests) == 1  # a timeout is not retried
    assert tracker.open_bodies == 0
    await client.aclose()
    assert server.wait_for_connections(0)


@pytest.mark.anyio
async def test_first_byte_timeout_counts_the_first_body_chunk(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.script(SSEReply([{"a": 1}], stall_after=0, stall_for=3600))
    client = chat(server, tracker, timeouts=Timeouts(first_byte=0.1))
    with pytest.raises(ProviderError) as info:
        async with asyncio.timeout(HANG):
            await client.open(REQUEST)
    assert info.value.message == "Model server timed out: no data for 0.1 s"
    assert tracker.open_bodies == 0
    assert server.wait_for_connections(0)
    await client.aclose()


@pytest.mark.anyio
async def test_idle_timeout_between_chunks(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    events = sse_events(3)
    server.script(SSEReply(events, stall_after=1, stall_for=3600))
    client = chat(server, tracker, timeouts=Timeouts(idle=0.1))
    stream = await client.open(REQUEST)
    assert await anext(stream) == b'data: {"i":0}\n\n'
    with pytest.raises(ProviderError) as info:
        async with asyncio.timeout(HANG):
            await anext(stream)
    assert info.value.message == "Model server timed out: no data for 0.1 s"
    assert tracker.open_bodies == 0
    assert server.wait_for_connections(0)
    assert [c async for c in stream] == []
    await client.aclose()


@pytest.mark.anyio
async def test_total_timeout_bounds_a_slow_but_steady_stream(server: FakeModelServer) -> None:
    # a chunk every 0.05 s for 50 s: never idle for long, but far longer than the total
    server.script(SSEReply(sse_events(1000), delay=0.05))
    client = chat(server, timeouts=Timeouts(idle=HANG, total=0.3))
    with pytest.raises(ProviderError) as info:  # the total counts from the request on
        async with asyncio.timeout(HANG):
            await read_all(await client.open(REQUEST))
    assert info.value.message == "Model server timed out: no complete response within 0.3 s"
    await client.aclose()


@pytest.mark.anyio
async def test_a_slow_consumer_is_not_an_idle_server(server: FakeModelServer) -> None:
    """The idle timeout counts only time spent waiting for the server, not between reads."""
    events = sse_events(3)
    server.script(SSEReply(events, delay=0.1))  # apart: more than one read (reads join chunks)
    client = chat(server, timeouts=Timeouts(idle=0.5))
    stream = await client.open(REQUEST)
    got = [await anext(stream)]
    async for chunk in stream:  # the second read arms the watchdog
        got.append(chunk)
        break
    await asyncio.sleep(1.5)  # the consumer is busy well past the idle timeout
    got += [chunk async for chunk in stream]
    await client.aclose()
    assert b"".join(got) == wire.render_sse(events)


@pytest.mark.anyio
async def test_the_stream_can_be_cancelled_from_outside_while_reading(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    """An outside cancel stays a cancel (not a timeout) and the body is released."""
    server.script(SSEReply(sse_events(3), stall_after=1, stall_for=3600))
    client = chat(server, tracker, timeouts=Timeouts(idle=HANG))
    stream = await client.open(REQUEST)
    await anext(stream)
    reading = asyncio.create_task(anext(stream))
    await asyncio.sleep(0.05)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    await stream.aclose()
    assert tracker.open_bodies == 0
    await client.aclose()


# --------------------------------------------------------------------------- pooling and leaks


@pytest.mark.anyio
async def test_sequential_requests_reuse_one_connection(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.set_default(SSEReply([{"a": 1}]))
    client = chat(server, tracker)
    first = await read_all(await client.open(REQUEST))
    second = await read_all(await client.open(REQUEST))
    assert first == second == b'data: {"a":1}\n\ndata: [DONE]\n\n'
    assert len(server.requests) == 2
    assert server.open_connections == 1
    assert tracker.open_bodies == 0  # a full read puts the connection back
    await client.aclose()
    assert server.wait_for_connections(0)


@pytest.mark.anyio
async def test_early_close_releases_the_connection(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.script(SSEReply(sse_events(50), delay=0.01))
    client = chat(server, tracker)
    stream = await client.open(REQUEST)
    assert await anext(stream) == b'data: {"i":0}\n\n'
    await stream.aclose()
    assert tracker.open_bodies == 0
    assert server.wait_for_connections(0)  # an unfinished body cannot be reused: dropped
    assert [c async for c in stream] == []
    await stream.aclose()  # idempotent
    await client.aclose()


@pytest.mark.anyio
async def test_cancelled_read_leaks_nothing(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.script(SSEReply(sse_events(3), stall_after=1, stall_for=3600))
    client = chat(server, tracker)
    stream = await client.open(REQUEST)
    got: list[bytes] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for chunk in stream:
            got.append(chunk)
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()  # the first chunk is in; the server now stalls
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await stream.aclose()
    assert got == [b'data: {"i":0}\n\n']
    assert tracker.open_bodies == 0
    assert server.wait_for_connections(0)
    await client.aclose()


@pytest.mark.anyio
async def test_empty_body_ends_at_once_and_frees_the_connection(
    server: FakeModelServer, tracker: TrackingTransport
) -> None:
    server.script(RawReply(200, b"", {"content-type": "text/event-stream"}))
    client = chat(server, tracker)
    stream = await client.open(REQUEST)
    assert stream.format == "sse"
    assert [c async for c in stream] == []
    assert tracker.open_bodies == 0
    await client.aclose()
