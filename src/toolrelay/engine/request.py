"""`TurnRequest`: everything one turn is asked with, as one value (issue 27 item 3).

Each front door (the chat API, `/v1`, the CLI, the library's `Relay.run`) builds one
and hands it to `Relay.run`; a new per-request option is one field here, not a
keyword threaded through every caller. What the relay itself holds (the model, its
tools, limits, the store) is not here: that is `Relay`'s, per route.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolrelay.engine.checkpoint import Checkpoints, TurnState
from toolrelay.engine.interfaces import Message, Tool


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    """One turn's input: its messages, the turn's own tools and its per-request options."""

    messages: Sequence[Message]
    """The history the turn answers (`Relay.run` also takes a string: one user message)."""
    chat_id: str | None = None
    message_id: str | None = None
    """The answer's id (made when None)."""
    user: Mapping[str, Any] | None = None
    """`{id, name, role, permissions}`; None: the library owner (an admin)."""
    metadata: Mapping[str, Any] | None = None
    """Added to what `__metadata__` always holds (`chat_id`, `message_id`, `user_id`, …)."""
    files: Sequence[Mapping[str, Any]] = ()
    sources: Sequence[Mapping[str, Any]] = ()
    """Retrieved sources (RAG) the turn starts with."""
    extra_tools: Sequence[Tool] = ()
    """This turn's own tools (a client's), beside the relay's."""
    deferred: Sequence[str] = ()
    """Tool names whose calls end the turn: the client runs them (`/v1` client tools)."""
    params: Mapping[str, Any] | None = None
    """Sampling parameters over the relay's own."""
    features: Mapping[str, Any] | None = None
    """What the chat asked for (`{"code_interpreter": True}`); None: the library default."""
    model_info: Mapping[str, Any] | None = None
    """`__model__`; None: `{id, name, owned_by}` from the relay's name."""
    request: Any = None
    """`__request__`: a request-like object (the server's holds no secrets)."""
    checkpoints: Checkpoints | None = None
    """Receives the turn's state at each step boundary (`engine.checkpoint`)."""
    resume: TurnState | None = None
    """Such a state to go on from (the same `messages` as its start)."""
    pause: bool = False
    """With `checkpoints`: a call waiting for an answer saves the turn and raises `TurnPaused`."""
    continues: str | None = None
    """With `resume` (a cut answer's items): its last message item, which the model's next
    text goes on (`engine.continuation`)."""
    durable: bool = False
    """With a `store` that keeps runs, and `chat_id`: the turn is recorded and checkpointed
    in the store, so `Relay.resume(chat_id)` goes on with it (`engine.durable_runs`)."""

    def but(self, **changes: Any) -> TurnRequest:
        """A copy with `changes` (a front door adding what it learnt later)."""
        return dataclasses.replace(self, **changes)
