"""Checkpoints at step boundaries and resuming a turn from one (`engine.checkpoint`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from toolrelay import Relay, tool
from toolrelay.core import events as ev
from toolrelay.core.items import is_call_output, raw_items
from toolrelay.engine.checkpoint import TurnPaused, TurnState
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


class Kept:
    """A `Checkpoints` keeping every state it gets."""

    def __init__(self) -> None:
        self.states: list[dict[str, Any]] = []
        self.saved = asyncio.Event()

    async def save(self, state: Mapping[str, Any]) -> None:
        self.states.append(dict(state))
        self.saved.set()


runs: dict[str, int] = {}


@tool
def charge(amount: int) -> str:
    """Charge a card (not idempotent)."""
    runs["charge"] = runs.get("charge", 0) + 1
    return f"charged {amount}"


@tool(idempotent=True)
def lookup(key: str) -> str:
    """Look a key up (idempotent)."""
    runs["lookup"] = runs.get("lookup", 0) + 1
    return f"value of {key}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    runs.clear()


async def test_a_turn_checkpoints_at_each_step_never_per_token() -> None:
    model = ScriptedModel(
        reply(calls=[("lookup", {"key": "a"}), ("charge", {"amount": 3})]),
        reply("All " * 50 + "done."),
    )
    kept = Kept()
    result = await Relay(model, [lookup, charge]).run("go", checkpoints=kept)
    assert result.status == "completed"
    # one before the batch (the response asking for it), one per finished call
    assert len(kept.states) == 3
    before, *after = kept.states
    assert len(before["running"]) == 2 and before["results"] == {}
    assert [len(s["results"]) for s in after] == [1, 2]
    assert TurnState.from_json(kept.states[-1]).iterations == 1


async def test_resume_keeps_finished_calls_and_reruns_only_idempotent_ones() -> None:
    first = ScriptedModel(reply(calls=[("lookup", {"key": "a"}), ("charge", {"amount": 3})]))
    kept = Kept()
    await Relay(first, [lookup, charge]).run("go", checkpoints=kept)
    state = TurnState.from_json(kept.states[0])  # died with both calls running
    runs.clear()
    model = ScriptedModel(reply("Finished."))
    sink = ListSink()
    result = await Relay(model, [lookup, charge]).run(
        "go", sink=sink, resume=state, checkpoints=Kept()
    )
    assert result.status == "completed" and result.text == "Finished."
    assert runs == {"lookup": 1}  # the idempotent call again; the charge never
    outputs = [i for i in raw_items(result.output) if is_call_output(i)]
    assert outputs[0]["output"] == "value of a"
    assert "may or may not have taken effect" in outputs[1]["output"]
    assert sink.events[0].type == ev.TURN_RESUMED
    assert len(model.requests) == 1  # the model read both results
    assert len(model.requests[0].output) == 4


async def test_a_finished_call_is_not_run_again() -> None:
    first = ScriptedModel(reply(calls=[("charge", {"amount": 3})]))
    kept = Kept()
    await Relay(first, [charge]).run("go", checkpoints=kept)
    state = TurnState.from_json(kept.states[1])  # died after the charge finished
    runs.clear()
    result = await Relay(ScriptedModel(reply("Done.")), [charge]).run("go", resume=state)
    assert runs == {}
    outputs = [i for i in raw_items(result.output) if is_call_output(i)]
    assert outputs[0]["output"] == "charged 3"


async def test_a_state_from_before_the_first_step_starts_the_turn_over() -> None:
    model = ScriptedModel(reply("Hello."))
    result = await Relay(model, []).run("hi", resume=TurnState())
    assert result.text == "Hello."


async def test_cut_before_an_approval_the_call_asks_again() -> None:
    @tool(requires_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        runs["wire"] = runs.get("wire", 0) + 1
        return "wired"

    kept = Kept()
    relay = Relay(ScriptedModel(reply(calls=[("wire", {"amount": 1})])), [wire])
    task = asyncio.ensure_future(relay.run("go", checkpoints=kept))
    await kept.saved.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    state = TurnState.from_json(kept.states[0])
    assert state.running == []  # waiting for the user: it did nothing yet
    relay = Relay(ScriptedModel(reply("Wired.")), [wire])
    sink = ListSink()
    resumed = asyncio.ensure_future(relay.run("go", sink=sink, resume=state))
    call_id = (await sink.wait_for(ev.TOOL_APPROVAL)).data["id"]
    relay.approve(call_id)
    result = await resumed
    assert runs == {"wire": 1} and result.text == "Wired."


def test_a_state_from_another_version_is_refused() -> None:
    with pytest.raises(ValueError, match="another version"):
        TurnState.from_json({"v": 99})


async def test_a_pausable_turn_saves_what_it_waits_for_and_goes_on_with_the_answer() -> None:
    @tool(requires_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        runs["wire"] = runs.get("wire", 0) + 1
        return "wired"

    kept = Kept()
    model = ScriptedModel(reply(calls=[("wire", {"amount": 1}), ("lookup", {"key": "k"})]))
    sink = ListSink()
    with pytest.raises(TurnPaused) as paused:
        await Relay(model, [wire, lookup]).run("go", sink=sink, checkpoints=kept, pause=True)
    call_id = next(e.data["id"] for e in sink.events if e.type == ev.TOOL_APPROVAL)
    assert paused.value.waiting == {call_id: "approval"}
    state = TurnState.from_json(kept.states[-1])
    assert state.waiting == {call_id: "approval"}
    assert [o["output"] for o in state.results.values()] == ["value of k"]  # the other ran
    assert runs == {"lookup": 1}
    # answered (here a restart later): the call runs, the lookup is not run again
    state.answers[call_id] = {"approved": True}
    model = ScriptedModel(reply("Wired."))
    result = await Relay(model, [wire, lookup]).run(
        "go", resume=state, checkpoints=Kept(), pause=True
    )
    assert result.text == "Wired."
    assert runs == {"lookup": 1, "wire": 1}
    outputs = [i["output"] for i in raw_items(result.output) if is_call_output(i)]
    assert outputs == ["wired", "value of k"]


async def test_a_resumed_turn_without_its_answer_pauses_again() -> None:
    @tool(requires_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        return "wired"

    kept = Kept()
    model = ScriptedModel(reply(calls=[("wire", {"amount": 1})]))
    with pytest.raises(TurnPaused):
        await Relay(model, [wire]).run("go", checkpoints=kept, pause=True)
    state = TurnState.from_json(kept.states[-1])
    again = Kept()
    with pytest.raises(TurnPaused):
        await Relay(ScriptedModel(), [wire]).run("go", resume=state, checkpoints=again, pause=True)
    assert TurnState.from_json(again.states[-1]).waiting == state.waiting
