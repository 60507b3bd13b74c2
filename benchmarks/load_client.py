"""A lean load client for streamed chats: raw HTTP/1.1 over asyncio streams.

At 1,000 concurrent chats an httpx client on one core is slower than the
servers it measures, so its own queueing would show up as everybody's first
token delay. This client only writes a request, stamps the moment the response
head arrives (TTFB) and the moment the first content token's bytes arrive
(TTFT), and keeps the bytes; the body is decoded and checked after the wave,
outside the timed path.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

WAVE_LIMIT_S = 180.0
"""A chat open this long is stuck (a wave of 1,000 ends in about 10 s): the wave stops it."""
FIRST_TOKEN = b'"content":"tok'
"""The first content delta's bytes (orjson writes no spaces; the role chunk's content is "")."""


@dataclass(frozen=True, slots=True)
class Sample:
    ttfb: float
    ttft: float
    text: str
    chunks: int
    status: int


def request_bytes(port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "connection: close"]
    lines += ["content-type: application/json", f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def one_chat(port: int, request: bytes) -> Sample:
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        ttfb = time.perf_counter() - start
        ttft = 0.0
        body = bytearray()
        while data := await reader.read(65536):
            body += data
            if not ttft and FIRST_TOKEN in body:
                ttft = time.perf_counter() - start
    finally:
        writer.close()
    status = int(head.split(b" ", 2)[1])
    pieces = _pieces(_dechunk(bytes(body)), head)
    return Sample(ttfb, ttft, "".join(pieces), len(pieces), status)


async def wave(
    port: int, path: str, n: int, body: bytes, headers: dict[str, str], limit: float = WAVE_LIMIT_S
) -> list[Sample]:
    """N chats at once; one still open after `limit` s is cut off and counted as cut (status
    0, no text), so a server that leaves chats hanging shows in the figures, not as a hang."""
    request = request_bytes(port, path, body, headers)
    chats = [asyncio.ensure_future(one_chat(port, request)) for _ in range(n)]
    _, stuck = await asyncio.wait(chats, timeout=limit)
    for chat in stuck:
        chat.cancel()
    await asyncio.gather(*stuck, return_exceptions=True)
    if stuck:
        print(f"  {len(stuck)} of {n} chats on port {port} still open after {limit:g} s: cut")
    cut = Sample(limit, 0.0, "", 0, 0)
    return [cut if chat in stuck else chat.result() for chat in chats]


def _dechunk(raw: bytes) -> bytes:
    out = bytearray()
    at = 0
    while at < len(raw):
        end = raw.find(b"\r\n", at)
        if end < 0:
            break
        size = int(raw[at:end].split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += raw[end + 2 : end + 2 + size]
        at = end + 2 + size + 2
    return bytes(out)


def _pieces(body: bytes, head: bytes) -> list[str]:
    """The content deltas of a streamed chat completion, in order."""
    pieces: list[str] = []
    if b"chunked" not in head.lower():
        return pieces
    for line in body.split(b"\n"):
        if not line.startswith(b"data: {"):
            continue
        choices = orjson.loads(line[6:]).get("choices") or [{}]
        content = (choices[0].get("delta") or {}).get("content")
        if content:
            pieces.append(content)
    return pieces


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if q == 50:
        return statistics.median(ordered)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q / 100))]
