"""Issue 8 item 19, decided: a 200 body that is neither SSE, NDJSON nor JSON is passed through.

SPEC R2/R23 say such a body is returned as it is. We read it as the
assistant's answer text (turn completed, finish `stop`); a body that looks
like JSON but does not parse, or that is not UTF-8 text, stays an error.
"""

from __future__ import annotations

import pytest

from toolrelay.core.items import raw_items
from toolrelay.core.stream.reader import read_body

HTML = b"<!DOCTYPE html>\n<html><body><p>Maintenance until 10:00.</p></body></html>\n"


@pytest.mark.parametrize(
    "body",
    [b"Hello from a plain-text model server.", HTML, b"  two\nlines  "],
    ids=["plain", "html", "spaces"],
)
def test_a_plain_text_or_html_200_body_is_passed_through_as_the_answer(body: bytes) -> None:
    result, _ = read_body(body, "json")
    assert result.error is None
    assert result.finish_reason == "stop"
    assert [i["type"] for i in result.output] == ["message"]
    assert raw_items(result.output)[0]["content"][0]["text"] == body.decode()
    assert result.output[0]["status"] == "completed"


@pytest.mark.parametrize(
    "body",
    [b'{"choices": [', b"[1, 2", b"\x89PNG\r\n\x1a\n\x00\x00"],
    ids=["cut-json-object", "cut-json-array", "binary"],
)
def test_a_cut_json_or_binary_body_is_still_an_error(body: bytes) -> None:
    result, _ = read_body(body, "json")
    assert result.error is not None and result.error.startswith("Malformed chunk")
