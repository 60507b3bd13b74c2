"""Open WebUI tool and filter files, loaded unchanged (see owui_files/)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolrelay import Relay
from toolrelay.adapters.tools.owui import (
    OpenWebUIFilter,
    OpenWebUITools,
    front_matter,
    load_filters,
)
from toolrelay.core import events as ev
from toolrelay.core.items import is_call_output, output_text
from toolrelay.engine.interfaces import ToolContext
from toolrelay.errors import ConfigError
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio

FILES = Path(__file__).with_name("owui_files")


def events_into(store: list[dict[str, Any]]) -> Any:
    async def emit(event: dict[str, Any]) -> None:
        store.append(event)

    return emit


def test_front_matter_and_specs() -> None:
    weather = OpenWebUITools(FILES / "weather_tool.py")
    assert weather.name == "Weather Lookup"
    assert weather.host.meta["version"] == "0.2.1"
    assert (
        front_matter((FILES / "web_notes_tool.py").read_text().split('"""')[1])["requirements"]
        == ""
    )
    (spec,) = [t.spec for t in weather.tools]
    assert spec.name == "get_weather"
    assert spec.description == "Get the current weather for a city."
    assert spec.parameters["properties"]["city"]["description"] == 'The city name, e.g. "Oslo".'
    assert "__user__" not in spec.parameters["properties"]


async def test_valves_user_valves_and_status_events() -> None:
    weather = OpenWebUITools(
        FILES / "weather_tool.py", valves={"units": "imperial", "api_key": "k"}
    )
    weather.set_user_valves("u1", {"city_alias": "home"})
    seen: list[dict[str, Any]] = []
    context = ToolContext(user={"id": "u1", "name": "Ada"}, event_emitter=events_into(seen))
    got = await weather.call("get_weather", {"city": "Oslo"}, context)
    assert got == "Oslo (home): sunny, 70°F, key=set"
    assert [e["type"] for e in seen] == ["status", "status"]
    assert seen[1]["data"] == {"description": "Done", "done": True}
    other = ToolContext(user={"id": "u2"})
    assert (
        await weather.call("get_weather", {"city": "Oslo"}, other) == "Oslo: sunny, 70°F, key=set"
    )
    with pytest.raises(ConfigError, match="UserValves"):
        weather.set_user_valves("u3", {"city_alias": ["not", "a", "string"]})
    with pytest.raises(ConfigError, match="Valves"):
        OpenWebUITools(FILES / "weather_tool.py", valves={"units": {"no": 1}})


async def test_citations_messages_metadata_and_self_citation_through_the_loop() -> None:
    notes = OpenWebUITools(FILES / "web_notes_tool.py")
    model = ScriptedModel(
        reply(calls=[("cite_page", {"url": "https://example.org"}), ("save_note", {"text": "hi"})]),
        reply("ok"),
    )
    sink = ListSink()
    async with Relay(model, [notes]) as relay:
        result = await relay.run("go", sink=sink, chat_id="chat_1", metadata={"chat_id": "chat_1"})
    sources = [e.data for e in sink.events if e.type == ev.SOURCE]
    # the file's own citation, then one per result because the file sets self.citation = True
    assert sources[0]["source"] == {"name": "https://example.org", "url": "https://example.org"}
    assert {s["source"]["name"] for s in sources[1:]} == {
        "TOOL:web_notes_tool/cite_page",
        "TOOL:web_notes_tool/save_note",
    }
    # the tool's `message` is text of the turn: a delta live, a message item saved
    assert [e.data["delta"] for e in sink.events if e.type == ev.OUTPUT_TEXT_DELTA][0] == (
        "Read https://example.org\n"
    )
    written = [i for i in result.output if i["type"] == "message"][0]
    assert output_text([written]) == "Read https://example.org\n"
    saved = [i for i in result.output if is_call_output(i)][1]["output"]
    assert saved == '{"saved": "hi", "chat": "chat_1", "tool": "web_notes_tool"}'


async def test_reserved_parameters_event_call_and_notifications() -> None:
    info = OpenWebUITools(FILES / "user_info_tool.py", valves={"greeting": "Hi"})
    seen: list[dict[str, Any]] = []

    async def event_call(event: dict[str, Any]) -> Any:
        seen.append(event)
        return True

    context = ToolContext(
        user={"id": "u", "name": "Ada", "email": "ada@example.org"},
        files=[{"id": "f1"}],
        event_call=event_call,
        event_emitter=events_into(seen),
    )
    who = await info.call("whoami", {}, context)
    assert who == "Hi, Ada <ada@example.org>; files=1; oauth=None; request=None"
    assert await info.call("confirm", {"question": "Sure?"}, context) == "confirmed"
    assert await info.call("notify", {"text": "done"}, context) == "shown"
    assert seen[0]["type"] == "confirmation" and seen[0]["data"]["message"] == "Sure?"
    assert seen[1] == {"type": "notification", "data": {"type": "info", "content": "done"}}


async def test_filters_run_in_priority_order_with_toggles_and_user_valves() -> None:
    filters = load_filters([FILES / "word_limit_filter.py", FILES / "prefix_toggle_filter.py"])
    assert [f.id for f in filters] == ["prefix_toggle_filter", "word_limit_filter"]  # 1 before 5
    limit = filters[1]
    limit.set_user_valves("u1", {"shout": True})
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "one two three"}]}
    user = {"id": "u1"}
    for f in filters:
        body = await f.inlet(body, user)
    assert body["messages"] == [{"role": "user", "content": "ONE TWO THREE"}]  # toggle off
    body = {
        "messages": [{"role": "user", "content": "a b"}],
        "filter_ids": ["prefix_toggle_filter"],
    }
    for f in filters:
        body = await f.inlet(body, None)
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    chunk = {"choices": [{"delta": {"content": "darn it"}}]}
    assert (await limit.stream(chunk))["choices"][0]["delta"]["content"] == "d**n it"
    out = await limit.outlet({"messages": [{"role": "assistant", "content": "fine "}]}, None)
    assert out["messages"][0]["content"] == "fine [checked]"


async def test_filters_plug_into_relay_inlets_and_outlets() -> None:
    limit = OpenWebUIFilter(FILES / "word_limit_filter.py", valves={"max_words": 2})
    model = ScriptedModel(reply("answer"))
    async with Relay(model, [], filters=[limit], tasks=()) as relay:
        await relay.run("one two three four")
    assert model.requests[0].messages[-1] == {"role": "user", "content": "one two"}


def test_a_file_without_the_class_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="class Filter"):
        OpenWebUIFilter(FILES / "weather_tool.py")


async def test_stream_filters_change_each_chunk_the_model_sends() -> None:
    from toolrelay.adapters.tools.owui import StreamFiltered

    limit = OpenWebUIFilter(FILES / "word_limit_filter.py")
    model = ScriptedModel(reply(["oh ", "darn ", "it"]))
    async with Relay(StreamFiltered(model, [limit]), tasks=()) as relay:
        result = await relay.run("hi")
    assert result.text == "oh d**n it"
