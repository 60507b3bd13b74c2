"""The one normalised delta vocabulary every provider translator speaks.

Provider modules (`chat_completions`, `ollama`) only translate wire chunks
into these; the accumulator is the single place that turns them into items
and events (pydantic-ai's parts manager is the model). Slotted dataclasses,
not frozen: a frozen one costs twice as much to build, and one is built per
chunk on the hot path. Treat them as immutable values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    """Token usage as the provider reported it (normalised later by `core.usage`)."""

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
