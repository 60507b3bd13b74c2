"""What lets a chat turn outlive the process running it: its run record and checkpoints.

`TurnManager` (in `turns.py`) records each turn it starts in the store's
`turn_runs` (`Store.start_run`): who runs it (`node`) and what rebuilds it
(route, user, features, history, client tools: `run_request`). The engine saves
the turn's state there at each step boundary (`StoreCheckpoints`,
`engine.checkpoint`). When the runner dies, its lease runs out and another
worker (or the same server restarted, at once: it knows its own `node`) takes
the run over from its last checkpoint; a run that cannot go on (its route is
gone, its state unreadable, or it was taken over `max_resumes` times) fails
with an error that says why, its output kept.
"""

from __future__ import annotations

import hashlib
import logging
import socket
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from toolrelay.adapters.stores import Store, StoredMessage, TurnRun
from toolrelay.engine.checkpoint import TurnState
from toolrelay.engine.interfaces import Message, Tool
from toolrelay.server.client_tools import ClientTool

log = logging.getLogger(__name__)


def default_node(data_dir: Path | str = "", port: int | str = "", slot: int | str = "") -> str:
    """This server's name in `turn_runs.owner`: host, data directory, port and worker
    slot. A server restarted with the same ones takes its dead runs back at start
    instead of waiting for their leases to run out; two live servers never share one
    (they cannot share a port and a data directory on one host)."""
    place = hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
    return f"{socket.gethostname()}:{port}:{slot}:{place}"


class StoreCheckpoints:
    """`engine.checkpoint.Checkpoints` on a turn's run row."""

    def __init__(self, store: Store, message_id: str) -> None:
        self._store = store
        self._message_id = message_id

    async def save(self, state: Mapping[str, Any]) -> None:
        await self._store.save_run_state(self._message_id, state)


def run_request(
    route: str,
    user: Mapping[str, Any],
    history: Sequence[Message],
    client_tools: Sequence[Tool],
    features: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """What `rebuild` needs, as plain JSON."""
    return {
        "route": route,
        "user": dict(user),
        "history": list(history),
        "client_tools": [
            {
                "name": t.spec.name,
                "description": t.spec.description,
                "parameters": t.spec.parameters,
            }
            for t in client_tools
        ],
        "features": dict(features) if features is not None else None,
    }


class Rebuilt:
    """A run's request and state, read back."""

    def __init__(self, run: TurnRun) -> None:
        request = run.request
        self.route = str(request.get("route") or "")
        self.user: dict[str, Any] = dict(request.get("user") or {})
        self.history: list[Message] = [dict(m) for m in request.get("history") or []]
        self.client_tools: list[Tool] = [
            ClientTool(str(t["name"]), str(t.get("description") or ""), t.get("parameters") or {})
            for t in request.get("client_tools") or []
        ]
        features = request.get("features")
        self.features: dict[str, Any] | None = dict(features) if features is not None else None
        self.state = TurnState.from_json(run.state) if run.state is not None else TurnState()


def resume_refusal(run: TurnRun, routes: Mapping[str, Any], max_resumes: int) -> str | None:
    """Why a run cannot go on, or None."""
    if run.resumes > max_resumes:
        return (
            f"The server running this turn stopped {run.resumes} times; it was not "
            f"resumed again (max_resumes = {max_resumes}). The partial answer was kept."
        )
    if str(run.request.get("route") or "") not in routes:
        return (
            f"The server running this turn stopped, and its model "
            f"{run.request.get('route')!r} is no longer served; the partial answer was kept."
        )
    return None


def unfinished(messages: Sequence[StoredMessage], message_id: str) -> StoredMessage | None:
    """The run's assistant row while it is still `in_progress`."""
    return next((m for m in messages if m.id == message_id), None)


def answer_of(message: Mapping[str, Any]) -> tuple[str, Any]:
    """A control message (`approval`, `tool_result`) as (call id, the answer the call reads),
    as `Relay.approve` and `Relay.submit_tool_result` would resolve it."""
    call_id = str(message.get("id"))
    if message.get("op") == "approval":
        return call_id, {"approved": bool(message.get("approved")), "reason": message.get("reason")}
    headers = message.get("headers")
    result = message.get("result")
    return call_id, [result, dict(headers)] if isinstance(headers, Mapping) else result


def call_answered(state: Mapping[str, Any] | None, call_id: str) -> bool | None:
    """Whether a run's saved state holds an answer to its call `call_id` (its result, or
    the answer a take-over brought); None when the state has no such call (an event
    call's id, say: only the running turn knows those)."""
    output = (state or {}).get("output") or []
    calls = {i.get("call_id") for i in output if i.get("type") == "function_call"}
    if call_id not in calls:
        return None
    results = {i.get("call_id") for i in output if i.get("type") == "function_call_output"}
    return (
        call_id in results
        or call_id in ((state or {}).get("results") or {})
        or call_id in ((state or {}).get("answers") or {})
    )


def pause_expired(run: TurnRun, timeout: float, now: datetime) -> bool:
    """A paused run whose answer did not come within `timeout` seconds (0: never)."""
    return (
        run.status == "paused" and timeout > 0 and (now - run.updated_at).total_seconds() > timeout
    )


def expiry_text(timeout: float) -> str:
    hours = timeout / 3600
    span = f"{hours:g} h" if hours >= 1 else f"{timeout:g} s"
    return f"No answer came within {span} (pause_timeout); the turn ended, its output kept."


def waiting_asks(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The questions a paused turn's saved state waits on: `{id, kind, name, arguments}`."""
    waiting = state.get("waiting") or {}
    asks = []
    for item in state.get("output") or []:
        call_id = item.get("call_id") if isinstance(item, Mapping) else None
        if item.get("type") != "function_call" or call_id not in waiting:
            continue
        try:
            arguments = orjson.loads(item.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            arguments = {}
        asks.append(
            {
                "id": call_id,
                "kind": waiting[call_id],
                "name": item.get("name"),
                "arguments": arguments,
            }
        )
    return asks
