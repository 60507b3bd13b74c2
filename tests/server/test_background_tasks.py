"""Background tasks as users expect them (issue 29 item 4), through the running server.

The title is made once, on the first exchange, never over a user's title (given
at creation or by a rename, even one made while the task runs); when the task
model fails, or none is configured, the first message is the title. Prompts come
from the config file, a prompt file and the environment; each task may run on a
route of its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.patience import HANG
from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from tests.server.test_chats_api import new_chat, read_events, wait_saved
from tests.server.test_tasks_filters import TASK_ANSWERS, task_of
from toolrelay.config.settings import ModelRoute, TaskConfig, TasksConfig, load_settings
from toolrelay.engine.tasks import PROMPTS
from toolrelay.testing.fake_server import (
    FakeModelServer,
    RawReply,
    RecordedRequest,
    Reply,
    SSEReply,
)
from toolrelay.testing.wire import chat_chunks

Events = list[tuple[int, dict[str, Any]]]


def answering(titles: list[str]) -> Callable[[RecordedRequest], Reply]:
    """Each title request gets the next of `titles`; other tasks their JSON; turns say hi."""

    def reply(request: RecordedRequest) -> Reply:
        task = task_of(request)
        if task == "title":
            return SSEReply(chat_chunks(text=f'{{"title": "{titles.pop(0)}"}}'))
        if task is not None:
            return SSEReply(chat_chunks(text=TASK_ANSWERS[task]))
        return SSEReply(chat_chunks(text="Hello."))

    return reply


@pytest.fixture
def with_tasks(tmp_path: Path, upstream: FakeModelServer) -> Iterator[Running]:
    settings = make_settings(tmp_path, upstream, task_model="fake")
    with ServerThread(settings) as base_url:
        yield Running(base_url, upstream, settings)


def turn(client: httpx2.Client, chat_id: str, text: str, after: int) -> Events:
    """Post one message; the chat's events from `after` until the turn (tasks included) ends."""
    posted = client.post(f"/api/chats/{chat_id}/messages", json={"content": text})
    assert posted.status_code == 202, posted.text
    return read_events(client, chat_id, last=after)


def of_type(events: Events, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for _, e in events if e["type"] == kind]


def title_requests(server: FakeModelServer) -> list[RecordedRequest]:
    return [r for r in server.requests if task_of(r) == "title"]


def test_the_title_is_made_once_on_the_first_exchange(with_tasks: Running) -> None:
    with_tasks.upstream.set_default(answering(["First title", "Second title"]))
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        first = turn(client, chat_id, "Hello there", after=0)
        second = turn(client, chat_id, "And again", after=first[-1][0])
        chat = client.get(f"/api/chats/{chat_id}").json()
    assert of_type(first, "chat:title") == [{"title": "First title"}]
    assert of_type(second, "chat:title") == []
    assert len(title_requests(with_tasks.upstream)) == 1  # the task model was not asked again
    assert chat["title"] == "First title"
    # the other tasks still run on every turn
    assert of_type(second, "chat:message:follow_ups") and of_type(second, "chat:tags")


def test_a_rename_while_the_title_is_being_made_wins(with_tasks: Running) -> None:
    release = threading.Event()
    answers = answering([])

    def held(request: RecordedRequest) -> Reply:
        if task_of(request) == "title":
            text = '{"title": "Made by the model"}'
            return SSEReply(chat_chunks(text=text), holds={0: release})
        return answers(request)

    with_tasks.upstream.set_default(held)
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        client.post(f"/api/chats/{chat_id}/messages", json={"content": "Hello there"})
        deadline = time.monotonic() + HANG
        while not title_requests(with_tasks.upstream):  # the task runs, its answer held
            assert time.monotonic() < deadline, "the title task never started"
            time.sleep(0.02)
        renamed = client.patch(f"/api/chats/{chat_id}", json={"title": "Mine"})
        assert renamed.status_code == 200
        release.set()
        events = read_events(client, chat_id, last=0)
        chat = client.get(f"/api/chats/{chat_id}").json()
    assert of_type(events, "chat:title") == []
    assert chat["title"] == "Mine"
    assert of_type(events, "chat:tags")  # the other tasks went on


def test_a_failing_title_task_falls_back_to_the_first_message(with_tasks: Running) -> None:
    def failing(request: RecordedRequest) -> Reply:
        task = task_of(request)
        if task == "title":
            return RawReply(500, b'{"error": {"message": "overloaded"}}')
        if task is not None:
            return SSEReply(chat_chunks(text="no JSON here"))
        return SSEReply(chat_chunks(text="Hello."))

    with_tasks.upstream.set_default(failing)
    question = "  How do\nI   bake bread at home?  "
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        events = turn(client, chat_id, question, after=0)
        chat = client.get(f"/api/chats/{chat_id}").json()
    assert of_type(events, "chat:title") == [{"title": "How do I bake bread at home?"}]
    assert chat["title"] == "How do I bake bread at home?"
    assert of_type(events, "chat:tags") == []  # a task without an answer gives nothing


def test_an_answer_without_json_falls_back_too(with_tasks: Running) -> None:
    with_tasks.upstream.set_default(
        lambda r: SSEReply(chat_chunks(text="I would rather not." if task_of(r) else "Hi."))
    )
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        events = turn(client, chat_id, "What is a sourdough starter?", after=0)
    assert of_type(events, "chat:title") == [{"title": "What is a sourdough starter?"}]


def test_without_a_task_model_the_first_message_is_the_title(running: Running) -> None:
    running.upstream.set_default(SSEReply(chat_chunks(text="Hi.")))
    long = "word " * 40  # 200 characters: cut to 100 and marked
    with running.client() as client:
        chat_id = new_chat(client, model="fake")
        events = turn(client, chat_id, long, after=0)
        second = turn(client, chat_id, "other words", after=events[-1][0])
        chat = client.get(f"/api/chats/{chat_id}").json()
        named = new_chat(client, model="fake", title="Given")
        kept = turn(client, named, "not a title", after=0)
        given = client.get(f"/api/chats/{named}").json()
    expected = ("word " * 20).strip() + "…"
    assert of_type(events, "chat:title") == [{"title": expected}]
    assert of_type(second, "chat:title") == [] and chat["title"] == expected
    assert of_type(kept, "chat:title") == [] and given["title"] == "Given"
    assert [task_of(r) for r in running.upstream.requests] == [None, None, None]  # no task call


def test_each_task_runs_on_its_own_route(tmp_path: Path, upstream: FakeModelServer) -> None:
    with FakeModelServer() as small:
        routes = [
            ModelRoute(name="fake", base_url=upstream.base_url, model="fake-model"),
            ModelRoute(name="small", base_url=small.base_url, model="small-model"),
        ]
        tasks = TasksConfig(title=TaskConfig(model="small"))
        settings = make_settings(tmp_path, upstream, models=routes, task_model="fake", tasks=tasks)
        upstream.set_default(answering([]))
        small.set_default(answering(["From the small one"]))
        with (
            ServerThread(settings) as base_url,
            Running(base_url, upstream, settings).client() as c,
        ):
            chat_id = new_chat(c, model="fake")
            events = turn(c, chat_id, "Hello there", after=0)
    assert of_type(events, "chat:title") == [{"title": "From the small one"}]
    assert [task_of(r) for r in small.requests] == ["title"]
    assert [r.json["model"] for r in small.requests] == ["small-model"]
    assert sorted(str(task_of(r)) for r in upstream.requests) == ["None", "follow_ups", "tags"]


def test_prompts_from_a_file_and_the_environment(
    tmp_path: Path, upstream: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "title.txt").write_text('Name it like a pirate. JSON: {"title": "..."}\n')
    config = folder / "toolrelay.toml"
    config.write_text(
        f'data_dir = "{tmp_path / "data"}"\nadmin_key = "{ADMIN_KEY}"\ntask_model = "fake"\n'
        f'[[models]]\nname = "fake"\nbase_url = "{upstream.base_url}"\n'
        '[tasks.title]\nprompt_file = "title.txt"\n'
        '[tasks.tags]\nprompt = "From the file: tags as JSON"\n'
    )
    monkeypatch.setenv("TOOLRELAY_TASKS__TAGS__PROMPT", 'Env tags. JSON: {"tags": ["..."]}')
    monkeypatch.setenv("TOOLRELAY_TASKS__FOLLOW_UPS__ENABLED", "false")
    monkeypatch.chdir(tmp_path)  # the prompt file is found beside the config, not here
    settings = load_settings(config)
    prompts: dict[str, str] = {}

    def reply(request: RecordedRequest) -> Reply:
        system = request.json["messages"][0]
        if system["role"] == "system":
            prompts[str(len(prompts))] = system["content"]
            return SSEReply(chat_chunks(text='{"title": "Arr", "tags": ["sea"]}'))
        return SSEReply(chat_chunks(text="Hi."))

    upstream.set_default(reply)
    with ServerThread(settings) as base_url, Running(base_url, upstream, settings).client() as c:
        chat_id = new_chat(c, model="fake")
        events = turn(c, chat_id, "Hello", after=0)
    assert sorted(prompts.values()) == [
        'Env tags. JSON: {"tags": ["..."]}',  # the environment wins over the file
        'Name it like a pirate. JSON: {"title": "..."}',
    ]
    assert PROMPTS["follow_ups"] not in prompts.values()  # turned off
    assert of_type(events, "chat:title") == [{"title": "Arr"}]
    assert of_type(events, "chat:message:follow_ups") == []


def test_a_rename_after_the_title_is_kept_on_later_turns(with_tasks: Running) -> None:
    """A chat with an answer gets no new title: the rename stays, the model is not asked."""
    with_tasks.upstream.set_default(answering(["Only title", "Never"]))
    with with_tasks.client() as client:
        chat_id = new_chat(client, model="fake")
        first = turn(client, chat_id, "Hello there", after=0)
        client.patch(f"/api/chats/{chat_id}", json={"title": "Renamed later"})
        turn(client, chat_id, "More", after=first[-1][0])
        wait_saved(client, chat_id)
        chat = client.get(f"/api/chats/{chat_id}").json()
    assert chat["title"] == "Renamed later"
    assert len(title_requests(with_tasks.upstream)) == 1
