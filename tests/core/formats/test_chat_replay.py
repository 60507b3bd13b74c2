"""`ChatReplay`: a turn's growing output converted incrementally is exactly what
`to_chat_messages` makes of all of it, also when earlier items change between calls."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.formats.test_transcript import call, msg, result, think
from tests.patience import fuzz_budget
from toolrelay.core.formats.transcript import ChatReplay, ReasoningReplay, to_chat_messages
from toolrelay.core.items import code_interpreter_item, updated

IDS = ["c1", "c2", "c3", "c4"]


def round_items(call_id: str, text: str) -> list[dict[str, Any]]:
    return [think("hmm"), msg(text), call(call_id), result(call_id, f"out {call_id}")]


def test_rounds_grow_and_match_a_full_conversion() -> None:
    replay, output = ChatReplay(), []
    for number in range(5):
        output += round_items(f"c{number}", f"round {number}")
        assert replay.messages(output) == to_chat_messages(output)
    output.append(msg("final"))
    assert replay.messages(output) == to_chat_messages(output)


def test_an_earlier_item_replaced_between_calls_is_seen() -> None:
    replay = ChatReplay()
    output = [*round_items("c1", "first"), *round_items("c2", "second")]
    replay.messages(output)
    output[1] = {**output[1], "content": [{"type": "output_text", "text": "edited"}]}
    output.append(msg("after"))
    assert replay.messages(output) == to_chat_messages(output)
    assert replay.messages(output)[0]["content"] == "edited"


def test_a_late_answer_to_an_earlier_call_is_seen() -> None:
    replay = ChatReplay()
    output = [msg("a"), call("c1"), call("c2"), result("c1", "one"), msg("b")]
    first = replay.messages(output)
    assert all(c["id"] != "c2" for m in first for c in m.get("tool_calls", []))
    output.append(result("c2", "two"))  # c2 is answered now: the first group changes
    assert replay.messages(output) == to_chat_messages(output)


def test_a_second_result_for_an_earlier_call_is_seen() -> None:
    replay = ChatReplay()
    output = [call("c1"), result("c1", "old"), msg("b")]
    replay.messages(output)
    output.append(result("c1", "new"))  # a stray: the first result stays (k-th with k-th)
    assert replay.messages(output) == to_chat_messages(output)


def test_a_shorter_output_or_another_reasoning_mode_starts_over() -> None:
    replay = ChatReplay()
    output = [*round_items("c1", "first"), *round_items("c2", "second")]
    replay.messages(output)
    assert replay.messages(output[:4]) == to_chat_messages(output[:4])
    modes: list[ReasoningReplay] = ["think_tags", "reasoning_content", "none"]
    for mode in modes:
        assert replay.messages(output, reasoning=mode) == to_chat_messages(output, reasoning=mode)


def test_a_code_block_updated_with_its_output_is_seen() -> None:
    replay = ChatReplay()
    block = code_interpreter_item("print(1)")
    output: list[Any] = [msg("run it"), block]
    replay.messages(output)
    output[1] = updated(block, output={"stdout": "1"}, status="completed")
    assert replay.messages(output) == to_chat_messages(output)


def test_a_result_read_from_past_the_kept_part_that_goes_away_is_seen() -> None:
    """Rule 3: a call shown answered by a later item is not kept apart from that item
    (found by the property below: the result replaced, the call was still shown answered)."""
    replay = ChatReplay()
    output: list[Any] = [call("c1"), result("c2", "x"), msg("b"), result("c1", "r"), msg("c")]
    replay.messages(output)  # c2's result, no call of its own, ends the call's group
    output[3] = msg("e")
    assert replay.messages(output) == to_chat_messages(output)


def _item(kind: str, call_id: str, text: str) -> dict[str, Any]:
    if kind == "msg":
        return msg(text)
    if kind == "think":
        return think(text)
    if kind == "call":
        return call(call_id)
    return result(call_id, text)


ITEMS = st.builds(
    _item,
    st.sampled_from(["msg", "think", "call", "result"]),
    st.sampled_from(IDS),
    st.sampled_from(["x", "y", ""]),
)
STEPS = st.lists(
    st.tuples(
        st.lists(ITEMS, max_size=4),  # items appended
        st.none() | st.tuples(st.integers(0, 30), ITEMS),  # one item replaced by a new one
        st.sampled_from(["none", "think_tags", "reasoning_content"]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=fuzz_budget(400), deadline=None)
@given(STEPS)
def test_any_history_of_changes_matches_a_full_conversion(steps: Any) -> None:
    replay, output = ChatReplay(), []
    for added, replaced, mode in steps:
        output += added
        if replaced is not None and output:
            index, item = replaced
            output[index % len(output)] = item
        assert replay.messages(output, reasoning=mode) == to_chat_messages(output, reasoning=mode)
