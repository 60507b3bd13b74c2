"""Issue 8 in the loop: what goes back to the model and the client after tools run."""

from __future__ import annotations

import asyncio

import pytest

from toolrelay import Relay, tool
from toolrelay.core import events as ev
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


async def test_a_failing_fetch_url_is_not_cited() -> None:
    @tool
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        raise ConnectionError("connection refused")

    model = ScriptedModel(
        reply(calls=[("fetch_url", {"url": "https://example.org"})]), reply("It is down.")
    )
    sink = ListSink()
    result = await Relay(model, [fetch_url]).run("read example.org", sink=sink)
    assert result.output[1]["output"] == "Error: connection refused"
    assert sink.of(ev.SOURCE) == []
    assert "https://example.org" not in str(model.requests[1].messages)


async def test_a_fetch_url_that_answers_with_an_error_text_is_not_cited() -> None:
    @tool
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        return "Error: HTTP 404"

    model = ScriptedModel(
        reply(calls=[("fetch_url", {"url": "https://example.org/x"})]), reply("Not found.")
    )
    sink = ListSink()
    await Relay(model, [fetch_url]).run("read it", sink=sink)
    assert sink.of(ev.SOURCE) == []


async def test_a_rejected_fetch_url_is_not_cited() -> None:
    @tool(requires_approval=True)
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        raise AssertionError("must not run")

    model = ScriptedModel(
        reply(calls=[("fetch_url", {"url": "https://example.org"})]), reply("Fine.")
    )
    relay = Relay(model, [fetch_url])
    sink = ListSink()

    async def reject() -> None:
        relay.approve((await sink.wait_for(ev.TOOL_APPROVAL)).data["id"], False)

    helper = asyncio.create_task(reject())
    result = await relay.run("read example.org", sink=sink)
    await helper
    assert result.output[1]["output"].startswith("The user rejected the call")
    assert sink.of(ev.SOURCE) == []


async def test_a_successful_fetch_url_is_cited() -> None:
    @tool
    def fetch_url(url: str) -> str:
        """Fetch a page."""
        return "Example Domain. This domain is for examples."

    model = ScriptedModel(
        reply(calls=[("fetch_url", {"url": "https://example.org"})]), reply("It says hi.")
    )
    sink = ListSink()
    await Relay(model, [fetch_url]).run("read example.org", sink=sink)
    (source,) = sink.of(ev.SOURCE)
    assert source.data["document"] == ["Example Domain. This domain is for examples."]
