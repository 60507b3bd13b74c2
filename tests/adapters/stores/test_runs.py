"""`turn_runs`: turns not ended, their request and last checkpoint (durable turns)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from toolrelay.adapters.stores import NotFoundError, Store

from .conftest import FakeClock

pytestmark = pytest.mark.anyio

REQUEST = {"route": "m", "user": {"id": "u"}, "history": [{"role": "user", "content": "hi"}]}


async def test_a_run_is_started_checkpointed_claimed_and_ended(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    await store.start_run(chat.id, "msg_a", owner="host:1:0", request=REQUEST)
    [run] = await store.list_runs()
    assert (run.chat_id, run.owner, run.status, run.resumes) == (chat.id, "host:1:0", "running", 0)
    assert run.request == REQUEST and run.state is None
    assert await store.save_run_state("msg_a", {"v": 1, "output": ["\u00e9"]}) is True
    assert await store.save_run_state("msg_missing", {"v": 1}) is False
    claimed = await store.claim_run("msg_a", owner="host:1:1")
    assert claimed is not None
    assert (claimed.owner, claimed.resumes) == ("host:1:1", 1)
    assert claimed.state == {"v": 1, "output": ["\u00e9"]}
    assert [r.message_id for r in await store.list_runs(owner="host:1:1")] == ["msg_a"]
    assert await store.list_runs(owner="host:1:0") == []
    assert [r.message_id for r in await store.list_runs(chat_id=chat.id)] == ["msg_a"]
    assert await store.pause_run("msg_a") is True
    [paused] = await store.list_runs()
    assert paused.status == "paused"
    answered = await store.claim_run("msg_a", owner="host:1:1", resumed=False)
    assert answered is not None and (answered.status, answered.resumes) == ("running", 1)
    await store.end_run("msg_a")
    await store.end_run("msg_a")  # twice: nothing
    assert await store.pause_run("msg_a") is False
    assert await store.list_runs() == []
    assert await store.claim_run("msg_a", owner="x") is None


async def test_runs_go_with_their_chat(store: Store) -> None:
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    await store.start_run(chat.id, "msg_a", owner="n", request=REQUEST)
    assert await store.delete_chat(chat.id, user_id=alice.id)
    assert await store.list_runs() == []
    with pytest.raises(NotFoundError):
        await store.start_run(chat.id, "msg_b", owner="n", request=REQUEST)


async def test_a_library_lease_keeps_a_run_to_one_owner_until_it_runs_out(
    store: Store, clock: FakeClock
) -> None:
    """`lease=`: of two owners, one holds the run (and the chat's durable turns) until its
    lease runs out unrenewed or the run pauses; its own claim and renewal go through."""
    alice = await store.create_user("alice")
    chat = await store.create_chat(alice.id)
    assert await store.start_run(chat.id, "msg_a", owner="A", request=REQUEST, lease=60)
    assert not await store.start_run(chat.id, "msg_b", owner="B", request=REQUEST, lease=60)
    assert [r.message_id for r in await store.list_runs()] == ["msg_a"]  # b not recorded
    assert await store.claim_run("msg_a", owner="B", lease=60) is None
    assert await store.claim_run("msg_a", owner="A", lease=60) is not None  # its own
    clock.current += timedelta(seconds=50)
    assert await store.renew_run("msg_a", owner="A", lease=60)  # held 60 s from here
    clock.current += timedelta(seconds=50)
    assert await store.claim_run("msg_a", owner="B", lease=60) is None
    assert not await store.renew_run("msg_a", owner="B", lease=60)
    clock.current += timedelta(seconds=20)  # A died: its lease ran out
    taken = await store.claim_run("msg_a", owner="B", lease=60)
    assert taken is not None and (taken.owner, taken.resumes) == ("B", 2)
    assert not await store.renew_run("msg_a", owner="A", lease=60)  # A lost it
    assert await store.pause_run("msg_a")  # a pause lets the lease go
    assert (await store.claim_run("msg_a", owner="A", lease=60, resumed=False)) is not None
    await store.end_run("msg_a")  # an end too: the chat's next durable turn may start
    assert await store.start_run(chat.id, "msg_b", owner="B", request=REQUEST, lease=60)
