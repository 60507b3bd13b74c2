"""Tests for the streaming inline-tag splitter (SPEC R5)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.core.stream.think_tags import (
    DEFAULT_REASONING_TAGS,
    MAX_HELD,
    Chunk,
    Close,
    Open,
    Segment,
    TagConfig,
    TagPair,
    TagSplitter,
)

CI = TagConfig(code_interpreter=True)


def run(chunks: Iterable[str], config: TagConfig = CI) -> list[Segment]:
    splitter = TagSplitter(config)
    out: list[Segment] = []
    for chunk in chunks:
        out.extend(splitter.feed(chunk))
    out.extend(splitter.flush())
    return out


def merge(segments: Iterable[Segment]) -> list[Segment]:
    """Join consecutive Chunks of one kind: the chunking-independent view."""
    merged: list[Segment] = []
    for seg in segments:
        last = merged[-1] if merged else None
        if isinstance(seg, Chunk) and isinstance(last, Chunk) and last.kind == seg.kind:
            merged[-1] = Chunk(seg.kind, last.text + seg.text)
        else:
            merged.append(seg)
    return merged


def whole(text: str, config: TagConfig = CI) -> list[Segment]:
    return merge(run([text], config))


def reasoning(text: str, tag: str = "<think>", **attrs: str) -> list[Segment]:
    return [Open("reasoning", dict(attrs), tag), Chunk("reasoning", text), Close("reasoning")]


# --- exact segment lists per tag family ------------------------------------------------


@pytest.mark.parametrize(("start", "end"), DEFAULT_REASONING_TAGS)
def test_every_default_reasoning_pair(start: str, end: str) -> None:
    assert run([f"hi {start}plan{end}done"]) == [
        Chunk("text", "hi "),
        *reasoning("plan", start),
        Chunk("text", "done"),
    ]


def test_solution_pair() -> None:
    assert run(["<|begin_of_solution|>42<|end_of_solution|>"]) == [
        Open("solution", {}, "<|begin_of_solution|>"),
        Chunk("solution", "42"),
        Close("solution"),
    ]


def test_code_interpreter_with_attributes() -> None:
    text = '<code_interpreter type="code" lang="python">\nprint(1)\n</code_interpreter>\nok'
    assert run([text]) == [
        Open("code_interpreter", {"type": "code", "lang": "python"}, "<code_interpreter>"),
        Chunk("code_interpreter", "print(1)"),
        Close("code_interpreter"),
        Chunk("text", "ok"),
    ]


def test_code_interpreter_is_text_unless_enabled() -> None:
    text = "<code_interpreter>x</code_interpreter>"
    assert run([text], TagConfig()) == [Chunk("text", text)]


def test_think_attributes_parsed_as_word_value_pairs() -> None:
    assert run(['<think foo="x" junk bar="y z" empty="">r</think>']) == reasoning(
        "r", foo="x", bar="y z"
    )


def test_angle_tag_is_matched_earliest_position_first() -> None:
    assert run(["a<|begin_of_solution|>s<|end_of_solution|><think>t</think>"]) == [
        Chunk("text", "a"),
        Open("solution", {}, "<|begin_of_solution|>"),
        Chunk("solution", "s"),
        Close("solution"),
        *reasoning("t"),
    ]


def test_two_blocks_and_text_between() -> None:
    assert run(["<think>a</think>b<thinking>c</thinking>d"]) == [
        *reasoning("a"),
        Chunk("text", "b"),
        *reasoning("c", "<thinking>"),
        Chunk("text", "d"),
    ]


# --- text that only looks like a tag ---------------------------------------------------


def test_less_than_released_when_space_arrives() -> None:
    splitter = TagSplitter()
    assert splitter.feed("a <") == [Chunk("text", "a ")]
    assert splitter.feed(" b") == [Chunk("text", "< b")]
    assert splitter.flush() == []


def test_x_less_than_y_is_text() -> None:
    assert run(["x<y"]) == [Chunk("text", "x<y")]
    assert merge(run("x<y")) == [Chunk("text", "x<y")]


def test_thinkpad_is_text_and_released_as_soon_as_it_differs() -> None:
    splitter = TagSplitter()
    assert splitter.feed("my <think") == [Chunk("text", "my ")]
    assert splitter.feed("pad> rocks") == [Chunk("text", "<thinkpad> rocks")]


def test_text_released_without_waiting_for_flush() -> None:
    splitter = TagSplitter()
    assert splitter.feed("x<y") == [Chunk("text", "x<y")]
    assert splitter.feed("<think>a </b") == [
        Open("reasoning", {}, "<think>"),
        Chunk("reasoning", "a </b"),
    ]
    assert splitter.feed("c </") == [Chunk("reasoning", "c")]


def test_possible_prefix_at_end_of_stream_is_text() -> None:
    splitter = TagSplitter()
    assert splitter.feed("so <|begin_of") == [Chunk("text", "so ")]
    assert splitter.flush() == [Chunk("text", "<|begin_of")]


def test_attribute_soup_is_bounded() -> None:
    soup = "<think " + "a" * (MAX_HELD - 8)  # one short of giving up
    splitter = TagSplitter()
    assert splitter.feed(soup) == []
    assert splitter.feed("b") == [Chunk("text", soup + "b")]
    assert splitter.inside == "text"


def test_attribute_tag_at_exact_limit_still_matches() -> None:
    tag = '<think a="' + "x" * (MAX_HELD - 12) + '">'
    assert len(tag) == MAX_HELD
    assert whole(tag + "r</think>") == reasoning("r", a="x" * (MAX_HELD - 12))
    assert whole(tag[:-1] + "x>r") == [Chunk("text", tag[:-1] + "x>r")]


def test_line_break_or_angle_in_attributes_is_not_a_tag() -> None:
    assert run(["<think about\nit> x"]) == [Chunk("text", "<think about\nit> x")]
    assert whole("<think a <think>r</think>") == [Chunk("text", "<think a "), *reasoning("r")]


def test_tag_inside_unfinished_attribute_soup_is_found_at_flush() -> None:
    assert run(["<think ◁think▷r"]) == [
        Chunk("text", "<think "),
        Open("reasoning", {}, "◁think▷"),
        Chunk("reasoning", "r"),
        Close("reasoning"),
    ]


# --- blocks: nesting, whitespace, flush -------------------------------------------------


def test_no_nesting_inner_open_tag_is_block_text() -> None:
    assert run(["<think>a<think>b</think>c</think>"]) == [
        *reasoning("a<think>b"),
        Chunk("text", "c</think>"),
    ]


def test_whitespace_trimmed_around_tags_only() -> None:
    assert whole("x \n<think>\n  a  b \n</think>\n\n y  z ") == [
        Chunk("text", "x \n"),
        *reasoning("a  b"),
        Chunk("text", "y  z "),
    ]


def test_trailing_block_whitespace_held_until_decided() -> None:
    splitter = TagSplitter()
    assert splitter.feed("<think>a \n") == [
        Open("reasoning", {}, "<think>"),
        Chunk("reasoning", "a"),
    ]
    assert splitter.feed("b ") == [Chunk("reasoning", " \nb")]
    assert splitter.feed(" </thi") == []
    assert splitter.feed("nk>  ") == [Close("reasoning")]
    assert splitter.feed(" c") == [Chunk("text", "c")]


def test_whitespace_only_block_has_no_chunk() -> None:
    assert run(["<think> \n </think>"]) == [Open("reasoning", {}, "<think>"), Close("reasoning")]


def test_unclosed_block_closed_at_flush() -> None:
    splitter = TagSplitter()
    assert splitter.feed("<think>deep ") == [
        Open("reasoning", {}, "<think>"),
        Chunk("reasoning", "deep"),
    ]
    before = splitter.inside
    closing = splitter.flush()
    assert (before, closing, splitter.inside) == ("reasoning", [Close("reasoning")], "text")


def test_partial_close_tag_at_flush_is_block_text() -> None:
    assert run(["<think>a </thi"]) == [
        Open("reasoning", {}, "<think>"),
        Chunk("reasoning", "a"),
        Chunk("reasoning", " </thi"),
        Close("reasoning"),
    ]


def test_splitter_is_reusable_after_flush() -> None:
    splitter = TagSplitter()
    splitter.feed("<think>a")
    splitter.flush()
    assert splitter.feed("b") == [Chunk("text", "b")]


# --- fast path ---------------------------------------------------------------------------


def test_fast_path_returns_chunk_of_current_kind() -> None:
    splitter = TagSplitter()
    assert splitter.feed("") == []
    assert splitter.feed("plain words") == [Chunk("text", "plain words")]
    splitter.feed("<think>x")
    assert splitter.feed(" more") == [Chunk("reasoning", " more")]
    assert splitter.feed("a < b") == [Chunk("reasoning", "a < b")]


# --- configuration -----------------------------------------------------------------------


def test_disabled_config_passes_tags_through() -> None:
    text = "<think>a</think><|begin_of_solution|>b<|end_of_solution|>"
    assert run([text], TagConfig.from_param(False)) == [Chunk("text", text)]
    assert run(list(text), TagConfig(reasoning=())) == [Chunk("text", ch) for ch in text]


def test_custom_pair_replaces_defaults() -> None:
    config = TagConfig.from_param(["[[", "]]"])
    assert run(["<think>a</think>[[ b ]]c"], config) == [
        Chunk("text", "<think>a</think>"),
        *reasoning("b", "[["),
        Chunk("text", "c"),
    ]


def test_custom_angle_pair_takes_attributes() -> None:
    config = TagConfig.from_param(("<plan>", "</plan>"))
    assert run(['<plan k="v">p</plan>'], config) == reasoning("p", "<plan>", k="v")


@pytest.mark.parametrize(
    "value", [None, True, [], ["<a>"], ["<a>", ""], [1, 2], "x", ["a", "b", "c"]]
)
def test_from_param_falls_back_to_defaults(value: object) -> None:
    assert TagConfig.from_param(value) == TagConfig()


def test_from_param_keeps_code_interpreter_flag() -> None:
    assert TagConfig.from_param(False, code_interpreter=True) == TagConfig(
        reasoning=(), code_interpreter=True
    )
    assert TagConfig.from_param(None, code_interpreter=True) == CI


def test_pairs_order_and_solution_switch() -> None:
    assert CI.pairs()[-2:] == (
        TagPair("<|begin_of_solution|>", "<|end_of_solution|>", "solution"),
        TagPair("<code_interpreter>", "</code_interpreter>", "code_interpreter"),
    )
    assert TagConfig(solution=False).pairs()[-1] == TagPair("◁think▷", "◁/think▷", "reasoning")
    assert TagConfig(reasoning=(), code_interpreter=True).pairs() == CI.pairs()[-1:]


# --- chunking independence -------------------------------------------------------------

EXAMPLES = [
    'Hi <think foo="x">\n plan  </think>\n\nAnswer a < b, x<y',
    "<|begin_of_thought|>t<|end_of_thought|> <|begin_of_solution|>s <|end_of_solution|>!",
    "◁think▷ k ◁/think▷ <thinkpad> <thinking>w</thinking>",
    '<code_interpreter lang="python">1+1\n</code_interpreter> <Thought>T</Thought><think>open ',
]


def splits(text: str) -> Iterable[Sequence[str]]:
    yield list(text)
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            yield [text[:i], text[i:j], text[j:]]


@pytest.mark.parametrize("text", EXAMPLES)
def test_every_split_gives_the_same_segments(text: str) -> None:
    expected = whole(text)
    for parts in splits(text):
        assert merge(run(parts)) == expected, parts


def test_example_segments_are_exact() -> None:
    assert whole(EXAMPLES[0]) == [
        Chunk("text", "Hi "),
        *reasoning("plan", foo="x"),
        Chunk("text", "Answer a < b, x<y"),
    ]
    assert whole(EXAMPLES[3]) == [
        Open("code_interpreter", {"lang": "python"}, "<code_interpreter>"),
        Chunk("code_interpreter", "1+1"),
        Close("code_interpreter"),
        *reasoning("T", "<Thought>"),
        Open("reasoning", {}, "<think>"),
        Chunk("reasoning", "open"),
        Close("reasoning"),
    ]


# --- property: chunking independence and faithful reconstruction ----------------------

PIECES = [
    "<think>",
    "</think>",
    '<think a="1">',
    '<think a="1" b="two">',
    "<thinking>",
    "</thinking>",
    "<Thought>",
    "</Thought>",
    "<|begin_of_thought|>",
    "<|end_of_thought|>",
    "<|begin_of_solution|>",
    "<|end_of_solution|>",
    "◁think▷",
    "◁/think▷",
    "<code_interpreter>",
    '<code_interpreter lang="py">',
    "</code_interpreter>",
    "<thinkpad>",
    "<thi",
    "</thi",
    "<|begin_of",
    "◁thi",
    "<think ",
    "<",
    "◁",
]
text_piece = st.text(alphabet="ab <|\n\t", max_size=6)
document = st.lists(st.one_of(st.sampled_from(PIECES), text_piece), max_size=14).map("".join)


def reconstruct(segments: Sequence[Segment], text: str, config: TagConfig) -> tuple[str, set[int]]:
    """Put tags back; return the text and the offsets where trimmed whitespace may sit."""
    ends = {pair.start: pair.end for pair in config.pairs()}
    out, boundaries, end = "", set(), ""
    for index, seg in enumerate(segments):
        if isinstance(seg, Open):
            attrs = "".join(f' {k}="{v}"' for k, v in seg.attributes.items())
            out += seg.tag[:-1] + attrs + seg.tag[-1] if attrs else seg.tag
            end = ends[seg.tag]
        elif isinstance(seg, Chunk):
            out += seg.text
            continue
        else:
            boundaries.add(len(out))  # whitespace before a close (or the end of the stream)
            if index < len(segments) - 1 or text.rstrip().endswith(end):
                out += end  # closed by its tag, not by flush
        boundaries.add(len(out))  # whitespace after an opening or closing tag
    return out, boundaries


def deleted_whitespace_at(original: str, rebuilt: str) -> list[int] | None:
    """Offsets in `rebuilt` where `original` had extra whitespace; None if not ws-only deletions."""
    at: list[int] = []
    j = 0
    for ch in original:
        if j < len(rebuilt) and rebuilt[j] == ch:
            j += 1
        elif ch.isspace():
            at.append(j)
        else:
            return None
    return at if j == len(rebuilt) else None


@settings(max_examples=300, deadline=None)
@given(document, st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_property_chunking_and_reconstruction(text: str, cuts: list[int]) -> None:
    expected = whole(text)
    points = sorted({c % (len(text) + 1) for c in cuts})
    parts = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert merge(run(parts)) == expected
    assert merge(run(list(text))) == expected

    rebuilt, boundaries = reconstruct(expected, text, CI)
    deleted = deleted_whitespace_at(text, rebuilt)
    assert deleted is not None, (text, rebuilt)
    assert set(deleted) <= boundaries

    padded: list[Segment | None] = [None, *expected, None]
    for before, seg, after in zip(padded, padded[1:], padded[2:], strict=False):
        if not isinstance(seg, Chunk):
            continue
        assert seg.text
        if isinstance(before, Open | Close):
            assert not seg.text[0].isspace()
        if isinstance(after, Close):
            assert not seg.text[-1].isspace()
        if seg.kind == "text":
            assert not any(pair.start in seg.text for pair in CI.pairs())


PIECES = ["a b", " ", "<", "think", ">", "</", "x<y", "◁", "\n", "</think>", "<code_interpreter>"]


@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_plain_is_a_promise_about_feed(pieces: list[str]) -> None:
    """`plain(text)` (the accumulator's one-call hot path) claims `feed(text)` is the
    text as it is, outside any block: whenever it says so, that must be what feed does."""
    splitter = TagSplitter(CI)
    for piece in pieces:
        plain = splitter.plain(piece)
        marked = splitter.mark1 not in piece and splitter.mark2 not in piece
        out = splitter.feed(piece)
        if plain:
            assert out == [Chunk("text", piece)]
        if marked and piece:  # the marks promise what `plain` does
            assert plain


def test_plain_follows_the_splitter_in_and_out_of_blocks() -> None:
    splitter = TagSplitter(CI)
    assert splitter.plain("hello") and not splitter.plain("a<b") and not splitter.plain("◁")
    splitter.feed("<thi")  # held: it may be an opening tag
    assert not splitter.plain("x")
    splitter.feed("nk>")
    assert not splitter.plain("x")  # inside a block
    splitter.feed("plan</think>")
    assert not splitter.plain("x")  # whitespace after a closing tag is still dropped
    splitter.feed("Answer")
    assert splitter.plain("more")
    splitter.feed("<think>open")
    splitter.flush()
    assert splitter.plain("after the end")
