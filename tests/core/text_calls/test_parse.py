"""Tool calls written as text: the decision, the streaming hold-back, and its properties.

`parse_text_calls` decides on whole content; `TextCallRecogniser` holds back
only what could still be a call. The property tests check the module's
invariants: the streaming check never releases a prefix of a call, so any cut
of the content gives the same text and calls, and nothing is ever lost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.patience import fuzz_budget
from toolrelay.core.stream.think_tags import DEFAULT_REASONING_TAGS
from toolrelay.core.text_calls.parse import (
    MAX_CALL_CHARS,
    TextCall,
    callable_names,
    parse_text_calls,
)
from toolrelay.core.text_calls.recogniser import TextCallRecogniser

TOOLS = frozenset({"get_weather", "get_time", "search"})
PARIS = TextCall("get_weather", '{"city":"Paris"}')


def run(
    text: str, cuts: Sequence[int] = (), tools: frozenset[str] = TOOLS
) -> tuple[list[str], str, list[TextCall]]:
    """Feed `text` cut at `cuts`: (what each feed released, what finish released, the calls)."""
    recogniser = TextCallRecogniser(tools, reasoning=DEFAULT_REASONING_TAGS)
    released, start = [], 0
    for cut in sorted({*cuts, len(text)}):
        released.append(recogniser.feed(text[start:cut]))
        start = cut
    rest, calls = recogniser.finish()
    return released, rest, calls


# ---------------------------------------------------------------- what is a call


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        '  \n{"name":"get_weather","parameters":{"city":"Paris"}}\n',
        '{"type": "function", "name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        '```\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        '```JSON\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n```',
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}',  # fence left open
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}',  # tag left open
        'functions.get_weather:{"city": "Paris"}',
        'functions.get_weather:0 {"city": "Paris"}',
        '<think>\nParis, so get_weather.\n</think>\n\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
    ],
)
def test_one_call_in_each_form(text: str) -> None:
    assert parse_text_calls(
        text.replace("<think>\nParis, so get_weather.\n</think>", ""), TOOLS
    ) == [PARIS]
    released, rest, calls = run(text)
    assert calls == [PARIS] and rest == ""
    shown = "".join(released)
    assert shown in ("", "<think>\nParis, so get_weather.\n</think>")  # never any of the call


def test_several_calls() -> None:
    time = TextCall("get_time", '{"tz":"UTC"}')
    forms = [
        '[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {"tz": "UTC"}}]',
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n{"name": "get_time", "arguments": {"tz": "UTC"}}',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>',
        'functions.get_weather:0{"city":"Paris"}\nfunctions.get_time:1{"tz":"UTC"}',
        '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n'
        '```json\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n```',
    ]
    for text in forms:
        assert run(text)[1:] == ("", [PARIS, time]), text


def test_missing_arguments_are_an_empty_object() -> None:
    assert parse_text_calls('{"name": "get_time"}', TOOLS) == [TextCall("get_time", "{}")]


@pytest.mark.parametrize(
    "text",
    [
        # a tool nobody offered
        '{"name": "say_hello", "arguments": {"message": "Hello"}}',
        '```json\n{"name": "Ann", "age": 30}\n```',
        "functions.delete_everything:{}",
        # prose around the call
        'Sure! {"name": "get_weather", "arguments": {"city": "Paris"}}',
        '{"name": "get_weather", "arguments": {"city": "Paris"}} is what I would call.',
        'I will call it:\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        # not the shape of a call
        '{"name": "get_weather", "arguments": {"city": "Paris"}, "id": 3}',
        '{"name": "get_weather", "arguments": ["Paris"]}',
        '{"name": "get_weather", "arguments": "Paris"}',
        '{"name": "get_weather", "arguments": {}, "parameters": {}}',
        '{"type": "tool", "name": "get_weather", "arguments": {}}',
        '{"name": ["get_weather"], "arguments": {}}',
        '{"name": "get_weather", "arguments": {"city": NaN}}',
        "[]",
        '[{"name": "get_weather", "arguments": {}}, 3]',
        '```python\n{"name": "get_weather", "arguments": {}}\n```',
        "<tool_call>\n</tool_call>",
        # cut short
        '{"name": "get_weather", "arguments": {"city": "Par',
        '<tool_call>{"name": "get_weather", "arguments": {}}</tool_ca',
        # plain answers
        "",
        "   \n",
        "Hello! How can I help?",
        "fine, thanks",
        "[1] Smith, 2020",
        "{curly} braces",
        "`code` first",
        "<b>bold</b>",
    ],
)
def test_anything_else_stays_text(text: str) -> None:
    assert parse_text_calls(text, TOOLS) is None
    released, rest, calls = run(text)
    assert calls == [] and "".join(released) + rest == text


def test_no_tools_offered_means_no_calls() -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    released, rest, calls = run(text, tools=frozenset())
    assert (released, rest, calls) == ([text], "", [])


@pytest.mark.parametrize(
    ("tool_choice", "names"),
    [
        (None, TOOLS),
        ("auto", TOOLS),
        ("required", TOOLS),
        ("none", frozenset()),
        ({"type": "function", "function": {"name": "search"}}, {"search"}),
        ({"type": "function", "name": "get_time"}, {"get_time"}),
        ({"type": "function", "function": {"name": "not_offered"}}, frozenset()),
        ({"type": "allowed_tools"}, TOOLS),
    ],
)
def test_the_request_tool_choice_limits_what_text_may_call(
    tool_choice: object, names: frozenset[str]
) -> None:
    assert callable_names(sorted(TOOLS), tool_choice) == names


def test_content_past_the_limit_is_text() -> None:
    big = '{"name": "search", "arguments": {"q": "' + "x" * MAX_CALL_CHARS + '"}}'
    assert parse_text_calls(big, TOOLS) is None
    released, rest, calls = run(big, cuts=list(range(0, len(big), 4096)))
    assert calls == [] and "".join(released) + rest == big
    assert len(rest) == 0  # released as soon as it passed the limit, not at the end


# ---------------------------------------------------------------- holding back


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Hello there", "Hello there"),
        ("  The answer is 4.", "  The answer is 4."),
        ("fine", "fine"),
        ("[1] ref", "[1] ref"),
    ],
)
def test_plain_text_is_released_with_the_chunk_that_shows_it(text: str, first: str) -> None:
    recogniser = TextCallRecogniser(TOOLS)
    assert recogniser.feed(text) == first
    assert recogniser.passing


def test_json_that_is_no_call_is_released_once_it_shows() -> None:
    """Held only until a key, a name or a character rules a call out."""
    recogniser = TextCallRecogniser(TOOLS)
    assert recogniser.feed('{"name": "get_w') == ""
    assert recogniser.feed('eather", "id"') == '{"name": "get_weather", "id"'
    recogniser = TextCallRecogniser(TOOLS)
    assert recogniser.feed('{"name": "sa') == '{"name": "sa'  # no tool starts with "sa"
    recogniser = TextCallRecogniser(TOOLS)
    assert recogniser.feed('```json\n{"city"') == '```json\n{"city"'


def test_a_call_followed_by_prose_is_released_at_the_prose() -> None:
    recogniser = TextCallRecogniser(TOOLS)
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert recogniser.feed(call + "\n") == ""
    assert recogniser.feed("Done") == call + "\nDone"


def test_give_up_releases_what_was_held() -> None:
    recogniser = TextCallRecogniser(TOOLS)
    assert recogniser.feed('{"name": ') == ""
    assert recogniser.give_up() == '{"name": '
    assert recogniser.feed("more") == "more"
    assert recogniser.finish() == ("", [])


def test_a_reasoning_block_is_passed_through_while_it_streams() -> None:
    recogniser = TextCallRecogniser(TOOLS, reasoning=DEFAULT_REASONING_TAGS)
    assert recogniser.feed("<thi") == ""
    assert recogniser.feed("nk>Let me") == "<think>Let me"
    assert recogniser.feed(" see</th") == " see"
    assert recogniser.feed("ink>\n{") == "</think>"
    assert recogniser.feed('"name": "search", "arguments": {}}') == ""
    assert recogniser.finish() == ("", [TextCall("search", "{}")])


def test_a_reasoning_block_left_open_is_all_released() -> None:
    """A possible start of the closing tag is held only while more may come."""
    for text in ("<think>abc</th", "<think>abc", " <thinking>x</thinking"):
        released, rest, calls = run(text, cuts=range(len(text)))
        assert ("".join(released) + rest, calls) == (text, [])


# ---------------------------------------------------------------- properties

NAMES = st.sampled_from(sorted(TOOLS))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=12),
    st.floats(allow_nan=False, allow_infinity=False),
)
ARGUMENTS = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        SCALARS,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    max_size=4,
)
SPACE = st.text(alphabet=" \t\r\n", max_size=3)


@st.composite
def call_texts(draw: st.DrawFn) -> tuple[str, list[TextCall]]:
    """Content that is one to three calls, written in a form drawn at random."""
    pairs: list[tuple[str, dict[str, Any]]] = draw(
        st.lists(st.tuples(NAMES, ARGUMENTS), min_size=1, max_size=3)
    )
    expected = [
        TextCall(n, json.dumps(a, ensure_ascii=False, separators=(",", ":"))) for n, a in pairs
    ]
    indent = draw(st.sampled_from([None, 2]))
    ascii_only = draw(st.booleans())
    key = draw(st.sampled_from(["arguments", "parameters"]))

    def obj(name: str, args: dict[str, Any]) -> str:
        value: Any = args if draw(st.booleans()) else json.dumps(args)
        return json.dumps({"name": name, key: value}, indent=indent, ensure_ascii=ascii_only)

    form = draw(st.sampled_from(["bare", "list", "fence", "tags", "functions"]))
    gap = draw(SPACE)
    if form == "functions":
        body = "\n".join(f"functions.{n}:{i} " + json.dumps(a) for i, (n, a) in enumerate(pairs))
    elif form == "tags":
        body = "\n".join(f"<tool_call>{gap}{obj(n, a)}{gap}</tool_call>" for n, a in pairs)
    else:
        body = (
            "\n".join(obj(n, a) for n, a in pairs)
            if form != "list"
            else "[" + ", ".join(obj(n, a) for n, a in pairs) + "]"
        )
        if form == "fence":
            body = f"```{draw(st.sampled_from(['', 'json', 'JSON']))}\n{body}\n```"
    return draw(SPACE) + body + draw(SPACE), expected


@st.composite
def cuts_of(draw: st.DrawFn, text: str) -> list[int]:
    return draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=12))


PROPERTY = settings(
    max_examples=fuzz_budget(300), suppress_health_check=[HealthCheck.too_slow], deadline=None
)


@PROPERTY
@given(st.data())
def test_a_call_is_never_shown_and_any_cut_recognises_it(data: st.DataObject) -> None:
    text, expected = data.draw(call_texts())
    assert parse_text_calls(text, TOOLS) == expected
    released, rest, calls = run(text, data.draw(cuts_of(text)))
    assert calls == expected
    assert "".join(released) == "" and rest == ""


@st.composite
def near_misses(draw: st.DrawFn) -> str:
    """Calls spoiled one way or another, and text made of call pieces."""
    text, _ = draw(call_texts())
    spoil = draw(st.sampled_from(["prose_before", "prose_after", "cut", "rename", "pieces"]))
    if spoil == "prose_before":
        return draw(st.text(min_size=1).filter(lambda s: s.strip() != "")) + " " + text
    if spoil == "prose_after":
        return text + " " + draw(st.sampled_from(["Done.", "x", "{", "]", "``` more"]))
    if spoil == "cut":
        return text[: draw(st.integers(min_value=0, max_value=max(0, len(text.rstrip()) - 1)))]
    if spoil == "rename":
        return (
            text.replace("get_weather", "get_wether")
            .replace("get_time", "gettime")
            .replace("search", "sear ch")
        )
    pieces = [
        '{"name": ',
        '"get_time"',
        ', "arguments": ',
        "{}",
        "}",
        "[",
        "]",
        "```json\n",
        "```",
        "<tool_call>",
        "</tool_call>",
        "functions.",
        "<think>",
        "</think>",
        "</th",
        "search:",
        "\n",
        " ",
        "hi",
    ]
    return "".join(draw(st.lists(st.sampled_from(pieces), max_size=12)))


@PROPERTY
@given(st.data())
def test_any_cut_gives_the_same_result_and_loses_nothing(data: st.DataObject) -> None:
    text = data.draw(st.one_of(near_misses(), st.text(), call_texts().map(lambda c: c[0])))
    whole = parse_text_calls(text, TOOLS) or []
    released, rest, calls = run(text, data.draw(cuts_of(text)))
    assert ("".join(released) + rest, calls) == ("" if whole else text, whole)


@PROPERTY
@given(
    st.text(min_size=1).filter(lambda s: s.lstrip()[:1] not in ("", "{", "[", "`", "<", "f", "◁")),
    st.text(),
)
def test_plain_text_is_never_held(first: str, more: str) -> None:
    recogniser = TextCallRecogniser(TOOLS, reasoning=DEFAULT_REASONING_TAGS)
    assert recogniser.feed(first) == first
    assert recogniser.feed(more) == more
