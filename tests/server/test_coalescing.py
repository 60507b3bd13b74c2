"""Coalescing is the client's choice: `stream_options.coalesce_ms` per request, per route.

The upstream sends its text chunks back to back. With a window of 0 every
chunk reaches the client as its own delta; with a window of a minute deltas
merge up to `coalesce_chunks` (32) each, so nothing here depends on the clock.
The text is whole either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.server.conftest import Running, ServerThread, make_settings
from toolrelay.config.settings import ModelRoute
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks, responses_events

CHAT = "/v1/chat/completions"
WORDS = [f"w{i} " for i in range(24)]
MINUTE = 60_000


def _deltas(running: Running, path: str, body: dict[str, Any]) -> list[str]:
    """The text deltas of one streamed answer, in order."""
    pieces: list[str] = []
    with running.client() as client, client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            data = orjson.loads(line[6:])
            if path == CHAT:
                delta = (data.get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content"):
                    pieces.append(delta["content"])
            elif data.get("type") == "response.output_text.delta":
                pieces.append(data["delta"])
    return pieces


def _chat(model: str = "fake", **options: object) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "stream": True}
    body["messages"] = [{"role": "user", "content": "count"}]
    if options:
        body["stream_options"] = options
    return body


def test_a_window_of_zero_sends_every_chunk(running: Running) -> None:
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=WORDS)))
    pieces = _deltas(running, CHAT, _chat(coalesce_ms=0))
    assert pieces == WORDS


def test_a_long_window_merges_deltas_and_keeps_the_text(running: Running) -> None:
    running.upstream.route(CHAT, SSEReply(chat_chunks(text=WORDS)))
    pieces = _deltas(running, CHAT, _chat(coalesce_ms=MINUTE, include_usage=True))
    assert "".join(pieces) == "".join(WORDS)
    assert pieces[0] == WORDS[0]  # the first token is never held
    assert len(pieces) <= 3  # 1 + 23 merged, 32 at most per delta


def test_the_responses_api_takes_the_same_option(running: Running) -> None:
    running.upstream.route("/v1/responses", SSEReply(responses_events(text=WORDS)))
    body = {"model": "fake-responses", "input": "count", "stream": True}
    zero = _deltas(running, "/v1/responses", {**body, "stream_options": {"coalesce_ms": 0}})
    assert zero == WORDS
    running.upstream.route("/v1/responses", SSEReply(responses_events(text=WORDS)))
    merged = _deltas(running, "/v1/responses", {**body, "stream_options": {"coalesce_ms": MINUTE}})
    assert "".join(merged) == "".join(WORDS) and len(merged) <= 3


def test_a_negative_window_is_refused(running: Running) -> None:
    with running.client() as client:
        response = client.post(CHAT, json={**_chat(coalesce_ms=-1), "stream": True})
    assert response.status_code in (400, 422)
    assert "coalesce_ms" in response.text


@pytest.fixture
def routed(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    """A server whose `fake` route sends every chunk (`coalesce_ms = 0` on the route)."""
    settings = make_settings(tmp_path, upstream)
    routes = [
        r if r.name != "fake" else ModelRoute(**{**r.model_dump(), "coalesce_ms": 0})
        for r in settings.models
    ]
    settings = make_settings(tmp_path, upstream, models=routes)
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def test_the_route_sets_the_window_and_the_request_wins(routed: Running) -> None:
    routed.upstream.route(CHAT, SSEReply(chat_chunks(text=WORDS)))
    assert _deltas(routed, CHAT, _chat()) == WORDS  # the route's 0
    routed.upstream.route(CHAT, SSEReply(chat_chunks(text=WORDS)))
    merged = _deltas(routed, CHAT, _chat(coalesce_ms=MINUTE))
    assert "".join(merged) == "".join(WORDS) and len(merged) <= 3
