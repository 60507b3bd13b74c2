"""`relay.chat()`: a conversation whose turns see the ones before (the README's example)."""

from __future__ import annotations

from contextlib import aclosing

import pytest

from toolrelay import Conversation, Relay, tool
from toolrelay.core import events as ev
from toolrelay.testing.scripted_model import Body, ScriptedModel, reply

pytestmark = pytest.mark.anyio


@tool
def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def paris_then_lyon() -> ScriptedModel:
    return ScriptedModel(
        reply(calls=[("weather", {"city": "Paris"})]),
        reply("Sunny in Paris."),
        reply(calls=[("weather", {"city": "Lyon"})]),
        reply("Lyon too."),
    )


async def test_the_second_turn_sees_the_first() -> None:
    model = paris_then_lyon()
    chat = Relay(model, [weather]).chat(system="Be brief.")
    assert isinstance(chat, Conversation)
    first = await chat.run("Weather in Paris?")
    assert (first.status, first.text) == ("completed", "Sunny in Paris.")
    second = await chat.run("And in Lyon?")
    assert second.text == "Lyon too."

    sent = model.requests[2].messages  # the first request of the second turn
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[0]["content"] == "Be brief."
    assert sent[1]["content"] == "Weather in Paris?"
    assert sent[2]["tool_calls"][0]["function"]["name"] == "weather"
    assert sent[3] == {
        "role": "tool",
        "tool_call_id": sent[2]["tool_calls"][0]["id"],
        "content": "sunny in Paris",
    }
    assert sent[4]["content"] == "Sunny in Paris."
    assert sent[5] == {"role": "user", "content": "And in Lyon?"}
    assert len(chat.messages) == 9  # system + two turns of user, call, result, answer


async def test_plain_run_has_no_memory() -> None:
    """The README says so: `relay.run` answers only what it is given."""
    model = ScriptedModel(reply("one"), reply("two"))
    relay = Relay(model, [])
    await relay.run("first")
    await relay.run("second")
    assert model.requests[1].messages == [{"role": "user", "content": "second"}]


async def test_a_streamed_turn_is_remembered() -> None:
    model = paris_then_lyon()
    chat = Relay(model, [weather]).chat()
    events = [e async for e in chat.stream("Weather in Paris?")]
    assert events[-1].type == ev.CHAT_COMPLETION and events[-1].data["done"]
    async for _ in chat.stream("And in Lyon?"):
        pass
    assert [m["role"] for m in model.requests[2].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


async def test_breaking_on_the_final_event_still_remembers() -> None:
    model = ScriptedModel(reply("hello"), reply("again"))
    chat = Relay(model, []).chat()
    async with aclosing(chat.stream("hi")) as events:
        async for event in events:
            if event.type == ev.CHAT_COMPLETION and event.data.get("done"):
                break
    assert chat.messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]


async def test_a_stream_left_early_is_not_remembered() -> None:
    body = reply(["partial ", "answer ", "never ", "finished"])
    model = ScriptedModel(Body(body, piece=len(body) // 4, stall_after=2))
    chat = Relay(model, []).chat(history=[{"role": "user", "content": "earlier"}])
    async with aclosing(chat.stream("hi")) as events:
        async for event in events:
            if event.type == ev.OUTPUT_TEXT_DELTA:
                break
    assert chat.messages == [{"role": "user", "content": "earlier"}]


async def test_a_failed_turn_is_remembered_with_its_partial_output() -> None:
    model = ScriptedModel(Body(reply("partial answer"), piece=8, fail_after=3), reply("ok"))
    chat = Relay(model, []).chat()
    result = await chat.run("hi")
    assert result.status == "failed"
    await chat.run("again")
    sent = model.requests[1].messages
    assert sent[0] == {"role": "user", "content": "hi"}
    assert sent[-1] == {"role": "user", "content": "again"}
    assert len(sent) in (2, 3)  # the partial text, if any arrived, is kept as an assistant message
