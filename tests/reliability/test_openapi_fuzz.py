"""schemathesis against the server's own OpenAPI schema: no 5xx, no response off the schema.

Every operation is called with generated requests over a real socket, once
with the admin key and once with another user's key (whose chats and keys
are not theirs to see). A small budget runs in `make test`; `FUZZ_EXAMPLES`
raises it (`make fuzz`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.server.conftest import ADMIN_KEY, Running, ServerThread, make_settings
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import chat_chunks

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, str]]:
    """The server with a chat owned by the admin, and a second user's key."""
    with FakeModelServer() as upstream:
        upstream.set_default(SSEReply(chat_chunks(text="ok")))
        settings_ = make_settings(tmp_path_factory.mktemp("fuzz"), upstream)
        with ServerThread(settings_) as base_url:
            running = Running(base_url, upstream, settings_)
            with running.client() as client:
                client.post("/api/chats", json={"model": "fake"}).raise_for_status()
                other = client.post("/api/admin/keys", json={"user": "other"}).json()["key"]
            yield running, other


def _operations(base_url: str) -> list[Any]:
    raw = httpx2.get(base_url + "/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(raw)
    return [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]


@pytest.mark.parametrize("who", ["admin", "other user"])
def test_no_operation_answers_5xx_or_off_schema(fuzzed: tuple[Running, str], who: str) -> None:
    running, other = fuzzed
    key = ADMIN_KEY if who == "admin" else other
    headers = {"Authorization": f"Bearer {key}"}
    checks = [not_a_server_error, response_schema_conformance]
    for operation in _operations(running.base_url):

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def call(case: Any) -> None:
            response = case.call(base_url=running.base_url, headers=headers, timeout=30)
            case.validate_response(response, checks=checks)

        call()
