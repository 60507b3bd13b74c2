"""This turn's calls and results replayed as text to a text-call model (issue 14)."""

from __future__ import annotations

from typing import Any

from toolrelay.core.items import function_call_item, function_call_output_item
from toolrelay.core.text_calls.replay import repeats_of, replay_as_text


def call(call_id: str, arguments: str = '{"city":"Paris"}', name: str = "get_weather") -> Any:
    return function_call_item(call_id, name, arguments)


def result(call_id: str, output: Any = "14 °C, light rain (station PAR-7391)") -> Any:
    return function_call_output_item(call_id, output)


def text(value: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": value}],
    }


def test_a_result_goes_back_as_a_user_message_without_the_call() -> None:
    messages = replay_as_text([call("c1"), result("c1")])
    assert messages == [
        {
            "role": "user",
            "content": "Result of get_weather: "
            "14 °C, light rain (station PAR-7391)\n"
            "Answer my question using this result.",
        }
    ]
    assert not any(m["role"] in ("assistant", "tool") for m in messages)


def test_the_users_question_is_restated_after_the_results() -> None:
    """Asked again in its own words, the small model answered with the result's fact
    more often (`ASKED_TEXT`); without a question the request stays generic."""
    [one] = replay_as_text([call("c1"), result("c1")], question="Is it raining in Paris?")
    assert one["content"].splitlines()[-1] == (
        "Using this result, answer in one or two sentences: Is it raining in Paris?"
    )
    two = [call("c1"), call("c2", '{"city": "Tokyo"}'), result("c1"), result("c2", "22 °C")]
    [both] = replay_as_text(two, question="Paris or Tokyo?")
    assert both["content"].splitlines()[-1] == (
        "Using these results, answer in one or two sentences: Paris or Tokyo?"
    )


def test_one_batch_is_one_message_and_an_identical_call_is_shown_once() -> None:
    items = [
        call("c1"),
        call("c2", '{"city": "Tokyo"}'),
        result("c1"),
        result("c2", [{"type": "input_text", "text": "22 °C"}, {"type": "input_image"}]),
        call("c3", '{ "city" : "Paris" }'),  # the first call again, spaced differently
        result("c3"),
    ]
    [message] = replay_as_text(items)
    assert message["content"].splitlines() == [
        "Result of get_weather: 14 °C, light rain (station PAR-7391)",
        "Result of get_weather: 22 °C",
        "Answer my question using these results.",
    ]


def test_text_around_the_calls_keeps_its_place_and_unanswered_calls_are_left_out() -> None:
    items = [text("Let me look."), call("c1"), result("c1"), text("Paris: 14 °C."), call("c2")]
    roles = [(m["role"], m["content"][:12]) for m in replay_as_text(items)]
    assert roles == [
        ("assistant", "Let me look."),
        ("user", "Result of ge"),
        ("assistant", "Paris: 14 °C"),
    ]


def test_repeats_of_answered_calls_map_to_their_results() -> None:
    done = [call("c1"), result("c1", "first"), call("c2", '{"city":"Rome"}'), result("c2", "x")]
    again = [call("c3", '{"city": "Paris"}'), call("c4", '{"city":"Rome"}')]
    found = repeats_of(again, [*done, *again])
    assert found is not None
    assert {k: v["output"] for k, v in found.items()} == {"c3": "first", "c4": "x"}


def test_a_batch_with_anything_new_is_not_a_repeat() -> None:
    done = [call("c1"), result("c1")]
    assert repeats_of([call("c2"), call("c3", '{"city":"Oslo"}')], done) is None
    assert repeats_of([call("c2", '{"city":"Paris","units":"C"}')], done) is None
    assert repeats_of([call("c2", name="get_time")], done) is None
    assert repeats_of([call("c2")], [call("c1")]) is None  # asked, never answered
    assert repeats_of([], done) is None


def test_keys_the_schema_does_not_declare_do_not_make_a_new_call() -> None:
    """The model copies the result into the arguments; the tool would not get those keys."""
    done = [call("c1", '{"symbol":"MSFT"}', "price"), result("c1", "MSFT: 187.42 USD")]
    copied = call("c2", '{"symbol":"MSFT","price":187.42,"required":["symbol"]}', "price")
    schema = {"type": "object", "properties": {"symbol": {"type": "string"}}}
    assert repeats_of([copied], [*done, copied]) is None  # compared as written
    found = repeats_of([copied], [*done, copied], {"price": schema})
    assert found is not None and found["c2"]["output"] == "MSFT: 187.42 USD"
    other = call("c3", '{"symbol":"AAPL","price":1}', "price")
    assert repeats_of([other], [*done, other], {"price": schema}) is None
