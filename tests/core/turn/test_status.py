"""Turn statuses are one closed enum from the loop to the wire (issue 9 item 4)."""

from __future__ import annotations

import json

import orjson
import pytest

from toolrelay import Relay, RunLimits, tool
from toolrelay.core.turn.status import TurnStatus, turn_status
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_a_status_reads_and_writes_as_its_plain_value() -> None:
    assert orjson.dumps({"status": TurnStatus.CAPPED}) == b'{"status":"capped"}'
    assert json.dumps(TurnStatus.FAILED) == '"failed"'
    assert f"{TurnStatus.CANCELLED}" == "cancelled"
    assert [turn_status(s) for s in ("completed", "capped", "nonsense", None)] == [
        TurnStatus.COMPLETED,
        TurnStatus.CAPPED,
        TurnStatus.FAILED,
        TurnStatus.FAILED,
    ]


@pytest.mark.anyio
async def test_a_turn_result_and_its_final_event_carry_the_enum() -> None:
    model = ScriptedModel(reply(calls=[("add", {"a": 1, "b": 1})]), reply(calls=[("add", {})]))
    sink = ListSink()
    result = await Relay(model, [add], limits=RunLimits(max_iterations=1)).run("x", sink=sink)
    assert result.status is TurnStatus.CAPPED
    final = [e for e in sink.events if e.type == "chat:completion" and e.data.get("done")]
    assert final[-1].data["status"] is TurnStatus.CAPPED
