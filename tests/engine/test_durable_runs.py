"""A library turn outlives its process: `Relay.run(..., durable=True)` records it in a
real SQLite store, and `Relay.resume(chat_id)` goes on with it from a fresh `Relay`
(issue 26 item 2): paused for an approval, or cut by a process killed with SIGKILL
while a tool ran (`engine.durable_runs`)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.patience import HANG
from toolrelay import Relay, tool
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.core import events as ev
from toolrelay.core.items import is_call_output, raw_items
from toolrelay.engine.checkpoint import TurnPaused
from toolrelay.engine.durable_runs import NoRunToResume, RunHeld
from toolrelay.engine.finish import RunResult
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio

wired: list[int] = []


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Wire money (asks first)."""
    wired.append(amount)
    return f"wired {amount}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _chat(url: str) -> str:
    store = await SQLStore.open(url)
    try:
        user = await store.create_user("library")
        return (await store.create_chat(user.id)).id
    finally:
        await store.close()


async def test_a_paused_turn_is_answered_and_resumed_by_a_fresh_relay(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
    chat_id = await _chat(url)
    wired.clear()
    store = await SQLStore.open(url)
    sink = ListSink()
    relay = Relay(ScriptedModel(reply(calls=[("wire", {"amount": 5})])), [wire], store=store)
    with pytest.raises(TurnPaused) as paused:
        await relay.run("pay", chat_id=chat_id, durable=True, pause=True, sink=sink)
    (call_id,) = paused.value.waiting
    assert [e.data["id"] for e in sink.events if e.type == ev.TOOL_APPROVAL] == [call_id]
    assert [r.status for r in await store.list_runs(chat_id=chat_id)] == ["paused"]
    await store.close()  # the process that ran it is gone; nothing of it is in memory

    store = await SQLStore.open(url)
    try:
        relay = Relay(ScriptedModel(reply("Paid.")), [wire], store=store)
        relay.approve(call_id)
        result = await relay.resume(chat_id)
        assert result.text == "Paid." and result.status == "completed"
        assert wired == [5]
        outputs = [i["output"] for i in raw_items(result.output) if is_call_output(i)]
        assert outputs == ["wired 5"]
        assert await store.list_runs(chat_id=chat_id) == []  # ended: nothing to resume
        saved = (await store.get_messages(chat_id))[-1]
        assert saved.status == "completed" and saved.content == "Paid."
        with pytest.raises(NoRunToResume):
            await relay.resume(chat_id)
    finally:
        await store.close()


async def test_a_paused_turn_resumed_without_its_answer_asks_again(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
    chat_id = await _chat(url)
    store = await SQLStore.open(url)
    try:
        relay = Relay(ScriptedModel(reply(calls=[("wire", {"amount": 1})])), [wire], store=store)
        with pytest.raises(TurnPaused) as first:
            await relay.run("pay", chat_id=chat_id, durable=True, pause=True)
        sink = ListSink()
        relay = Relay(ScriptedModel(), [wire], store=store)
        with pytest.raises(TurnPaused) as again:
            await relay.resume(chat_id, sink=sink)
        assert again.value.waiting == first.value.waiting
        assert [e.type for e in sink.events].count(ev.TOOL_APPROVAL) == 1
        assert [r.status for r in await store.list_runs(chat_id=chat_id)] == ["paused"]
    finally:
        await store.close()


CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from toolrelay import Relay, tool
    from toolrelay.adapters.stores.sql import SQLStore
    from toolrelay.testing.scripted_model import ScriptedModel, reply

    url, chat_id, marks = sys.argv[1], sys.argv[2], Path(sys.argv[3])

    @tool
    def charge(amount: int) -> str:
        \"\"\"Charge a card (not idempotent).\"\"\"
        (marks / "charged").write_text(str(amount))
        time.sleep(3600)  # killed here
        return "charged"

    async def main() -> None:
        store = await SQLStore.open(url)
        model = ScriptedModel(reply(calls=[("charge", {"amount": 7})]))
        relay = Relay(model, [charge], store=store)
        relay.run_lease_s = 1.0  # its lease runs out a second after it is killed
        await relay.run("charge me", chat_id=chat_id, durable=True)

    asyncio.run(main())
    """
)


async def test_a_turn_cut_by_sigkill_is_resumed_in_a_new_process(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
    chat_id = await _chat(url)
    marks = tmp_path / "marks"
    marks.mkdir()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, url, chat_id, str(marks), env=dict(os.environ)
    )
    try:
        deadline = time.monotonic() + HANG
        while not (marks / "charged").exists():  # the tool runs: its call is checkpointed
            ended = child.returncode is not None
            assert not ended and time.monotonic() < deadline, "the tool never ran"
            await asyncio.sleep(0.02)
    finally:
        child.send_signal(signal.SIGKILL)
        await child.wait()

    @tool
    def charge(amount: int) -> str:
        """Charge a card (not idempotent)."""
        raise AssertionError("a call that may have taken effect is not run again")

    store = await SQLStore.open(url)
    try:
        assert [r.status for r in await store.list_runs(chat_id=chat_id)] == ["running"]
        model = ScriptedModel(reply("It may not have gone through; check first."))
        relay = Relay(model, [charge], store=store)
        deadline = time.monotonic() + HANG
        while True:  # the dead process's lease runs out (`test_durable_lease`)
            try:
                result: RunResult = await relay.resume(chat_id)
                break
            except RunHeld:
                assert time.monotonic() < deadline, "the dead process's lease never ran out"
                await asyncio.sleep(0.05)
        assert result.status == "completed"
        (output,) = [i["output"] for i in raw_items(result.output) if is_call_output(i)]
        assert "may or may not have taken effect" in str(output)
        assert "may or may not have taken effect" in str(model.requests[-1].output)
        assert await store.list_runs(chat_id=chat_id) == []
    finally:
        await store.close()
