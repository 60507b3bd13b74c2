"""The loop's pure decision: what to do after a model response (SPEC R7, R16).

A closed set of outcomes, dispatched by the engine with `match` and
`assert_never` (STYLE habit 5). No I/O, no flags: the engine passes in what
it knows and gets back exactly one next step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolrelay.core.items import CodeInterpreterItem, FunctionCallItem, Item, is_code


@dataclass(frozen=True, slots=True)
class Final:
    """The model answered without tools: finish the turn."""


@dataclass(frozen=True, slots=True)
class RunTools:
    """Run this batch of calls, feed the results back, ask the model again."""

    calls: tuple[FunctionCallItem, ...]


@dataclass(frozen=True, slots=True)
class RunCode:
    """Run the trailing code_interpreter block, then ask the model again (R16)."""

    item: CodeInterpreterItem


@dataclass(frozen=True, slots=True)
class Capped:
    """Calls are queued but the iteration cap is reached (R7)."""

    calls: tuple[FunctionCallItem, ...]


@dataclass(frozen=True, slots=True)
class Failed:
    """The response failed (upstream error, cut body) or the loop must stop."""

    error: str


@dataclass(frozen=True, slots=True)
class Interrupted:
    """Calls to tools the caller runs itself: end the turn and hand them back."""

    calls: tuple[FunctionCallItem, ...]


Outcome = Final | RunTools | RunCode | Capped | Failed | Interrupted


@dataclass(frozen=True, slots=True)
class Step:
    """What the engine knows after reading one response."""

    output: Sequence[Item]
    """This response's items."""
    calls: Sequence[FunctionCallItem]
    """Its function_call items, in order."""
    error: str | None
    iterations: int
    """Tool batches already run this turn."""
    max_iterations: int
    deferred_names: frozenset[str] = frozenset()
    """Tools whose calls end the turn (the caller runs them)."""
    code_runs: int = 0
    code_limit: int = 0
    """0: no code interpreter."""


def decide(step: Step) -> Outcome:
    if step.error is not None:
        return Failed(step.error)
    calls = tuple(step.calls)
    if calls:
        if step.deferred_names and any(c.get("name") in step.deferred_names for c in calls):
            return Interrupted(calls)
        if step.max_iterations != -1 and step.iterations >= step.max_iterations:
            return Capped(calls)
        return RunTools(calls)
    last = step.output[-1] if step.output else None
    if (
        last is not None
        and is_code(last)
        and last["output"] is None
        and step.code_runs < step.code_limit
    ):
        return RunCode(last)
    return Final()


@dataclass(frozen=True, slots=True)
class Repeats:
    """Run length of identical calls (name + canonical arguments), across iterations."""

    signature: tuple[str, str] | None = None
    count: int = 0

    def observe(self, name: str, canonical_arguments: str) -> Repeats:
        sig = (name, canonical_arguments)
        return Repeats(sig, self.count + 1 if sig == self.signature else 1)
