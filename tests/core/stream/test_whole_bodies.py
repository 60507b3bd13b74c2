"""Bodies that lost their answer or their error (issue 30 item 6), read through `read_body`.

Each expectation is taken from the raw bytes with stdlib `json` (the message's
content, the error line's JSON `message`), not from the reader's own output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolrelay.core.stream.reader import BodyReader, ReadResult, read_body

STREAMS = Path(__file__).parents[2] / "fixtures" / "streams"


def texts(result: ReadResult) -> list[str]:
    """Each message item's text, in order."""
    output = result.to_dict()["output"]
    return ["".join(p["text"] for p in i["content"]) for i in output if i["type"] == "message"]


def test_a_whole_body_with_message_and_empty_delta_gives_the_message() -> None:
    """Perplexity's non-streamed `chat.completion` carries `delta: {content: ""}` beside
    the whole `message`; reading the delta lost the answer."""
    raw = (STREAMS / "perplexity" / "message-and-empty-delta.json").read_bytes()
    choice = json.loads(raw)["choices"][0]
    assert choice["delta"]["content"] == ""  # the body is what the test is about
    result, _ = read_body(raw)
    assert result.error is None
    assert texts(result) == [choice["message"]["content"]]
    assert result.finish_reason == "stop"


def test_a_message_whose_content_is_an_object_is_its_json_text() -> None:
    """Cloudflare Workers AI answers a JSON prompt with `content` as an object."""
    raw = (STREAMS / "cloudflare" / "json-object-content.json").read_bytes()
    content = json.loads(raw)["choices"][0]["message"]["content"]
    result, _ = read_body(raw)
    (text,) = texts(result)
    assert json.loads(text) == content
    assert text == json.dumps(content, separators=(",", ":"))


def test_a_stream_ending_with_a_bare_error_line_reports_that_error() -> None:
    raw = (STREAMS / "llamacpp" / "error-line.sse").read_bytes()
    last = raw.decode().strip().splitlines()[-1]
    assert last.startswith("error: ")
    result, _ = read_body(raw)
    assert result.error == json.loads(last.removeprefix("error: "))["message"]
    assert result.finish_reason == "error"
    assert texts(result) == ["The answer"]  # partial kept


@pytest.mark.parametrize("end", [b"\n\n", b"\n", b""])
def test_a_plain_text_error_line_is_the_error_however_the_body_ends(end: bytes) -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n'
    result, _ = read_body(body + b"error: upstream model crashed" + end, "sse")
    assert result.error == "upstream model crashed"
    assert texts(result) == ["Hi"]


def test_an_error_line_split_across_reads_is_still_read() -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\nerror: out of memory\n\n'
    reader = BodyReader("sse")
    for n in range(0, len(body), 3):
        reader.feed(body[n : n + 3])
    reader.finish(dropped=True)
    assert reader.result().error == "out of memory"


def test_without_an_error_line_a_cut_body_is_still_a_cut() -> None:
    result, _ = read_body(b'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n', "sse")
    assert result.error == "Model response incomplete: the body ended early."
