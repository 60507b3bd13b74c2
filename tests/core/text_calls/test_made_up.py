"""Calls to tools not offered, with `made_up=True` (`core.text_calls`, recogniser invariant 5
and stage invariant 5): held like calls, and content that is wholly such calls goes to
`invented` instead of being shown; anything else is read exactly as without the option.
The expected result of each property is the whole-content reading of `parse_text_calls`,
with the offered names and then with `ANY_NAME`, which shares no code with the streaming
check that decides what is held."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.core.test_replay_fixtures import mask
from tests.core.text_calls.test_fixtures import CASES, FIXTURES, offered, summary
from tests.core.text_calls.test_parse import PROPERTY, TOOLS, call_texts, cuts_of, near_misses
from toolrelay.core import events as ev
from toolrelay.core.events import Event
from toolrelay.core.formats.content import detect_format
from toolrelay.core.stream.reader import BodyReader, ReadResult
from toolrelay.core.stream.think_tags import DEFAULT_REASONING_TAGS
from toolrelay.core.text_calls.parse import ANY_NAME, TextCall, parse_text_calls
from toolrelay.core.text_calls.recogniser import TextCallRecogniser
from toolrelay.testing.wire import chat_chunks, render_responses_sse, render_sse, responses_events

SAY_HI = '{"name": "say_hi", "arguments": {}}'


def run(text: str, cuts: Sequence[int] = ()) -> tuple[str, str, list[TextCall], str]:
    """(released while feeding, released by finish, calls, invented) for `text` cut at `cuts`."""
    recogniser = TextCallRecogniser(TOOLS, reasoning=DEFAULT_REASONING_TAGS, made_up=True)
    released, start = [], 0
    for cut in sorted({*cuts, len(text)}):
        released.append(recogniser.feed(text[start:cut]))
        start = cut
    rest, calls = recogniser.finish()
    return "".join(released), rest, calls, recogniser.invented


@pytest.mark.parametrize(
    "text",
    [
        SAY_HI,
        '```json\n{"name": "say_hi", "arguments": {}}\n```',
        '<tool_call>{"name": "weather", "arguments": {"city": "Paris"}}</tool_call>',
        'functions.say_hi:{"greeting": "hi"}',
        '[{"name": "say_hi", "arguments": {}}, {"name": "get_weather", "arguments": {}}]',
    ],
)
def test_a_call_to_a_tool_not_offered_is_never_shown_and_goes_to_invented(text: str) -> None:
    for cut in range(len(text) + 1):
        assert run(text, [cut]) == ("", "", [], text)
    # without the option the same content is text, shown as it came
    plain = TextCallRecogniser(TOOLS)
    assert plain.feed(text) + plain.finish()[0] == text and plain.invented == ""


@pytest.mark.parametrize(
    "text",
    [
        "Hello!",
        '{"city": "Paris"}',
        '{"name": " ", "arguments": {}}',
        '{"name": "Ann", "age": 30}',
        SAY_HI + " Done.",
        "Sure: " + SAY_HI,
    ],
)
def test_what_is_no_call_at_all_stays_text(text: str) -> None:
    released, rest, calls, invented = run(text)
    assert (released + rest, calls, invented) == (text, [], "")


def test_plain_text_is_still_released_at_its_first_character() -> None:
    recogniser = TextCallRecogniser(TOOLS, made_up=True)
    assert recogniser.feed("Hi") == "Hi"


def test_an_offered_call_is_a_call_and_nothing_is_invented() -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert run(text) == ("", "", [TextCall("get_weather", '{"city":"Paris"}')], "")


def test_no_tools_offered_means_nothing_is_held() -> None:
    recogniser = TextCallRecogniser((), made_up=True)
    assert recogniser.feed(SAY_HI) == SAY_HI
    assert recogniser.finish() == ("", []) and recogniser.invented == ""


def test_a_reasoning_block_before_a_made_up_call_is_passed_through() -> None:
    text = "<think>a greeting</think>" + SAY_HI
    released, rest, calls, invented = run(text)
    assert (released, rest, calls, invented) == ("<think>a greeting</think>", "", [], SAY_HI)


def renamed(text: str) -> str:
    return text.replace("get_weather", "get_wether").replace("get_time", "gettime")


@PROPERTY
@given(st.data())
def test_any_cut_gives_the_whole_contents_reading(data: st.DataObject) -> None:
    text = data.draw(
        st.one_of(
            near_misses(),
            st.text(),
            call_texts().map(lambda c: c[0]),
            call_texts().map(lambda c: renamed(c[0])),
        )
    )
    offered = parse_text_calls(text, TOOLS)
    invented = not offered and bool(parse_text_calls(text, ANY_NAME))
    released, rest, calls, kept = run(text, data.draw(cuts_of(text)))
    assert calls == (offered or [])
    assert kept == (text if invented else "")
    assert released + rest == ("" if offered or invented else text)  # nothing lost
    if invented:
        assert released == ""  # never shown, at any cut


# ------------------------------------------------------------- through BodyReader


def read(body: bytes, cuts: Sequence[int] = (), **options: object) -> tuple[ReadResult, str]:
    reader = BodyReader("sse", text_tools=TOOLS, made_up_calls=True, **options)  # type: ignore[arg-type]
    events: list[Event] = []
    start = 0
    for cut in sorted({*cuts, len(body)}):
        events += reader.feed(body[start:cut])
        start = cut
    events += reader.finish()
    shown = "".join(e.data["delta"] for e in events if e.type == ev.OUTPUT_TEXT_DELTA)
    return reader.result(), shown


@pytest.mark.parametrize("mode", ["chat", "responses"])
def test_the_reader_shows_nothing_and_reports_the_made_up_call(mode: str) -> None:
    pieces = [SAY_HI[i : i + 4] for i in range(0, len(SAY_HI), 4)]
    if mode == "chat":
        body = render_sse(chat_chunks(text=pieces, finish_reason="stop"))
    else:
        body = render_responses_sse(responses_events(text=pieces))
    for cuts in ([], [7], list(range(0, len(body), 13))):
        result, shown = read(body, cuts)
        assert (result.invented, result.output, shown, result.error) == (SAY_HI, [], "", None)
    # the same body without the option: the JSON is the answer
    reader = BodyReader("sse", text_tools=TOOLS)
    reader.feed(body)
    reader.finish()
    assert reader.result().invented == ""
    assert reader.result().to_dict()["output"][0]["content"][0]["text"] == SAY_HI


def test_a_response_cut_at_its_token_limit_is_shown_as_it_was() -> None:
    body = render_sse(chat_chunks(text=[SAY_HI], finish_reason="length"))
    result, shown = read(body)
    assert (result.invented, shown) == ("", SAY_HI)


def test_reasoning_before_the_made_up_call_stays_in_the_output() -> None:
    body = render_sse(chat_chunks(reasoning=["a greeting"], text=[SAY_HI], finish_reason="stop"))
    result, shown = read(body)
    assert [i["type"] for i in result.output] == ["reasoning"]
    assert (result.invented, shown) == (SAY_HI, "")


MADE_UP = {"qwen-made-up-tool.sse", "qwen-made-up-tool.json"}
"""The recorded bodies that are a call to a tool nobody offered (`say_hello`, `cat joke`)."""


@pytest.mark.parametrize("case", sorted(CASES))
def test_recorded_bodies(case: str) -> None:
    """The real model's bodies with the option on: the two made-up calls go to `invented`
    (their text is the hand-checked visible text of `test_fixtures.CASES`), every other body
    reads exactly as without the option, whole and cut every 5 bytes."""
    body = (FIXTURES / case).read_bytes()
    without = BodyReader(detect_format(body), text_tools=offered(case))
    without.feed(body)
    without.finish()
    for step in (len(body), 5):
        reader = BodyReader(detect_format(body), text_tools=offered(case), made_up_calls=True)
        shown = ""
        for at in range(0, len(body), step):
            shown += "".join(
                e.data["delta"]
                for e in reader.feed(body[at : at + step])
                if e.type == ev.OUTPUT_TEXT_DELTA
            )
        shown += "".join(e.data["delta"] for e in reader.finish() if e.type == ev.OUTPUT_TEXT_DELTA)
        result = reader.result()
        if case in MADE_UP:
            assert (result.invented, result.output, shown) == (CASES[case][1], [], "")
        else:
            assert result.invented == ""
            assert mask(result.to_dict()) == mask(without.result().to_dict())
            assert summary(mask(result.to_dict()))[0] == CASES[case][0]
