"""One turn request and a Relay of grouped options (issue 27 item 3), and the older forms.

`Relay.run(TurnRequest(...))` and `Relay.run(messages, **options)` run the same turn;
`Relay(model_options=…, code=…, background=…)` and the older one-keyword-each form
build the same relay, an older keyword winning over its group's field.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from toolrelay import CodeOptions, ModelOptions, Relay, TaskOptions, TurnRequest, tool
from toolrelay.core.stream.think_tags import TagConfig
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink
from toolrelay.testing.wire import ToolCallSpec

pytestmark = pytest.mark.anyio


SEEN: list[dict[str, Any]] = []


@tool
async def weather(city: str, __metadata__: dict[str, Any]) -> str:
    """Weather for a city."""
    SEEN.append(dict(__metadata__))
    return f"sunny in {city}"


def without_ids(output: list[Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in item.items() if k != "id"} for item in output]


def script() -> ScriptedModel:
    return ScriptedModel(
        reply(calls=[ToolCallSpec("weather", {"city": "Oslo"}, id="call_1")]), reply("Sunny.")
    )


async def test_a_turn_request_runs_the_turn_its_keywords_would() -> None:
    messages = [{"role": "user", "content": "Oslo?"}]
    options = {"chat_id": "c1", "message_id": "msg_1", "params": {"temperature": 0.5}}
    by_keywords, by_request = script(), script()
    sinks = ListSink(), ListSink()
    old = await Relay(by_keywords, [weather]).run(messages, sink=sinks[0], **options)
    turn = TurnRequest(
        messages=messages, chat_id="c1", message_id="msg_1", params={"temperature": 0.5}
    )
    new = await Relay(by_request, [weather]).run(turn, sink=sinks[1])
    assert (new.status, new.text) == (old.status, old.text)
    assert without_ids(new.output) == without_ids(old.output)
    assert [r.params for r in by_request.requests] == [r.params for r in by_keywords.requests]
    assert by_request.requests[0].params["temperature"] == 0.5
    assert [e.type for e in sinks[1].events] == [e.type for e in sinks[0].events]


async def test_keywords_beside_a_turn_request_change_it() -> None:
    SEEN.clear()
    turn = TurnRequest(messages=[{"role": "user", "content": "Oslo?"}], message_id="msg_a")
    await Relay(script(), [weather]).run(turn, message_id="msg_b", metadata={"via": "kw"})
    assert (SEEN[-1]["message_id"], SEEN[-1]["via"]) == ("msg_b", "kw")
    assert turn.message_id == "msg_a"  # a request is a value: never changed in place


async def test_a_string_is_one_user_message() -> None:
    model = ScriptedModel(reply("Hi."))
    await Relay(model).run("hello")
    assert model.requests[0].messages[-1] == {"role": "user", "content": "hello"}


def test_grouped_options_and_the_older_keywords_build_the_same_relay() -> None:
    model = ScriptedModel()
    tags = TagConfig(reasoning=())
    grouped = Relay(
        model,
        model_options=ModelOptions(
            name="route",
            params={"top_p": 1},
            tags=tags,
            text_tool_calls=True,
            prices={"input": 1.0},
        ),
        code=CodeOptions(tool=False),
        background=TaskOptions(tasks=("title",)),
    )
    older = Relay(
        model,
        name="route",
        params={"top_p": 1},
        tags=tags,
        text_tool_calls=True,
        prices={"input": 1.0},
        code_tool=False,
        tasks=("title",),
    )
    for relay in (grouped, older):
        assert (relay.name, relay.params, relay.tags, relay.text_tool_calls) == (
            "route",
            {"top_p": 1},
            tags,
            True,
        )
        assert (relay.code_tool, relay.tasks, relay.prices) == (False, ("title",), {"input": 1.0})
    assert older.options == grouped.options
    assert (older.code, older.background) == (grouped.code, grouped.background)


def test_an_older_keyword_wins_over_its_group() -> None:
    relay = Relay(
        ScriptedModel(),
        model_options=ModelOptions(name="group", tags=TagConfig()),
        tags=None,
        name="keyword",
    )
    assert (relay.name, relay.tags) == ("keyword", None)
    assert dataclasses.replace(relay.options, name="group", tags=TagConfig()) == ModelOptions(
        name="group"
    )


def test_defaults_are_the_older_defaults() -> None:
    relay = Relay(ScriptedModel())
    assert (relay.name, relay.params, relay.tags) == (None, {}, TagConfig())
    assert (relay.code_runner, relay.code_tool) == (None, True)
    assert (relay.tasks, relay.task_model) == (("title", "tags", "follow_ups"), None)
    assert (relay.text_tool_calls, relay.tool_choice_step, relay.max_tools_per_call) == (
        False,
        False,
        2,
    )


def test_an_unknown_keyword_is_an_error() -> None:
    with pytest.raises(TypeError, match="nmae"):
        Relay(ScriptedModel(), nmae="typo")  # type: ignore[call-arg]


def test_a_turn_setup_holds_each_option_once_in_its_group() -> None:
    """A new per-request or model option is one field of its group that the loop reads
    there (`setup.request.x`, `setup.model.y`), never also a field of `TurnSetup`."""
    from toolrelay.engine.setup import TurnSetup

    own = {f.name for f in dataclasses.fields(TurnSetup)}
    grouped = {f.name for f in dataclasses.fields(TurnRequest)}
    grouped |= {f.name for f in dataclasses.fields(ModelOptions)}
    assert {"request", "model", "tools", "code"} <= own
    # `messages`: the history after the inlets; `request`: the group (`TurnRequest.request`
    # is the `__request__` object)
    assert own & grouped == {"messages", "request"}
