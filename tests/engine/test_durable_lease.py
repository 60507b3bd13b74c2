"""One process at a time runs a chat's durable turn (issue 26): `Relay.run(...,
durable=True)` and `Relay.resume` take the run's lease in the store, and another
process gets `RunHeld` while it is live; a process killed with SIGKILL leaves a lease
that runs out, after which the turn resumes elsewhere. Real processes, on a real SQLite
file and PostgreSQL (`engine.durable_runs`)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.adapters.stores.conftest import postgres_database
from tests.patience import HANG
from toolrelay import Relay, RunHeld, tool
from toolrelay.adapters.stores.sql import SQLStore
from toolrelay.core.items import is_call_output, raw_items
from toolrelay.testing.scripted_model import ScriptedModel, reply

pytestmark = pytest.mark.anyio

LEASE_S = 3.0
"""Short, so a killed holder's lease runs out soon; renewed every second by a live one."""

HOLDER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from toolrelay import Relay, tool
    from toolrelay.adapters.stores.sql import SQLStore
    from toolrelay.testing.scripted_model import ScriptedModel, reply

    url, chat_id, marks, lease = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]

    @tool
    def charge(amount: int) -> str:
        \"\"\"Charge a card (not idempotent).\"\"\"
        (marks / "charged").write_text(str(amount))
        time.sleep(3600)  # killed here
        return "charged"

    async def main() -> None:
        store = await SQLStore.open(url)
        relay = Relay(ScriptedModel(reply(calls=[("charge", {"amount": 7})])), [charge], store=store)
        relay.run_lease_s = float(lease)
        await relay.run("charge me", chat_id=chat_id, durable=True)

    asyncio.run(main())
    """
)

SECOND = textwrap.dedent(
    """
    import asyncio, sys
    from toolrelay import Relay, RunHeld, tool
    from toolrelay.adapters.stores.sql import SQLStore
    from toolrelay.testing.scripted_model import ScriptedModel, reply

    url, chat_id = sys.argv[1], sys.argv[2]

    @tool
    def charge(amount: int) -> str:
        \"\"\"Charge a card (not idempotent).\"\"\"
        print("charged again", flush=True)
        return "charged"

    async def main() -> None:
        store = await SQLStore.open(url)
        relay = Relay(ScriptedModel(reply("resumed"), reply("ran")), [charge], store=store)
        for attempt in (relay.resume(chat_id), relay.run("again", chat_id=chat_id, durable=True)):
            try:
                result = await attempt
                print("went on:", result.status, flush=True)
            except RunHeld as exc:
                print("held:", exc, flush=True)
        await store.close()

    asyncio.run(main())
    """
)


@pytest.fixture(params=["sqlite", "postgres"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}"
    else:
        async with postgres_database() as found:
            yield found


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _wait(check: object, what: str) -> None:
    deadline = time.monotonic() + HANG
    while not await check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_a_second_process_is_refused_until_the_holders_lease_runs_out(
    url: str, tmp_path: Path
) -> None:
    store = await SQLStore.open(url)
    try:
        chat_id = (await store.create_chat((await store.create_user("lib")).id)).id
        marks = tmp_path / "marks"
        marks.mkdir()
        args = (url, chat_id, str(marks), str(LEASE_S))
        holder = await asyncio.create_subprocess_exec(
            sys.executable, "-c", HOLDER, *args, env=dict(os.environ)
        )
        try:

            async def charging() -> bool:
                assert holder.returncode is None, "the holder ended"
                return (marks / "charged").exists()

            await _wait(charging, "the holder's tool never ran")
            [run] = await store.list_runs(chat_id=chat_id)
            first = run.lease_until
            assert first is not None

            async def renewed_past_first() -> bool:  # the holder outlived its first lease
                [now] = await store.list_runs(chat_id=chat_id)
                return bool(now.lease_until and now.lease_until > first) and (
                    time.time() > first.timestamp()
                )

            await _wait(renewed_past_first, "the holder's lease was not renewed")
            second = await asyncio.create_subprocess_exec(
                sys.executable, "-c", SECOND, url, chat_id, env=dict(os.environ),
                stdout=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, _ = await asyncio.wait_for(second.communicate(), HANG)
            lines = out.decode().splitlines()
            assert [line.split(":")[0] for line in lines] == ["held", "held"], lines
        finally:
            holder.send_signal(signal.SIGKILL)
            await holder.wait()

        @tool
        def charge(amount: int) -> str:
            """Charge a card (not idempotent)."""
            raise AssertionError("a call that may have taken effect is not run again")

        relay = Relay(ScriptedModel(reply("Check first.")), [charge], store=store)
        relay.run_lease_s = LEASE_S
        refused = 0

        async def resumed() -> bool:  # refused until the dead holder's lease runs out
            nonlocal refused
            try:
                result = await relay.resume(chat_id)
            except RunHeld:
                refused += 1
                return False
            assert result.status == "completed"
            (output,) = [i["output"] for i in raw_items(result.output) if is_call_output(i)]
            assert "may or may not have taken effect" in str(output)
            return True

        await _wait(resumed, "the dead holder's lease never ran out")
        assert await store.list_runs(chat_id=chat_id) == []
    finally:
        await store.close()


async def test_an_ended_or_cancelled_turn_lets_its_lease_go(tmp_path: Path) -> None:
    """Another process may start the chat's next durable turn at once."""
    store = await SQLStore.open(f"sqlite+aiosqlite:///{tmp_path / 'chats.db'}")
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never answers."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    try:
        chat_id = (await store.create_chat((await store.create_user("lib")).id)).id
        relay = Relay(ScriptedModel(reply("done")), [wait_forever], store=store)
        assert (await relay.run("hi", chat_id=chat_id, durable=True)).status == "completed"
        assert await store.start_run(chat_id, "msg_x", owner="other", request={}, lease=60)
        await store.end_run("msg_x")
        relay = Relay(
            ScriptedModel(reply(calls=[("wait_forever", {})])), [wait_forever], store=store
        )
        turn = asyncio.create_task(relay.run("hi", chat_id=chat_id, durable=True))
        await asyncio.wait_for(started.wait(), HANG)
        held = await store.start_run(chat_id, "msg_y", owner="other", request={}, lease=60)
        assert not held  # while it runs
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        assert await store.start_run(chat_id, "msg_y", owner="other", request={}, lease=60)
    finally:
        await store.close()
