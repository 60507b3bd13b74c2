"""A turn's state at its step boundaries, and picking a turn up from it.

A turn given a `Checkpoints` (the server's run store) saves its state there:
after each model response that asks for tools (its items), after each tool call
finishes (its result), never per token. A turn given a saved state (`resume`)
starts from it instead of from nothing: the calls that had finished keep their
results, a call that was cut while it ran is run again only when its tool says
it is idempotent (`ToolSpec.idempotent`), otherwise the model reads a result
saying it may or may not have taken effect; a model response cut mid-stream is
not in the state at all, so it is asked for again.

The state is plain JSON (`TurnState.to_json`), so any store can keep it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolrelay.core.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    as_items,
    function_call_output_item,
    is_call,
    is_call_output,
)
from toolrelay.engine.interfaces import Tool

log = logging.getLogger(__name__)

STATE_VERSION = 1


class Checkpoints(Protocol):
    """Where a turn's state goes at each step boundary (the server: a `turn_runs` row)."""

    async def save(self, state: Mapping[str, Any]) -> None: ...


@dataclass(slots=True)
class TurnState:
    """What a turn needs to go on from a step boundary."""

    output: list[Item] = field(default_factory=list)
    usage: dict[str, Any] = field(default_factory=dict)
    iterations: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    """Call ids of the batch being run (calls waiting for an approval excluded)."""
    results: dict[str, FunctionCallOutputItem] = field(default_factory=dict)
    """Results of the running batch's calls that finished, by call id."""
    waiting: dict[str, str] = field(default_factory=dict)
    """A paused turn's calls waiting for an answer: call id -> `approval` or `tool`."""
    answers: dict[str, Any] = field(default_factory=dict)
    """Answers given to waiting calls, by call id (what `Relay.approve` and
    `submit_tool_result` would resolve), fed to the calls when the turn goes on."""
    picked: list[str] | None = None
    """The tools the tool-selection step chose for the turn (`engine.tool_select`), so a
    resumed turn is offered the same ones; None: no choice made (every tool offered)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "v": STATE_VERSION,
            "output": list(self.output),
            "usage": dict(self.usage),
            "iterations": self.iterations,
            "steps": list(self.steps),
            "running": list(self.running),
            "results": dict(self.results),
            "waiting": dict(self.waiting),
            "answers": dict(self.answers),
            "picked": None if self.picked is None else list(self.picked),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TurnState:
        """A saved state; raises ValueError when it is not one this version wrote."""
        if not isinstance(data, Mapping) or data.get("v") != STATE_VERSION:
            raise ValueError("the turn's checkpoint is from another version")
        output, results = data.get("output"), data.get("results")
        picked = data.get("picked")
        if not isinstance(output, list) or not isinstance(results, Mapping):
            raise ValueError("the turn's checkpoint is damaged")
        return cls(
            output=as_items(output),
            usage=dict(data.get("usage") or {}),
            iterations=int(data.get("iterations") or 0),
            steps=list(data.get("steps") or []),
            running=[str(i) for i in data.get("running") or []],
            results={str(k): v for k, v in results.items()},
            waiting={str(k): str(v) for k, v in (data.get("waiting") or {}).items()},
            answers={str(k): v for k, v in (data.get("answers") or {}).items()},
            picked=[str(n) for n in picked] if isinstance(picked, list) else None,
        )

    def answer_key(self, call_id: str) -> str:
        """The `PendingCalls` key a waiting call's answer goes to."""
        kind = "approval" if self.waiting.get(call_id) == "approval" else "tool"
        return f"{kind}:{call_id}"


class TurnPaused(Exception):
    """A pausable turn (`Relay.run(pause=True)`) stopped to wait for answers: its state,
    with `waiting`, was saved to its `Checkpoints`; `resume` it with the answers."""

    def __init__(self, waiting: Mapping[str, str]) -> None:
        super().__init__(", ".join(waiting))
        self.waiting = dict(waiting)


class Saver:
    """Writes a turn's states one at a time; a failed write is logged, never fatal (the
    turn goes on, only less durable)."""

    def __init__(self, target: Checkpoints) -> None:
        self._target = target
        self._lock = asyncio.Lock()
        self.writes = 0

    async def save(self, state: TurnState) -> None:
        data = state.to_json()  # taken now: later steps do not change what this write says
        async with self._lock:
            try:
                await self._target.save(data)
                self.writes += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("could not checkpoint a turn: %s", exc)


def interrupted_text(name: str) -> str:
    return (
        f"Error: the call to `{name}` was interrupted: the server running it stopped. "
        "It may or may not have taken effect; check before calling it again."
    )


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """How the calls a resumed turn found unanswered are answered."""

    kept: dict[str, FunctionCallOutputItem]
    """Results the state holds, and `interrupted` results, by call id."""
    rerun: list[FunctionCallItem]
    """Calls to run (again): not started yet, or idempotent."""


def plan_resume(state: TurnState, tools: Mapping[str, Tool]) -> ResumePlan:
    """The unanswered calls of `state.output`, sorted: finished (their result kept), cut
    and not idempotent (an `interrupted` result), to run (not started, or idempotent)."""
    answered = {i["call_id"] for i in state.output if is_call_output(i)}
    kept: dict[str, FunctionCallOutputItem] = {}
    rerun: list[FunctionCallItem] = []
    running = set(state.running)
    for item in state.output:
        if not is_call(item) or item["call_id"] in answered:
            continue
        call_id = item["call_id"]
        done = state.results.get(call_id)
        tool = tools.get(str(item.get("name") or ""))
        if done is not None:
            kept[call_id] = done
        elif call_id in running and tool is not None and not tool.spec.idempotent:
            text = interrupted_text(str(item.get("name")))
            kept[call_id] = function_call_output_item(call_id, text, status="failed")
        else:
            rerun.append(item)
    return ResumePlan(kept, rerun)


def ordered_outputs(
    calls: Sequence[Item], kept: Mapping[str, FunctionCallOutputItem]
) -> list[FunctionCallOutputItem]:
    """`kept` results in the order of their calls."""
    return [kept[c["call_id"]] for c in calls if is_call(c) and c["call_id"] in kept]
