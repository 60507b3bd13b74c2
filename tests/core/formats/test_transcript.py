"""core.formats.transcript: output items back into Chat Completions messages and Responses input."""

from __future__ import annotations

import copy
from typing import Any

from toolrelay.core.formats.transcript import (
    INTERRUPTED_TOOL_RESULT,
    TOOL_IMAGES_TEXT,
    ChatReplay,
    repair_history,
    to_chat_messages,
    to_responses_input,
)
from toolrelay.core.items import (
    code_interpreter_item,
    function_call_item,
    function_call_output_item,
    message_item,
    reasoning_item,
)


def msg(text: str) -> dict[str, Any]:
    """Items as a client sends them back: plain dicts the transcript reads defensively."""
    return dict(message_item(text, status="completed"))


def think(text: str) -> dict[str, Any]:
    return dict(reasoning_item(text, status="completed"))


def call(call_id: str, name: str = "search", arguments: str = '{"q": "x"}') -> dict[str, Any]:
    return dict(function_call_item(call_id, name, arguments, status="completed"))


def result(call_id: str, output: str | list[dict[str, Any]]) -> dict[str, Any]:
    return dict(function_call_output_item(call_id, output))


def tool_call(call_id: str, name: str = "search", arguments: str = '{"q": "x"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# ---- to_chat_messages ----------------------------------------------------------------


def test_text_only_turn() -> None:
    assert to_chat_messages([msg("Hello")]) == [{"role": "assistant", "content": "Hello"}]


def test_parallel_calls_share_one_assistant_message_and_results_follow_in_call_order() -> None:
    output = [
        msg("Let me look."),
        call("c1", "search", '{"q": "a"}'),
        call("c2", "weather", '{"city": "Oslo"}'),
        result("c2", "rainy"),
        result("c1", "found a"),
    ]
    assert to_chat_messages(output) == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                tool_call("c1", "search", '{"q": "a"}'),
                tool_call("c2", "weather", '{"city": "Oslo"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found a"},
        {"role": "tool", "tool_call_id": "c2", "content": "rainy"},
    ]


def test_calls_without_text_have_null_content() -> None:
    output = [call("c1"), result("c1", "ok")]
    assert to_chat_messages(output) == [
        {"role": "assistant", "content": None, "tool_calls": [tool_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


def test_orphans_dropped_both_ways() -> None:
    output = [
        msg("Trying."),
        call("answered"),
        call("unanswered"),
        result("answered", "yes"),
        result("ghost", "no call made this"),
    ]
    assert to_chat_messages(output) == [
        {"role": "assistant", "content": "Trying.", "tool_calls": [tool_call("answered")]},
        {"role": "tool", "tool_call_id": "answered", "content": "yes"},
    ]


def test_only_unanswered_calls_leave_the_text() -> None:
    assert to_chat_messages([msg("Hmm"), call("c1")]) == [{"role": "assistant", "content": "Hmm"}]
    assert to_chat_messages([call("c1"), result("other", "x")]) == []


def test_images_move_to_one_user_message_after_the_tool_block() -> None:
    output = [
        call("c1", "screenshot", "{}"),
        call("c2", "photo", "{}"),
        result(
            "c1",
            [
                {"type": "input_text", "text": "Took a screenshot."},
                {"type": "input_image", "image_url": "data:image/png;base64,AAA"},
            ],
        ),
        result(
            "c2",
            [
                {"type": "input_image", "image_url": {"url": "https://x.test/p.jpg"}},
                {"type": "input_text", "text": "A photo."},
                {"type": "input_text", "text": "Second line."},
            ],
        ),
    ]
    assert to_chat_messages(output) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("c1", "screenshot", "{}"), tool_call("c2", "photo", "{}")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Took a screenshot."},
        {"role": "tool", "tool_call_id": "c2", "content": "A photo.\nSecond line."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": TOOL_IMAGES_TEXT},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
                {"type": "image_url", "image_url": {"url": "https://x.test/p.jpg"}},
            ],
        },
    ]


def reasoning_turn() -> list[dict[str, Any]]:
    return [
        think("Need data."),
        msg("Checking."),
        call("c1"),
        result("c1", "data"),
        msg("Done."),
    ]


def test_reasoning_none_drops_it() -> None:
    assert to_chat_messages(reasoning_turn(), reasoning="none") == [
        {"role": "assistant", "content": "Checking.", "tool_calls": [tool_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "data"},
        {"role": "assistant", "content": "Done."},
    ]


def test_reasoning_content_field_always_set_on_tool_turns() -> None:
    assert to_chat_messages(reasoning_turn(), reasoning="reasoning_content") == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [tool_call("c1")],
            "reasoning_content": "Need data.",
        },
        {"role": "tool", "tool_call_id": "c1", "content": "data"},
        {"role": "assistant", "content": "Done."},
    ]
    no_thoughts = [call("c1"), result("c1", "data")]
    assert to_chat_messages(no_thoughts, reasoning="reasoning_content")[0] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [tool_call("c1")],
        "reasoning_content": "",
    }


def test_reasoning_only_message_is_not_emitted_without_think_tags() -> None:
    assert to_chat_messages([think("hidden")], reasoning="reasoning_content") == []
    assert to_chat_messages([think("shown")], reasoning="think_tags") == [
        {"role": "assistant", "content": "<think>shown</think>\n"}
    ]


def test_reasoning_as_think_tags() -> None:
    assert to_chat_messages(reasoning_turn(), reasoning="think_tags") == [
        {
            "role": "assistant",
            "content": "<think>Need data.</think>\nChecking.",
            "tool_calls": [tool_call("c1")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "data"},
        {"role": "assistant", "content": "Done."},
    ]


def test_reasoning_falls_back_to_summary() -> None:
    item = think("")
    item["summary"] = [{"type": "summary_text", "text": "Summarised."}]
    assert to_chat_messages([item, msg("Hi")], reasoning="reasoning_content") == [
        {"role": "assistant", "content": "Hi", "reasoning_content": "Summarised."}
    ]


def test_multi_round_turn() -> None:
    output = [
        think("r1"),
        msg("Round one."),
        call("a"),
        result("a", "A"),
        think("r2"),
        call("b"),
        call("c"),
        result("b", "B"),
        result("c", "C"),
        msg("All done."),
    ]
    assert to_chat_messages(output, reasoning="reasoning_content") == [
        {
            "role": "assistant",
            "content": "Round one.",
            "tool_calls": [tool_call("a")],
            "reasoning_content": "r1",
        },
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("b"), tool_call("c")],
            "reasoning_content": "r2",
        },
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "tool", "tool_call_id": "c", "content": "C"},
        {"role": "assistant", "content": "All done."},
    ]


def test_consecutive_messages_join_and_unknown_items_skip() -> None:
    output = [msg("One."), {"type": "web_search_call", "id": "ws_1"}, msg("Two.")]
    assert to_chat_messages(output) == [{"role": "assistant", "content": "One.\nTwo."}]


def test_code_interpreter_replayed_as_text() -> None:
    item = dict(code_interpreter_item("print(1)", attributes={"type": "code"}))
    item["output"] = {"stdout": "1", "stderr": "", "result": ""}
    assert to_chat_messages([msg("Running:"), item]) == [
        {
            "role": "assistant",
            "content": (
                "Running:\n"
                '<code_interpreter lang="python" type="code">\nprint(1)\n</code_interpreter>\n'
                "<code_interpreter_output>\n1\n</code_interpreter_output>"
            ),
        }
    ]
    pending = dict(code_interpreter_item("x = 1"))
    assert to_chat_messages([pending]) == [
        {
            "role": "assistant",
            "content": '<code_interpreter lang="python">\nx = 1\n</code_interpreter>',
        }
    ]


def test_to_chat_messages_does_not_mutate_items() -> None:
    output = reasoning_turn()
    before = copy.deepcopy(output)
    to_chat_messages(output, reasoning="think_tags")
    assert output == before


# ---- to_responses_input --------------------------------------------------------------


def test_responses_input_items() -> None:
    encrypted = think("plain")
    encrypted["encrypted_content"] = "gAAAA"
    encrypted["summary"] = [{"type": "summary_text", "text": "Thought briefly."}]
    output = [
        think("dropped: no encrypted content"),
        encrypted,
        msg("Looking."),
        call("c1", "search", '{"q": "a"}'),
        call("orphan"),
        result(
            "c1",
            [
                {"type": "input_text", "text": "hit"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAA"},
            ],
        ),
        result("ghost", "nobody asked"),
        result("c2", "late"),
        call("c2", "weather", "{}"),
    ]
    assert to_responses_input(output) == [
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Thought briefly."}],
            "encrypted_content": "gAAAA",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Looking."}],
        },
        {"type": "function_call", "call_id": "c1", "name": "search", "arguments": '{"q": "a"}'},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "hit"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAA"},
            ],
        },
        {"type": "function_call_output", "call_id": "c2", "output": "late"},
        {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": "{}"},
    ]


def test_responses_input_skips_empty_messages_and_keeps_string_output() -> None:
    assert to_responses_input([msg(""), call("c"), result("c", "ok")]) == [
        {"type": "function_call", "call_id": "c", "name": "search", "arguments": '{"q": "x"}'},
        {"type": "function_call_output", "call_id": "c", "output": "ok"},
    ]


# ---- repair_history ------------------------------------------------------------------


def test_repair_adds_interrupted_results_and_drops_strays() -> None:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "nowhere", "content": "stray"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("a"), tool_call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "tool", "tool_call_id": "b", "content": "B again"},
        {"role": "user", "content": "next"},
        {"role": "tool", "tool_call_id": "a", "content": "too late"},
        {"role": "assistant", "content": "ok", "tool_calls": [tool_call("z")]},
    ]
    assert repair_history(history) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("a"), tool_call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "tool", "tool_call_id": "a", "content": INTERRUPTED_TOOL_RESULT},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "ok", "tool_calls": [tool_call("z")]},
        {"role": "tool", "tool_call_id": "z", "content": INTERRUPTED_TOOL_RESULT},
    ]


def test_repair_leaves_a_valid_history_equal_and_copies_it() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("a")]},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
        {"role": "assistant", "content": "done"},
    ]
    repaired = repair_history(history)
    assert repaired == history
    assert all(r is not h for r, h in zip(repaired, history, strict=True))


def test_repair_round_trips_transcript_output() -> None:
    messages = to_chat_messages(reasoning_turn(), reasoning="reasoning_content")
    assert repair_history(messages) == messages


# ---- fidelity (issue 8) ---------------------------------------------------------------


def test_reasoning_text_parts_are_replayed() -> None:
    """Our own Responses reducer writes `reasoning_text` parts; every replay mode reads them."""
    item = think("")
    item["content"] = [{"type": "reasoning_text", "text": "Thinking hard."}]
    output = [item, call("c1"), result("c1", "data")]
    assert to_chat_messages(output, reasoning="reasoning_content")[0]["reasoning_content"] == (
        "Thinking hard."
    )
    assert to_chat_messages(output, reasoning="think_tags")[0]["content"] == (
        "<think>Thinking hard.</think>\n"
    )


def test_empty_code_interpreter_block_is_dropped() -> None:
    empty = dict(code_interpreter_item(""))
    blank = dict(code_interpreter_item("  \n"))
    assert to_chat_messages([msg("Hi"), empty, blank]) == [{"role": "assistant", "content": "Hi"}]
    assert to_responses_input([empty, blank]) == []
    with_output = dict(code_interpreter_item(""))
    with_output["output"] = "boom"
    assert "boom" in to_chat_messages([with_output])[0]["content"]


def test_reasoning_details_are_replayed_on_the_assistant_message() -> None:
    """OpenRouter (Gemini 3, Anthropic) needs them back, encrypted signatures included."""
    details = [
        {"type": "reasoning.text", "text": "Plan.", "signature": "sig==", "index": 0},
        {"type": "reasoning.encrypted", "data": "opaque==", "index": 1},
    ]
    item = think("Plan.")
    item["details"] = copy.deepcopy(details)
    output = [item, msg("Checking."), call("c1"), result("c1", "data"), msg("Done.")]
    for mode in ("none", "reasoning_content", "think_tags"):
        messages = to_chat_messages(output, reasoning=mode)
        assert messages[0]["reasoning_details"] == details, mode
        assert messages[0]["tool_calls"] == [tool_call("c1")]
        assert "reasoning_details" not in messages[2]
    messages[0]["reasoning_details"][0]["text"] = "changed"
    assert item["details"] == details  # a copy, not the stored list


def test_unsigned_anthropic_reasoning_text_is_not_replayed() -> None:
    """Issue 30 item 2: Anthropic refuses a thinking block without a signature ("Invalid
    signature in thinking block"); Open WebUI and OpenRouter's SDK drop such a
    `reasoning.text`. Encrypted (redacted) entries, signed text and other formats stay,
    in order; the expected list is the input with the one entry struck out by hand."""
    anthropic = "anthropic-claude-v1"
    details = [
        {"type": "reasoning.text", "text": "Unsigned.", "format": anthropic, "index": 0},
        {"type": "reasoning.encrypted", "data": "b3BhcXVl", "format": anthropic, "index": 1},
        {"type": "reasoning.text", "text": "Signed.", "signature": "c2ln", "format": anthropic},
        {"type": "reasoning.text", "text": "Blank sig.", "signature": "", "format": anthropic},
        {"type": "reasoning.text", "text": "Gemini.", "format": "google-gemini-v1"},
    ]
    item = think("Plan.")
    item["details"] = copy.deepcopy(details)
    output = [item, call("c1"), result("c1", "data")]
    kept = [details[1], details[2], details[4]]
    assert to_chat_messages(output)[0]["reasoning_details"] == kept
    assert ChatReplay().messages(output)[0]["reasoning_details"] == kept
    only_unsigned = think("Plan.")
    only_unsigned["details"] = [copy.deepcopy(details[0])]
    assert "reasoning_details" not in to_chat_messages([only_unsigned, msg("Hi.")])[0]
