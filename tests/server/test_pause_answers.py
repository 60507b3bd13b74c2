"""An answer that reaches a turn as it pauses is never lost (issue 26 item 2).

A chat turn whose client-side tool call waits for its result saves itself
`paused` and stops, and its control listener on the bus stops with it. An
answer sent in that moment (the web page answers `browser_time` at once) is
handed by the bus to a listener that may stop before it acts on it: the answer
was lost with a 202 and the turn stayed paused for good. `TurnManager.answer`
now watches the run until the answer shows in its saved state, and takes the
turn on with it when the turn paused without it. Here the listener that gets
the answer never acts (as a stopped one), and the run then pauses: the turn
must still be taken on and end with the answer. A late duplicate is a 409
(`False`): nobody waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.patience import HANG
from tests.server.conftest import make_settings
from toolrelay.adapters.events import Envelope, EventBus, make_bus
from toolrelay.adapters.stores.memory import MemoryStore
from toolrelay.config.registry import build_registry
from toolrelay.core.events import DELTA_EVENTS
from toolrelay.core.items import function_call_item
from toolrelay.engine.checkpoint import TurnState
from toolrelay.server.client_tools import ClientTool
from toolrelay.server.durability import channel, repair_orphans
from toolrelay.server.resume import run_request
from toolrelay.server.turns import TurnBusy, TurnManager
from toolrelay.testing.fake_server import FakeModelServer, SSEReply
from toolrelay.testing.wire import ToolCallSpec, chat_chunks

pytestmark = pytest.mark.anyio

CHAT = "/v1/chat/completions"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def manager(tmp_path: Path, upstream: FakeModelServer) -> AsyncIterator[TurnManager]:
    registry = build_registry(make_settings(tmp_path, upstream))
    turns = TurnManager(MemoryStore(), make_bus(None), registry)
    try:
        yield turns
    finally:
        await turns.aclose()
        await registry.aclose()


async def _waiting_turn(turns: TurnManager) -> tuple[str, str]:
    """A chat whose turn called the client tool `get_location` (`call_1`) and waits for
    its result, as its runner checkpointed it just before pausing."""
    store = turns.store
    user = await store.create_user("u")
    chat_id = (await store.create_chat(user.id)).id
    await store.add_message(chat_id, {"role": "user", "content": "where?"})
    message_id = "msg_waiting"
    await store.save_turn(chat_id, message_id, {"output": [], "status": "in_progress"})
    tool = ClientTool("get_location", "Where the user is.", {"type": "object"})
    history = await store.load_messages(chat_id)
    request = run_request("fake", {"id": user.id}, history, [tool], None)
    await store.start_run(chat_id, message_id, owner="runner", request=request)
    state = TurnState(
        output=[function_call_item("call_1", "get_location", "{}", status="completed")],
        waiting={"call_1": "tool"},
    )
    await store.save_run_state(message_id, state.to_json())
    return chat_id, message_id


async def _deaf_listener(bus: EventBus, chat_id: str, heard: asyncio.Event) -> None:
    """The runner's control listener, stopped before it acts on what it got."""
    async for _ in bus.control(channel(chat_id)):
        heard.set()
        await asyncio.Event().wait()  # cancelled with its turn, the answer unread


async def test_an_answer_the_pausing_turn_never_read_is_not_lost(
    manager: TurnManager, upstream: FakeModelServer
) -> None:
    upstream.route(CHAT, SSEReply(chat_chunks(text="You are in Paris.")))
    chat_id, message_id = await _waiting_turn(manager)
    heard = asyncio.Event()
    listener = asyncio.ensure_future(_deaf_listener(manager.bus, chat_id, heard))
    await asyncio.sleep(0)  # the listener has subscribed
    message = {"op": "tool_result", "id": "call_1", "result": "Paris"}
    answering = asyncio.ensure_future(manager.answer(chat_id, message))
    async with asyncio.timeout(HANG):
        await heard.wait()  # the bus gave it to the runner's listener ...
    listener.cancel()  # ... which stopped with its turn, unread
    await manager.store.pause_run(message_id)  # the turn paused without it
    async with asyncio.timeout(HANG):
        assert await answering is True
        await manager.wait(chat_id)
    (saved,) = [m for m in await manager.store.get_messages(chat_id) if m.id == message_id]
    assert saved.status == "completed" and saved.content == "You are in Paris."
    assert [i.get("output") for i in saved.output if i["type"] == "function_call_output"] == [
        "Paris"
    ]
    assert await manager.answer(chat_id, message) is False  # nobody waits for it now


async def _until_paused(turns: TurnManager, chat_id: str) -> None:
    """Until the turn is saved `paused` and has let go of the chat (no task, no lease)."""
    async with asyncio.timeout(HANG):
        while True:
            runs = await turns.store.list_runs(chat_id=chat_id)
            if (
                runs
                and runs[0].status == "paused"
                and chat_id not in turns.tasks
                and not await turns.bus.turn_running(channel(chat_id))
            ):
                return
            await asyncio.sleep(0.01)


async def _read(bus: EventBus, name: str, after: int, into: list[Envelope]) -> None:
    async for envelope in bus.subscribe(name, after=after):
        into.append(envelope)


async def test_a_paused_turn_stays_one_turn_on_the_bus_until_its_answer_ends_it(
    manager: TurnManager, upstream: FakeModelServer
) -> None:
    """Its stream is not cut at the pause, nor by a post that meets it paused or a
    restart's repair; the answer goes on with the same bus turn, so a replay from the
    turn's start has the part before the pause (docs/events.md)."""
    upstream.route(
        CHAT,
        SSEReply(chat_chunks(tool_calls=[ToolCallSpec("get_location", {}, id="call_1")])),
        SSEReply(chat_chunks(text=["You are ", "in Paris."])),
    )
    store, bus = manager.store, manager.bus
    user = await store.create_user("u")
    chat_id = (await store.create_chat(user.id)).id
    name = channel(chat_id)
    tool = ClientTool("get_location", "Where the user is.", {"type": "object"})
    ask = {"role": "user", "content": "where?"}
    await manager.start(chat_id, ask, route="fake", user={"id": user.id}, client_tools=[tool])
    start = await bus.turn_start(name)
    seen: list[Envelope] = []
    reader = asyncio.ensure_future(_read(bus, name, start, seen))
    try:
        await _until_paused(manager, chat_id)
        again = {"role": "user", "content": "and now?"}
        with pytest.raises(TurnBusy):  # it takes the lease a moment, then gives it back paused
            await manager.start(chat_id, again, route="fake", user={"id": user.id})
        assert await repair_orphans(store, bus, manager.durability) == 0  # a restart's repair
        assert await bus.turn_start(name) == start
        assert not reader.done()  # the stream waits for the turn's continuation
        answer = {"op": "tool_result", "id": "call_1", "result": "Paris"}
        async with asyncio.timeout(HANG):
            assert await manager.answer(chat_id, answer) is True
            await manager.wait(chat_id)
            await reader
    finally:
        reader.cancel()
    types = [e.event.type for e in seen]
    assert types.index("execute:tool") < types.index("chat:completion")
    assert [e.seq for e in seen] == sorted({e.seq for e in seen})
    assert await bus.turn_start(name) == start
    replay = [e async for e in bus.subscribe(name, after=start)]
    assert replay == [e for e in seen if e.event.type not in DELTA_EVENTS]
    (saved,) = [m for m in await store.get_messages(chat_id) if m.role == "assistant"]
    assert saved.status == "completed" and saved.content == "You are in Paris."
