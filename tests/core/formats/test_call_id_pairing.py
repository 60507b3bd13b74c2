"""A call id used twice replays each call with its own result (issue 30 item 1).

The case is the issue's: two `get_weather` calls both named `call_1` (Paris,
then Rome) and two outputs for `call_1` (`{"temp":21}`, then `"late"`). Before,
the outputs were paired by id alone, so `"late"` answered both calls. The
expected messages below are written by hand: the k-th output of an id goes with
its k-th call, and the second pair goes back under the id `call_` + the first 24
hex digits of sha256("call_1\\0" + "1"), computed here with hashlib.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.core.formats.test_transcript import call, msg, result
from toolrelay.adapters.stores.base import StoredMessage
from toolrelay.adapters.stores.records import history_messages
from toolrelay.core.formats.chat_completions.request import request_body as chat_body
from toolrelay.core.formats.ollama.request import request_body as ollama_body
from toolrelay.core.formats.transcript import (
    INTERRUPTED_TOOL_RESULT,
    ChatReplay,
    repair_history,
    to_chat_messages,
    to_responses_input,
)
from toolrelay.core.items import as_items

FRESH = "call_" + hashlib.sha256(b"call_1\x001").hexdigest()[:24]
PARIS, ROME = '{"city":"Paris"}', '{"city":"Rome"}'


def items(interleaved: bool = False) -> list[dict[str, Any]]:
    paris, rome = call("call_1", "get_weather", PARIS), call("call_1", "get_weather", ROME)
    temp, late = result("call_1", '{"temp":21}'), result("call_1", "late")
    return [paris, temp, rome, late] if interleaved else [paris, rome, temp, late]


def tool_call(call_id: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }


GROUPED: list[dict[str, Any]] = [
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [tool_call("call_1", PARIS), tool_call(FRESH, ROME)],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp":21}'},
    {"role": "tool", "tool_call_id": FRESH, "content": "late"},
]
INTERLEAVED: list[dict[str, Any]] = [
    {"role": "assistant", "content": None, "tool_calls": [tool_call("call_1", PARIS)]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp":21}'},
    {"role": "assistant", "content": None, "tool_calls": [tool_call(FRESH, ROME)]},
    {"role": "tool", "tool_call_id": FRESH, "content": "late"},
]


@pytest.mark.parametrize(("interleaved", "expected"), [(False, GROUPED), (True, INTERLEAVED)])
def test_chat_completions_pairs_the_kth_output_with_the_kth_call(
    interleaved: bool, expected: list[dict[str, Any]]
) -> None:
    assert to_chat_messages(items(interleaved)) == expected
    body = chat_body(model="m", messages=[], output=as_items(items(interleaved)))
    assert body["messages"] == expected


def test_the_incremental_replay_pairs_the_same_way_as_it_grows() -> None:
    replay, output = ChatReplay(), []
    for item in items(interleaved=True):
        output.append(item)
        assert replay.messages(output) == to_chat_messages(output)
    assert replay.messages(output) == INTERLEAVED
    output.append(msg("Both done."))
    assert replay.messages(output) == [*INTERLEAVED, {"role": "assistant", "content": "Both done."}]


def test_responses_input_pairs_the_kth_output_with_the_kth_call() -> None:
    def fc(call_id: str, arguments: str) -> dict[str, Any]:
        return {
            "type": "function_call",
            "call_id": call_id,
            "name": "get_weather",
            "arguments": arguments,
        }

    assert to_responses_input(items()) == [
        fc("call_1", PARIS),
        fc(FRESH, ROME),
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temp":21}'},
        {"type": "function_call_output", "call_id": FRESH, "output": "late"},
    ]


def test_ollama_pairs_the_kth_output_with_the_kth_call() -> None:
    messages = ollama_body(model="m", messages=[], output=as_items(items()))["messages"]
    calls = messages[0]["tool_calls"]
    assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
        ("call_1", {"city": "Paris"}),
        (FRESH, {"city": "Rome"}),
    ]
    assert [(m["tool_call_id"], m["content"]) for m in messages[1:]] == [
        ("call_1", '{"temp":21}'),
        (FRESH, "late"),
    ]


def _stored(role: str, content: str, output: list[dict[str, Any]] | None = None) -> StoredMessage:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return StoredMessage(
        id=f"m{content}",
        chat_id="c",
        role=role,
        content=content,
        output=output or [],
        usage=None,
        status=None,
        error=None,
        timings=None,
        model=None,
        follow_ups=[],
        created_at=now,
        updated_at=now,
    )


def test_a_saved_chat_reusing_an_id_across_turns_replays_each_with_its_own_result() -> None:
    """Kimi restarts `functions.x:0` each round: the second turn's pair gets the fresh id."""
    paris, temp, rome, late = items(interleaved=True)
    saved = [
        _stored("user", "Paris?"),
        _stored("assistant", "", [paris, temp]),
        _stored("user", "Rome?"),
        _stored("assistant", "", [rome, late]),
    ]
    assert history_messages(saved) == [
        {"role": "user", "content": "Paris?"},
        *INTERLEAVED[:2],
        {"role": "user", "content": "Rome?"},
        *INTERLEAVED[2:],
    ]


def test_one_call_with_two_outputs_keeps_its_first_and_drops_the_stray() -> None:
    output = [call("c1"), result("c1", "first"), result("c1", "second")]
    tools = [m for m in to_chat_messages(output) if m["role"] == "tool"]
    assert tools == [{"role": "tool", "tool_call_id": "c1", "content": "first"}]


def test_a_client_history_reusing_an_id_is_repaired_the_same_way() -> None:
    """What a client sends (an imported chat through /v1) gets the pairing too."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Paris and Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("call_1", PARIS), tool_call("call_1", ROME)],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp":21}'},
        {"role": "tool", "tool_call_id": "call_1", "content": "late"},
        {"role": "tool", "tool_call_id": "call_1", "content": "a third: no call left"},
    ]
    assert repair_history(history) == [history[0], *GROUPED]


def test_a_client_history_reusing_an_id_in_a_later_turn_is_repaired() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Paris?"},
        *INTERLEAVED[:2],
        {"role": "user", "content": "Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_1", ROME)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "late"},
    ]
    assert repair_history(history) == [
        {"role": "user", "content": "Paris?"},
        *INTERLEAVED[:2],
        {"role": "user", "content": "Rome?"},
        *INTERLEAVED[2:],
    ]
    unanswered = [*history[:-1], {"role": "user", "content": "?"}]
    assert repair_history(unanswered)[-2] == {
        "role": "tool",
        "tool_call_id": FRESH,
        "content": INTERRUPTED_TOOL_RESULT,
    }
