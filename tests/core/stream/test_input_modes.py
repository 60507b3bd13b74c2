"""One accumulator per input mode: deltas (Chat Completions, Ollama) or Responses events."""

from __future__ import annotations

from toolrelay.core.items import output_text
from toolrelay.core.stream.delta_accumulator import DeltaAccumulator
from toolrelay.core.stream.event_accumulator import EventAccumulator
from toolrelay.core.stream.reader import BodyReader, read_body
from toolrelay.testing import wire


def test_each_api_is_read_by_its_own_accumulator() -> None:
    cases = [
        ("sse", wire.render_sse(wire.chat_chunks(text="hi")), DeltaAccumulator),
        ("ndjson", wire.render_ndjson(wire.ollama_lines(text="hi")), DeltaAccumulator),
        ("sse", wire.render_responses_sse(wire.responses_events(text="hi")), EventAccumulator),
    ]
    for framing, body, expected in cases:
        reader = BodyReader(framing)  # type: ignore[arg-type]
        reader.feed(body)
        reader.finish()
        assert type(reader.acc) is expected
        assert output_text(reader.result().output) == "hi"


def test_what_was_said_before_the_first_responses_event_is_kept() -> None:
    error = b'event: error\ndata: {"error": {"message": "overloaded"}}\n\n'
    body = error + wire.render_responses_sse(wire.responses_events(text="hi"))
    result, _ = read_body(body, "sse")
    assert result.error == "overloaded"
    assert output_text(result.output) == "hi"


def test_a_body_speaks_one_api_once_it_has_built_items() -> None:
    chat = wire.render_sse(wire.chat_chunks(text="from chat"), done=False)
    stray = wire.render_responses_sse(wire.responses_events(text="from responses"))
    result, _ = read_body(chat + stray, "sse")
    assert output_text(result.output) == "from chat"


def test_a_responses_error_event_still_counts_in_a_chat_body() -> None:
    chat = wire.render_sse(wire.chat_chunks(text="half"), done=False)
    error = b'data: {"type": "error", "message": "rate limited"}\n\n'
    result, _ = read_body(chat + error, "sse")
    assert result.error == "rate limited"
    assert output_text(result.output) == "half"


def test_an_sse_error_event_is_an_error_whatever_its_payload_says() -> None:
    """`event: error` makes the payload an error even when it has no `error` or
    `type` key; read whole, and in reads that cut it anywhere."""
    chat = wire.render_sse(wire.chat_chunks(text="half"), done=False)
    body = chat + b'event: error\ndata: {"message": "overloaded", "code": 529}\n\n'
    for size in (len(body), 7, 64):
        reader = BodyReader("sse")
        for i in range(0, len(body), size):
            reader.feed(body[i : i + size])
        reader.finish()
        result = reader.result()
        assert result.error == "overloaded"
        assert output_text(result.output) == "half"
