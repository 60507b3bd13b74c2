"""`turn_answer`: one decision for both OpenAI answers, streamed or not."""

from __future__ import annotations

from typing import Any

import pytest

from toolrelay.core.formats.answer import final_answer, turn_answer
from toolrelay.core.items import (
    as_items,
    function_call_item,
    function_call_output_item,
    message_item,
)
from toolrelay.core.turn.status import TurnStatus

CALL = function_call_item("c1", "add", '{"a":1}', status="completed")
OUTPUT = function_call_output_item("c1", "2")
TEXT = message_item("Hi", status="completed")


@pytest.mark.parametrize(
    ("status", "output", "model_reason", "expected"),
    [
        (TurnStatus.COMPLETED, [TEXT], "stop", "stop"),
        (TurnStatus.COMPLETED, [TEXT], "length", "length"),
        (TurnStatus.COMPLETED, [TEXT], "content_filter", "content_filter"),
        (TurnStatus.COMPLETED, [TEXT], "eos", "stop"),
        (TurnStatus.COMPLETED, [TEXT], None, "stop"),
        (TurnStatus.COMPLETED, [CALL], "tool_calls", "tool_calls"),
        (TurnStatus.COMPLETED, [CALL, OUTPUT, TEXT], "stop", "stop"),
        (TurnStatus.CAPPED, [TEXT], "tool_calls", "length"),
        (TurnStatus.CAPPED, [CALL], "tool_calls", "length"),
    ],
)
def test_finish_reason(
    status: TurnStatus, output: list[dict[str, Any]], model_reason: str | None, expected: str
) -> None:
    answer = turn_answer(status=status, output=as_items(output), finish_reason=model_reason)
    assert answer.finish_reason == expected


def test_a_capped_turn_is_incomplete_and_carries_its_error_as_a_notice() -> None:
    answer = turn_answer(status=TurnStatus.CAPPED, output=[TEXT], error="limit")
    assert (answer.response_status, answer.notice, answer.failure) == ("incomplete", "limit", None)


@pytest.mark.parametrize(
    ("status", "expected"), [(TurnStatus.FAILED, "failed"), (TurnStatus.CANCELLED, "cancelled")]
)
def test_failed_and_cancelled_turns_are_failures_even_with_text(
    status: TurnStatus, expected: str
) -> None:
    answer = turn_answer(status=status, output=[TEXT], error="boom")
    assert (answer.failure, answer.response_status, answer.notice) == ("boom", expected, None)
    assert turn_answer(status=status, output=[]).failure == "The model server failed."


def test_incomplete_calls_are_not_left_to_the_client() -> None:
    cut = {**CALL, "status": "incomplete"}
    answer = turn_answer(status=TurnStatus.COMPLETED, output=as_items([cut]))
    assert (answer.tool_calls, answer.finish_reason) == ((), "stop")


def test_the_final_event_gives_the_same_answer_as_the_result() -> None:
    data = {
        "done": True,
        "output": [TEXT],
        "status": "capped",
        "usage": {"input_tokens": 1},
        "error": {"content": "limit"},
        "finish_reason": "tool_calls",
    }
    expected = turn_answer(
        status=TurnStatus.CAPPED,
        output=[TEXT],
        usage={"input_tokens": 1},
        error="limit",
        finish_reason="tool_calls",
    )
    assert final_answer(data) == expected
