"""The request id a client sees in `X-Request-ID` is in its error, streamed or not."""

from __future__ import annotations

import orjson

from tests.server.conftest import Running
from tests.server.test_openai_api import text_reply
from toolrelay.testing.fake_server import RawReply

CHAT = "/v1/chat/completions"
FAIL = RawReply(400, b'{"error": {"message": "no such thing upstream"}}')


def _data_lines(body: bytes) -> list[object]:
    lines = [line[6:] for line in body.split(b"\n") if line.startswith(b"data: ")]
    return [orjson.loads(line) for line in lines if line != b"[DONE]"]


def test_streamed_and_plain_errors_name_the_request(running: Running) -> None:
    running.upstream.route(CHAT, FAIL, FAIL, text_reply("fine"))
    running.upstream.route("/v1/responses", FAIL)
    ask = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    with running.client() as client:
        plain = client.post(CHAT, json=ask)
        streamed = client.post(CHAT, json={**ask, "stream": True})
        fine = client.post(CHAT, json={**ask, "stream": True})
        responses = client.post(
            "/v1/responses", json={"model": "fake-responses", "input": "hi", "stream": True}
        )
    assert plain.status_code == 502
    assert plain.json()["error"]["message"].endswith(
        f"(request id {plain.headers['x-request-id']})"
    )
    [error] = [
        d["error"] for d in _data_lines(streamed.content) if isinstance(d, dict) and "error" in d
    ]
    assert error["message"].endswith(f"(request id {streamed.headers['x-request-id']})")
    assert b"request id" not in fine.content  # only errors are named
    failed = [
        d
        for d in _data_lines(responses.content)
        if isinstance(d, dict) and d.get("type") == "response.failed"
    ]
    message = failed[0]["response"]["error"]["message"]
    assert message.endswith(f"(request id {responses.headers['x-request-id']})")
