"""The hook the loop calls so logs, metrics and traces can watch a turn (issue 13).

The engine knows no logging format, metrics library or tracer: it calls an
`Observer` (when one is given) at four points — a turn starts, a model call
runs, a tool call runs, the turn ends — and fills small records the observer
reads. With no observer (`Relay`'s default) the loop skips every hook: no
record is built, no context manager entered, so watching costs nothing
unless someone watches.

Contract for implementations:

1. `turn()`, `model_call()` and `tool_call()` return context managers that
   wrap the work: what they make current (a tracing span, say) is current in
   the code they wrap, so spans nest; a tool call runs in its own task, so
   parallel calls are siblings under the turn.
2. The engine fills the record while the context is open and before it
   exits; the observer reads it on exit.
3. A hook never raises into the loop and never awaits: it is bookkeeping.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "ModelCall",
    "Observer",
    "Observers",
    "ToolCall",
    "TurnObserver",
    "TurnStart",
    "TurnSummary",
]


@dataclass(frozen=True, slots=True)
class TurnStart:
    """Who a turn is: its id (the saved message id), chat and model route."""

    turn_id: str
    chat_id: str | None
    route: str | None


@dataclass(slots=True)
class ModelCall:
    """One model call; the engine fills the outcome before the context exits."""

    iteration: int
    ttfb_s: float | None = None
    """Seconds until the upstream answered (its headers: the first byte)."""
    error: str | None = None
    """Why the call failed (upstream error, cut stream); None when it ended well."""
    usage: Mapping[str, Any] | None = None
    finish_reason: str | None = None


@dataclass(slots=True)
class ToolCall:
    """One tool call of a batch; `status` is `completed` or `failed` when it exits."""

    name: str
    call_id: str
    known: bool = True
    """False when no tool has this name (the model made it up)."""
    status: str = "completed"
    error: str | None = None
    """The text the model got instead of a result, when the call failed."""


@dataclass(frozen=True, slots=True)
class TurnSummary:
    """A turn as it ended (every way it can end: completed, failed, capped, cancelled)."""

    status: str
    iterations: int
    model_calls: int
    tool_calls: int
    usage: Mapping[str, Any]
    duration_s: float
    error: str | None = None
    finish_reason: str | None = None


class TurnObserver(Protocol):
    """The hooks of one turn (module doc: contract)."""

    def model_call(self, call: ModelCall) -> AbstractContextManager[object]: ...

    def tool_call(self, call: ToolCall) -> AbstractContextManager[object]: ...

    def finished(self, summary: TurnSummary) -> None: ...


class Observer(Protocol):
    """Watches turns: `Relay(observer=…)`; the server passes logs, metrics and traces."""

    def turn(self, start: TurnStart) -> AbstractContextManager[TurnObserver]: ...


@dataclass(slots=True)
class _Fanout:
    parts: Sequence[TurnObserver] = field(default_factory=tuple)

    @contextmanager
    def model_call(self, call: ModelCall) -> Iterator[object]:
        with ExitStack() as stack:
            for part in self.parts:
                stack.enter_context(part.model_call(call))
            yield call

    @contextmanager
    def tool_call(self, call: ToolCall) -> Iterator[object]:
        with ExitStack() as stack:
            for part in self.parts:
                stack.enter_context(part.tool_call(call))
            yield call

    def finished(self, summary: TurnSummary) -> None:
        for part in self.parts:
            part.finished(summary)


class Observers:
    """Several observers as one, entered in order (the first is outermost)."""

    def __init__(self, observers: Sequence[Observer]) -> None:
        self.observers = tuple(observers)

    @contextmanager
    def turn(self, start: TurnStart) -> Iterator[TurnObserver]:
        with ExitStack() as stack:
            parts = [stack.enter_context(o.turn(start)) for o in self.observers]
            yield parts[0] if len(parts) == 1 else _Fanout(parts)
