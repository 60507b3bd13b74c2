"""A background task on the embedded model while the turns run on another route.

The embedded model (`local`) is real (llama.cpp, the `[local]` extra; one per test
process, shared with tests/adapters/local); the turn's route is the fake model
server. The title prompt asks the small model to copy a JSON answer, with greedy
decoding, so the title shows that the embedded model made it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.embedded import Embedded
from tests.server.conftest import Running, ServerThread, make_settings
from tests.server.test_background_tasks import of_type, turn
from tests.server.test_chats_api import new_chat
from tests.server.test_tasks_filters import task_of
from toolrelay.config.settings import ModelRoute, TaskConfig, TasksConfig
from toolrelay.testing.fake_server import FakeModelServer, RecordedRequest, Reply, SSEReply
from toolrelay.testing.wire import chat_chunks

pytestmark = pytest.mark.local_model

COPY_ME = 'Reply with exactly this JSON and nothing else: {"title": "Sea shanties"}'


def test_the_title_task_runs_on_the_embedded_model(
    tmp_path: Path,
    upstream: FakeModelServer,
    embedded: Embedded,
) -> None:
    local = next(r for r in embedded.settings.models if r.name == "local")
    greedy = {**local.params, "temperature": 0, "seed": 7, "max_tokens": 32}
    routes = [
        ModelRoute(name="fake", base_url=upstream.base_url, model="fake-model"),
        local.model_copy(update={"params": greedy}),
    ]
    tasks = TasksConfig(title=TaskConfig(model="local", prompt=COPY_ME))
    settings = make_settings(tmp_path, upstream, models=routes, task_model="fake", tasks=tasks)

    def reply(request: RecordedRequest) -> Reply:
        task = task_of(request)
        return SSEReply(chat_chunks(text="{}" if task else "Yo ho."))

    upstream.set_default(reply)
    with ServerThread(settings) as base_url, Running(base_url, upstream, settings).client() as c:
        c.timeout = 120  # the embedded model answers on a busy CPU
        chat_id = new_chat(c, model="fake")
        events = turn(c, chat_id, "Sing me a song of the sea", after=0)
        chat = c.get(f"/api/chats/{chat_id}").json()
    assert of_type(events, "chat:title") == [{"title": "Sea shanties"}]
    assert chat["title"] == "Sea shanties"
    assert sorted(str(task_of(r)) for r in upstream.requests) == ["None", "follow_ups", "tags"]
