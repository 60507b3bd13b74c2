"""The one normalised delta vocabulary every provider translator speaks.

Provider modules (`chat_completions`, `ollama`) only translate wire chunks
into these; the accumulator is the single place that turns them into items
and events (pydantic-ai's parts manager is the model). Slotted dataclasses,
not frozen: a frozen one costs twice as much to build, and one is built per
chunk on the hot path. Treat them as immutable values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol


@dataclass(slots=True)
class TextDelta:
    """Visible assistant text."""

    text: str


@dataclass(slots=True)
class ReasoningDelta:
    """Chain-of-thought text (`reasoning_content`, `reasoning`, `thinking`, thinking parts)."""

    text: str
    details: tuple[dict[str, Any], ...] = ()
    """Opaque provider reasoning details (OpenRouter `reasoning_details`), kept for replay."""


@dataclass(slots=True)
class ToolCallDelta:
    """A fragment of one tool call.

    `slot` is the translator's resolved position of the call in this response
    (providers' `index` is unreliable: missing, or 0 for every parallel call).
    `call_id` is set on the fragment that introduces the call (minted by the
    translator when the provider sent none); `name` when known; `arguments`
    is always a string fragment to append.
    """

    slot: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class UsageDelta:
    """Token usage as the provider reported it (normalised later by `core.turn.usage`)."""

    usage: dict[str, Any]


@dataclass(slots=True)
class FinishDelta:
    """The provider's finish reason (`stop`, `tool_calls`, `length`, …)."""

    reason: str


@dataclass(slots=True)
class ErrorDelta:
    """An error reported inside the stream; partial output is kept."""

    message: str
    data: Any = None


@dataclass(slots=True)
class CitationDelta:
    """A url citation (`delta.annotations` of type `url_citation`)."""

    url: str
    title: str | None = None


@dataclass(slots=True)
class ResponseIdDelta:
    """The provider's id for this response (kept for stateful continuation)."""

    response_id: str


Delta = (
    TextDelta
    | ReasoningDelta
    | ToolCallDelta
    | UsageDelta
    | FinishDelta
    | ErrorDelta
    | CitationDelta
    | ResponseIdDelta
)


class DeltaSink(Protocol):
    """Where a translator puts deltas: the accumulator, or a list (`DELTA_LIST`).

    The three commonest deltas have a lane each, so a translator's hot path hands
    over a string instead of building a delta per chunk (building one costs about
    as much as the accumulator's work on it); each lane means the same as
    `feed_into` with that delta. `out` is the sink's own output (the accumulator's
    events), passed through untouched.
    """

    def text(self, text: str, out: list[Any]) -> None:
        """`feed_into(TextDelta(text), out)`."""

    def reasoning(self, text: str, out: list[Any]) -> None:
        """`feed_into(ReasoningDelta(text), out)`."""

    def arguments(self, slot: int, fragment: str, out: list[Any]) -> None:
        """`feed_into(ToolCallDelta(slot, None, None, fragment), out)`."""

    def feed_into(self, delta: Delta, out: list[Any]) -> None:
        """Any delta."""


class _DeltaList:
    """The sink that builds the deltas: `out` is the list of deltas."""

    __slots__ = ()

    def text(self, text: str, out: list[Any]) -> None:
        out.append(TextDelta(text))

    def reasoning(self, text: str, out: list[Any]) -> None:
        out.append(ReasoningDelta(text))

    def arguments(self, slot: int, fragment: str, out: list[Any]) -> None:
        out.append(ToolCallDelta(slot, None, None, fragment))

    def feed_into(self, delta: Delta, out: list[Any]) -> None:
        out.append(delta)


DELTA_LIST: Final[DeltaSink] = _DeltaList()
"""`translator.feed_into(chunk, DELTA_LIST, out)` appends the chunk's deltas to `out`."""
