"""What both backends do to values before writing them and after reading them.

A turn or message is checked and copied into plain JSON values before any
write (so a bad value fails before anything is written); stored messages are
turned back into a Chat Completions history for the next turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from toolrelay.adapters.stores.base import StoredMessage, TurnFields
from toolrelay.core.formats.transcript import CallIdCounts, to_chat_messages, unique_call_ids
from toolrelay.core.turn.status import TurnStatus
from toolrelay.engine.interfaces import Message

__all__ = ["Clock", "history_messages", "history_of", "message_content", "turn_fields", "utc_now"]

TURN_STATUSES: Final = frozenset({"in_progress", *TurnStatus})


def utc_now() -> datetime:
    """The default clock; stores take a `clock` argument so tests can fix time."""
    return datetime.now(UTC)


Clock = Callable[[], datetime]
"""Returns timezone-aware UTC datetimes."""


def _json_copy(value: Any) -> Any:
    """A deep, JSON-only copy; raises TypeError (orjson's error) for anything else."""
    return orjson.loads(orjson.dumps(value))


def plain_json(value: Any) -> Any:
    """`value` as plain JSON values (a deep copy); TypeError for anything else."""
    return _json_copy(value)


def _dict_or_none(turn: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = _json_copy(turn.get(key))
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"turn[{key!r}] must be an object or None, not {type(value).__name__}")
    return value


def turn_fields(turn: Mapping[str, Any]) -> TurnFields:
    """Validate a turn up front, so a bad value fails before anything is written."""
    status = turn.get("status", "completed")
    if status not in TURN_STATUSES:
        raise ValueError(f"unknown turn status {status!r}; expected one of {sorted(TURN_STATUSES)}")
    output = _json_copy(list(turn.get("output") or []))
    model = turn.get("model")
    return TurnFields(
        output=output,
        content=str(turn.get("content") or ""),
        usage=_dict_or_none(turn, "usage"),
        status=status,
        error=_json_copy(turn.get("error")),
        timings=_dict_or_none(turn, "timings"),
        model=None if model is None else str(model),
        follow_ups=[str(f) for f in _json_copy(list(turn.get("follow_ups") or []))],
        whole_outputs=_whole_outputs(turn.get("whole_outputs")),
    )


def _whole_outputs(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise TypeError("turn['whole_outputs'] must map output item ids to texts")
    return dict(value)


def message_content(message: Mapping[str, Any]) -> tuple[str, Any]:
    """The role and a JSON copy of the content of a user/system message being added."""
    role = message.get("role")
    if role not in ("user", "system", "assistant"):
        raise ValueError(f"add_message takes user, system or assistant messages, not {role!r}")
    content = _json_copy(message.get("content", ""))
    if not isinstance(content, str | list):
        raise TypeError("message content must be a string or a list of content parts")
    return str(role), content


def history_messages(messages: list[StoredMessage]) -> list[Message]:
    """Chat Completions history: stored user/system messages, assistant turns expanded."""
    return history_of([(m.role, m.content, m.output) for m in messages])


def history_of(
    rows: Sequence[tuple[str, Any, list[dict[str, Any]] | None]],
    counts: CallIdCounts | None = None,
) -> list[Message]:
    """The history from (role, content, output) of each stored message, in order.

    An assistant turn becomes its items replayed by `to_chat_messages` (tool calls
    and results included, a call id reused across turns given a fresh one); a turn
    without items falls back to its text, and a turn with neither is left out
    (providers reject empty assistant messages). Plain tuples, so the SQL store
    hands its rows over without building records; `counts` carries the call ids
    seen in the rows before these (updated in place), so a history read in parts
    is the one read whole.
    """
    history: list[Message] = []
    # a call id reused across turns (Kimi restarts `functions.x:0` each round) made unique
    outputs = [(output or []) if role == "assistant" else [] for role, _, output in rows]
    turns = unique_call_ids(outputs, counts)
    for (role, content, _), items in zip(rows, turns, strict=True):
        if role != "assistant":
            history.append({"role": role, "content": content})
            continue
        expanded = to_chat_messages(items) if items else []
        if expanded:
            history.extend(expanded)
        elif content:
            history.append({"role": "assistant", "content": content})
    return history
