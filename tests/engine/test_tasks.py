"""Background tasks in the library: a model and prompt per task, the title once."""

from __future__ import annotations

from typing import Any

import pytest

from toolrelay import BackgroundTask, Relay
from toolrelay.core import events as ev
from toolrelay.engine.tasks import PROMPTS, fallback_title
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_task_with_its_own_model_and_prompt() -> None:
    small = ScriptedModel(reply('{"title": "From small"}'))
    shared = ScriptedModel(reply('{"tags": ["a"]}'))
    title = BackgroundTask("title", model=small, prompt='Title it. {"title": "..."}')
    relay = Relay(ScriptedModel(reply("Hi.")), task_model=shared, tasks=[title, "tags"])
    result = await relay.run("hello")
    assert (result.title, result.tags) == ("From small", ("a",))
    assert small.requests[0].messages[0] == {
        "role": "system",
        "content": 'Title it. {"title": "..."}',
    }
    assert shared.requests[0].messages[0]["content"] == PROMPTS["tags"]


async def test_a_conversation_gets_its_title_on_the_first_turn_only() -> None:
    titles = ScriptedModel(reply('{"title": "One"}'), reply('{"title": "Two"}'))
    relay = Relay(
        ScriptedModel(reply("Hi."), reply("Again.")), tasks=[BackgroundTask("title", titles)]
    )
    chat = relay.chat()
    sink = ListSink()
    first = await chat.run("hello", sink=sink)
    second = await chat.run("more", sink=sink)
    assert (first.title, second.title) == ("One", None)
    assert len(titles.requests) == 1
    assert [e.data for e in sink.events if e.type == ev.CHAT_TITLE] == [{"title": "One"}]


async def test_without_a_task_model_or_a_saved_chat_nothing_runs() -> None:
    sink = ListSink()
    result = await Relay(ScriptedModel(reply("Hi."))).run("hello", sink=sink)
    assert result.title is None
    assert sink.events[-1].type == ev.CHAT_COMPLETION  # no task event after the answer


def test_the_fallback_title_is_the_first_user_message_on_one_line() -> None:
    parts = [{"type": "text", "text": "Look\nat  this"}, {"type": "image_url", "image_url": {}}]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": parts},
    ]
    assert fallback_title(messages) == "Look at this"
    assert fallback_title([{"role": "user", "content": "x" * 150}]) == "x" * 100 + "…"
    assert fallback_title([{"role": "system", "content": "only"}]) is None


def test_unknown_tasks_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown background task 'summary'"):
        BackgroundTask("summary")  # type: ignore[arg-type]
