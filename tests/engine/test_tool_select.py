"""The tool-selection step (`engine.tool_select`, issue 28), over a fake model server: the
model is first asked, without tools, which tools the message needs; the turn is offered
only those, none when it says none, and every tool when its reply says nothing usable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolrelay import Relay, tool
from toolrelay.adapters.models import OpenAIChat
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.core import events as ev
from toolrelay.engine.checkpoint import TurnPaused, TurnState
from toolrelay.engine.tool_select import (
    SELECT_PROMPT,
    chosen_names,
    named_instead,
    not_started,
    step_message,
)
from toolrelay.testing import FakeModelServer, JSONReply, SSEReply
from toolrelay.testing.sinks import ListSink
from toolrelay.testing.wire import chat_chunks

pytestmark = pytest.mark.anyio

NAMES = ["get_weather", "get_time", "get_stock_price", "order_status"]


def make(name: str) -> Any:
    def fn(key: str) -> str:
        return f"{name} result for {key}"

    fn.__name__ = name
    fn.__doc__ = f"{name.replace('_', ' ').capitalize()}.\n\nMore text the step leaves out."
    return tool(fn)


TOOLS = [make(n) for n in NAMES]


@pytest.fixture
def server() -> Iterator[FakeModelServer]:
    with FakeModelServer() as srv:
        yield srv


def says(text: str) -> SSEReply:
    return SSEReply(chat_chunks(text=[text[:5], text[5:]]))


def offered(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


async def run(
    server: FakeModelServer, question: str, *, step: bool = True, **params: Any
) -> tuple[str, ListSink, Relay]:
    model = OpenAIChat(base_url=server.base_url, model="small")
    sink = ListSink()
    relay = Relay(model, TOOLS, text_tool_calls=True, tool_choice_step=step, tasks=())
    async with relay:
        result = await relay.run(question, sink=sink, params=params or None)
    return result.text, sink, relay


async def test_the_turn_is_offered_only_the_tool_the_model_chose(server: FakeModelServer) -> None:
    server.script(
        says("get_time"),
        says('{"name": "get_time", "arguments": {"key": "Paris"}}'),
        says("It is get_time result for Paris."),
    )
    text, sink, _ = await run(server, "What time is it in Paris?")
    select, first, second = (r.json for r in server.requests)
    assert "tools" not in select or not select["tools"]
    assert select["temperature"] == 0
    system = select["messages"][0]["content"]
    assert system.startswith(SELECT_PROMPT.split("{tools}")[0])
    assert "- get_weather: Get weather." in system and "More text" not in system
    assert select["messages"][1] == {"role": "user", "content": "What time is it in Paris?"}
    assert offered(first) == ["get_time"]
    assert offered(second) == []  # the chosen tool has its result: answer now
    assert text == "It is get_time result for Paris."
    # the step's reply is never shown to the client
    shown = "".join(e.data["delta"] for e in sink.of(ev.OUTPUT_TEXT_DELTA))
    assert shown == text


async def test_tools_stay_offered_until_each_chosen_one_ran(server: FakeModelServer) -> None:
    server.script(
        says("get_time and get_weather"),
        says('{"name": "get_time", "arguments": {"key": "Paris"}}'),
        says('{"name": "get_weather", "arguments": {"key": "Paris"}}'),
        says("Done."),
    )
    text, _, _ = await run(server, "Time and weather in Paris?")
    _, first, second, third = (r.json for r in server.requests)
    assert offered(first) == offered(second) == ["get_weather", "get_time"]
    assert offered(third) == []
    assert text == "Done."


async def test_the_call_is_made_greedily_and_the_answer_at_the_clients_temperature(
    server: FakeModelServer,
) -> None:
    server.script(
        says("get_time"),
        says('{"name": "get_time", "arguments": {"key": "Paris"}}'),
        says("It is get_time result for Paris."),
    )
    await run(server, "What time is it in Paris?", temperature=0.7)
    temperatures = [r.json.get("temperature") for r in server.requests]
    assert temperatures == [0, 0, 0.7]
    server.requests.clear()
    server.script(says("none"), says("Hi!"))
    await run(server, "Say hi.", temperature=0.7)
    assert [r.json.get("temperature") for r in server.requests] == [0, 0.7]


async def test_none_offers_no_tools_so_the_model_answers_as_text(
    server: FakeModelServer,
) -> None:
    server.script(says("none"), says("Hi there!"))
    text, _, _ = await run(server, "Say hi.")
    assert len(server.requests) == 2
    assert "tools" not in server.requests[1].json or not server.requests[1].json["tools"]
    assert text == "Hi there!"


async def test_a_call_to_a_tool_not_offered_is_asked_again_without_tools(
    server: FakeModelServer,
) -> None:
    """Rule 8: a made-up tool, or one the step did not pick: the call is neither run nor
    shown; the model answers again with no tools, and the call is kept in the steps."""
    model = OpenAIChat(base_url=server.base_url, model="small")
    for call in (
        '{"name": "say_hi", "arguments": {}}',
        '```json\n{"name": "get_weather", "arguments": {"key": "Paris"}}\n```',
    ):
        server.requests.clear()
        server.script(says("get_time"), says(call), says("Hi there!"))
        sink = ListSink()
        async with Relay(model, TOOLS, text_tool_calls=True, tool_choice_step=True, tasks=()) as r:
            result = await r.run("Say hi.", sink=sink)
        _, first, second = (r.json for r in server.requests)
        assert offered(first) == ["get_time"] and offered(second) == []
        assert second["messages"] == first["messages"]  # nothing of the call is replayed
        assert result.text == "Hi there!"
        assert [i["type"] for i in result.output] == ["message"]
        shown = "".join(e.data["delta"] for e in sink.of(ev.OUTPUT_TEXT_DELTA))
        assert shown == "Hi there!"
        assert [e.data["item"]["type"] for e in sink.of(ev.OUTPUT_ITEM_ADDED)] == ["message"]
        models = [s for s in result.timings["steps"] if s["step"] == "model"]
        assert [s.get("invented") for s in models] == [call, None]


async def test_a_made_up_call_without_the_step_stays_text(server: FakeModelServer) -> None:
    """Rule 8 belongs to the step: a route without it shows what the model wrote."""
    call = '{"name": "say_hi", "arguments": {}}'
    server.script(says(call))
    text, _, _ = await run(server, "Say hi.", step=False)
    assert len(server.requests) == 1
    assert text == call


async def test_at_most_two_tools(server: FakeModelServer) -> None:
    server.script(says("order_status, get_time and get_weather"), says("done"))
    await run(server, "Where is order 7 and what time is it?")
    assert offered(server.requests[1].json) == ["get_time", "order_status"]


async def test_a_reply_naming_no_tool_offers_none(server: FakeModelServer) -> None:
    """The small model, asked to pick, often answers a plain question itself."""
    server.script(says("Red, green and blue."), says("Red, green, blue."))
    text, _, _ = await run(server, "Name three colours.")
    assert not server.requests[1].json.get("tools")
    assert text == "Red, green, blue."


async def test_a_failed_step_offers_every_tool(server: FakeModelServer) -> None:
    server.script(JSONReply({"error": {"message": "no such thing"}}, status=400), says("done"))
    text, _, _ = await run(server, "What time is it?")
    assert offered(server.requests[1].json) == NAMES
    assert text == "done"


async def test_no_step_when_off_or_when_the_client_chose(server: FakeModelServer) -> None:
    server.script(says("done"))
    await run(server, "What time is it?", step=False)
    assert len(server.requests) == 1 and offered(server.requests[0].json) == NAMES
    server.requests.clear()
    server.script(says("done"))
    await run(server, "What time is it?", tool_choice="required")
    assert len(server.requests) == 1 and offered(server.requests[0].json) == NAMES


def test_reading_the_reply() -> None:
    assert chosen_names("`get_time`", NAMES, 2) == ["get_time"]
    assert chosen_names("get_time_zone", NAMES, 2) == []
    assert chosen_names("functions.get_time", NAMES, 2) == ["get_time"]
    assert chosen_names("None.", NAMES, 2) == []
    assert chosen_names("get_weather then get_time", NAMES, 1) == ["get_weather"]


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Wire money (asks first)."""
    return f"wired {amount}"


async def _chat(url: str) -> str:
    store = await SQLStore.open(url)
    try:
        user = await store.create_user("library")
        return (await store.create_chat(user.id)).id
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("picked", "then_offered"),
    [(["get_time", "wire"], ["get_time", "wire"]), (["wire"], [])],
)
async def test_a_resumed_turn_keeps_the_steps_choice(
    server: FakeModelServer, tmp_path: Path, picked: list[str], then_offered: list[str]
) -> None:
    """The choice is checkpointed with the turn: resumed by a fresh relay (the process that
    chose is gone), the turn is offered what was picked, or nothing once all of it ran."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
    chat_id = await _chat(url)
    tools = [*TOOLS, wire]
    server.script(says(" and ".join(picked)), says('{"name": "wire", "arguments": {"amount": 5}}'))
    store = await SQLStore.open(url)
    model = OpenAIChat(base_url=server.base_url, model="small")
    relay = Relay(model, tools, store=store, text_tool_calls=True, tool_choice_step=True, tasks=())
    with pytest.raises(TurnPaused) as paused:
        await relay.run("Pay 5 now.", chat_id=chat_id, durable=True, pause=True)
    await relay.aclose()
    await store.close()
    assert offered(server.requests[1].json) == picked

    server.requests.clear()
    server.script(says("Paid."))
    store = await SQLStore.open(url)
    model = OpenAIChat(base_url=server.base_url, model="small")
    relay = Relay(model, tools, store=store, text_tool_calls=True, tool_choice_step=True, tasks=())
    try:
        relay.approve(next(iter(paused.value.waiting)))
        result = await relay.resume(chat_id)
    finally:
        await relay.aclose()
        await store.close()
    assert result.text == "Paid."
    (request,) = server.requests  # no second selection step
    assert offered(request.json) == then_offered
    assert "wired 5" in str(request.json["messages"])


def test_the_choice_round_trips_through_the_checkpoint() -> None:
    state = TurnState.from_json(TurnState(picked=["get_time"]).to_json())
    assert state.picked == ["get_time"]
    assert TurnState.from_json(TurnState().to_json()).picked is None
    assert TurnState.from_json(TurnState(picked=[]).to_json()).picked == []  # chose none
    # a turn cut before it chose and before any response picks when it resumes
    assert not_started(TurnState())
    assert not not_started(TurnState(picked=[]))
    assert not not_started(TurnState(steps=[{"step": "model", "s": 1.0}]))


async def test_a_follow_up_is_asked_about_with_the_questions_before_it(
    server: FakeModelServer,
) -> None:
    """ "And in Tokyo?" names no tool: the step sees the user's earlier messages too."""
    server.script(says("get_weather"), says("done"))
    model = OpenAIChat(base_url=server.base_url, model="small")
    relay = Relay(model, TOOLS, text_tool_calls=True, tool_choice_step=True, tasks=())
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "In Paris it is 14 °C."},
        {"role": "user", "content": "And in Tokyo?"},
    ]
    async with relay:
        await relay.run(history)
    system, asked = server.requests[0].json["messages"]
    assert system["content"].endswith("\n\nThe user asked before: What's the weather in Paris?")
    assert "14 °C" not in system["content"]  # answers are left out: the model went on with them
    assert asked == {"role": "user", "content": "And in Tokyo?"}
    assert offered(server.requests[1].json) == ["get_weather"]


def test_the_step_sees_the_users_last_few_messages_cut_short() -> None:
    long = "word " * 200
    chat: list[dict[str, Any]] = [{"role": "user", "content": f"q{i} {long}"} for i in range(4)]
    chat += [
        {"role": "tool", "content": "a result", "tool_call_id": "c"},
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": [{"type": "text", "text": "last"}]},
    ]
    message, earlier = step_message(chat)
    assert message == "last"
    assert [e.split(" ")[0] for e in earlier] == ["q2", "q3"]
    assert all(len(e) <= 300 for e in earlier)
    assert step_message([{"role": "user", "content": "only"}]) == ("only", [])
    assert step_message([]) == ("", [])


BENCH = {  # names and first description lines as in benchmarks/local_tool_turns.py
    "get_weather": "Current weather for a city.",
    "get_stock_price": "The latest price of a stock.",
    "get_time": "The local time in a city.",
    "convert_currency": "Convert an amount of money between currencies.",
    "order_status": "Where a customer's order is.",
    "calculator": "Evaluate an arithmetic expression exactly.",
    "flight_status": "The status of a flight today.",
}
BENCH_SPECS = [
    {"type": "function", "function": {"name": n, "description": d}} for n, d in BENCH.items()
]


@pytest.mark.parametrize(
    ("message", "chosen", "kept"),
    [
        # the pick has no word of the message, and one other tool's name is used: it wins
        ("Convert 250 USD to EUR.", ["calculator"], ["convert_currency"]),
        ("I am converting 250 USD to EUR.", ["calculator"], ["convert_currency"]),
        # the pick shares a word (name or description): kept, whatever else is named
        ("Is flight LH 400 on time?", ["flight_status"], ["flight_status"]),
        ("What is 3 * 4? Use the calculator.", ["calculator"], ["calculator"]),
        ("The weather, and the time in Paris?", ["get_weather"], ["get_weather"]),
        # no word shared, but no tool named (or several): the model's pick stands
        ("Is it raining in Tokyo?", ["get_weather"], ["get_weather"]),
        ("Say hi.", ["get_weather"], ["get_weather"]),
        ("Order status or flight status?", ["calculator"], ["calculator"]),
        # generic name words ("get") name nothing; none chosen stays none
        ("Get me something.", ["calculator"], ["calculator"]),
        ("Convert this.", [], []),
        # a swap never duplicates a tool already chosen; two picks are weighed one by one
        ("Convert 5 USD.", ["calculator", "convert_currency"], ["calculator", "convert_currency"]),
        (
            "Convert 5 USD, and the time?",
            ["calculator", "convert_currency"],
            ["get_time", "convert_currency"],
        ),
    ],
)
def test_a_pick_the_message_has_no_word_of_gives_way_to_a_tool_it_names(
    message: str, chosen: list[str], kept: list[str]
) -> None:
    assert named_instead(message, chosen, BENCH_SPECS) == kept


async def test_the_loop_offers_the_named_tool_instead(server: FakeModelServer) -> None:
    server.script(says("get_weather"), says("done"))
    await run(server, "What is the status of order 7?")
    assert offered(server.requests[1].json) == ["order_status"]
