"""Call ids across a conversation: pairing reused ones, the ids in use, repairing a history.

A call id should name one call in a conversation, but saved chats, imported
histories and some providers (Kimi restarts `functions.x:0` every round) reuse
one. `Pairing` gives the k-th output of an id to its k-th call, and the second
and later pairs a fresh id derived from the old one and k (`reused_id`: the
same on every replay, so a provider's prompt cache holds). `transcript` uses
it on a turn's items, `unique_call_ids` across a saved chat's turns, and
`repair_history` on a client's Chat Completions history, which it also makes
acceptable to a provider (every call answered, no stray results).
`used_call_ids` lists the ids a conversation holds, so a new call reusing one
gets a fresh id when it is read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from toolrelay.core.items import is_call, is_call_output

__all__ = [
    "INTERRUPTED_TOOL_RESULT",
    "CallIdCounts",
    "Pairing",
    "repair_history",
    "reused_id",
    "unique_call_ids",
    "used_call_ids",
]

INTERRUPTED_TOOL_RESULT: Final = "Error: the tool call was interrupted before it returned a result."


def _call_id(item: Mapping[str, Any]) -> str | None:
    """An item's `call_id` when it is a usable one (hostile output may hold a dict)."""
    call_id = item.get("call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def reused_id(call_id: str, k: int) -> str:
    """The id the k-th (k >= 1, from 0) reuse of `call_id` goes back with: derived, so a
    saved chat replays with the same ids every time (a provider's prompt cache holds)."""
    digest = hashlib.sha256(f"{call_id}\0{k}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"call_{digest[:24]}"


class Pairing:
    """Pairs the k-th output of a call id with the k-th call of that id (rule 0).

    `feed` returns the item itself, or for the second and later call (or output)
    of an id a copy with a fresh `call_id`, the same for the k-th call and the
    k-th output, so each call meets its own result however the id was reused.
    """

    __slots__ = ("calls", "outputs")

    def __init__(self, calls: dict[str, int] | None = None, outputs: dict[str, int] | None = None):
        self.calls: dict[str, int] = dict(calls or {})
        self.outputs: dict[str, int] = dict(outputs or {})

    def copy(self) -> Pairing:
        return Pairing(self.calls, self.outputs)

    def feed(self, item: Mapping[str, Any]) -> Mapping[str, Any]:
        if is_call(item):
            counts = self.calls
        elif is_call_output(item):
            counts = self.outputs
        else:
            return item
        call_id = _call_id(item)
        if call_id is None:
            return item
        k = counts.get(call_id, 0)
        counts[call_id] = k + 1
        return item if k == 0 else {**item, "call_id": reused_id(call_id, k)}


CallIdCounts = tuple[dict[str, int], dict[str, int]]
"""Calls and outputs met so far, per call id: where `unique_call_ids` goes on from."""


def unique_call_ids(
    outputs: Sequence[Sequence[Mapping[str, Any]]], counts: CallIdCounts | None = None
) -> list[list[Mapping[str, Any]]]:
    """Several turns' items (a saved chat's, in order) with every reused call id made
    unique across all of them, the k-th output of an id staying with its k-th call.
    `counts` (updated in place) goes on from the turns before these: a chat's history
    read in parts gets the ids it would get read whole."""
    pairing = Pairing()
    if counts is not None:
        pairing.calls, pairing.outputs = counts
    return [[pairing.feed(item) for item in output] for output in outputs]


def used_call_ids(
    messages: Sequence[Mapping[str, Any]], output: Sequence[Mapping[str, Any]]
) -> set[str]:
    """Every call id the conversation already holds (history calls and results, the turn's
    items): a new call reusing one gets a fresh id (`BodyReader(call_ids=…)`)."""
    used = {_call_id(i) for i in output if isinstance(i, Mapping)}
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        used.update(_call_ids(message))
        tool_call_id = message.get("tool_call_id") if message.get("role") == "tool" else None
        used.add(tool_call_id if isinstance(tool_call_id, str) else None)
    return {c for c in used if c}


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    if not isinstance(calls, list):
        return []
    return [c["id"] for c in calls if isinstance(c, Mapping) and isinstance(c.get("id"), str)]


def _interrupted(open_calls: Sequence[str], answered: set[str]) -> list[dict[str, Any]]:
    """Synthetic results for the calls of one block that never got an answer."""
    return [
        {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED_TOOL_RESULT}
        for call_id in open_calls
        if call_id not in answered
    ]


def repair_history(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A client history a provider will accept: every tool call answered, no stray results.

    A tool message counts only inside the contiguous run of tool messages right
    after the assistant message that made the call; any other tool message is
    dropped. A call id used again (in one message or a later one) goes to the
    provider under a fresh id (rule 0), and the k-th tool message of the id in
    the run answers its k-th call there; a call already answered takes no
    second answer. Calls left unanswered when the run ends get
    `INTERRUPTED_TOOL_RESULT`, in call order.
    """
    repaired: list[dict[str, Any]] = []
    open_calls: list[tuple[str, str]] = []
    """The current block's calls: (the id as sent, the id as replayed)."""
    answered: set[str] = set()
    seen: dict[str, int] = {}
    for message in messages:
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            slot = next(
                (new for sent, new in open_calls if sent == call_id and new not in answered),
                None,
            )
            if slot is not None:
                answered.add(slot)
                repaired.append({**message, "tool_call_id": slot})
            continue
        repaired += _interrupted([new for _, new in open_calls], answered)
        copied, open_calls = _unique_calls(message, seen)
        repaired.append(copied)
        answered = set()
    repaired += _interrupted([new for _, new in open_calls], answered)
    return repaired


def _unique_calls(
    message: Mapping[str, Any], seen: dict[str, int]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A copy of `message` whose reused call ids are made unique (`seen` counts the
    history's ids so far), and its calls as (id as sent, id as replayed)."""
    copied = dict(message)
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    if not isinstance(calls, list):
        return copied, []
    pairs: list[tuple[str, str]] = []
    renamed: list[Any] = []
    for call in calls:
        call_id = call.get("id") if isinstance(call, Mapping) else None
        if not isinstance(call_id, str):
            renamed.append(call)
            continue
        k = seen.get(call_id, 0)
        seen[call_id] = k + 1
        new = call_id if k == 0 else reused_id(call_id, k)
        pairs.append((call_id, new))
        renamed.append(call if new == call_id else {**call, "id": new})
    if pairs and any(a is not b for a, b in zip(renamed, calls, strict=True)):
        copied["tool_calls"] = renamed
    return copied, pairs
