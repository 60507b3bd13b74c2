"""Keeping each model request of a turn within the model's context (`core.prompt.context`).

`ContextFit` is the turn's side of it: before every model call it works out the
tokens left for the history (the context, less the tool specs, the turn's output so
far and a reserve for the answer) and asks `core.prompt.context.fit_history` for a history
that fits; when that trims anything, or cannot fit, the turn sends one
`chat:context:trimmed` event saying what was taken out.

`ContextWindow` is how a configured route says how much its model reads: the
registry wraps the route's client in one, and `Relay` takes `context_tokens` from
the client it is given when it is not told otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from toolrelay.core.events import Event
from toolrelay.core.prompt.context import Trimmed, estimate_tokens, fit_history, message_tokens
from toolrelay.engine.interfaces import Message, ModelClient, ModelRequest, ModelStream

__all__ = ["CONTEXT_TRIMMED", "ContextFit", "ContextWindow", "answer_reserve"]

CONTEXT_TRIMMED: Final = "chat:context:trimmed"
"""`{context_tokens, budget, tokens_before, tokens_after, results_removed,
messages_dropped, fits}`: the history sent was trimmed (or does not fit)."""
_ANSWER_KEYS: Final = ("max_completion_tokens", "max_tokens", "max_output_tokens", "num_predict")


def answer_reserve(context_tokens: int, params: Mapping[str, Any]) -> int:
    """Tokens kept free for the answer: the request's own bound, else an eighth of the
    context (at most 4,096)."""
    for key in _ANSWER_KEYS:
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return min(value, context_tokens // 2)
    return min(4096, context_tokens // 8)


class ContextFit:
    """One turn's history fitting; `fit` per model request, `event()` once it trimmed."""

    def __init__(
        self,
        context_tokens: int,
        *,
        specs: Sequence[Mapping[str, Any]] = (),
        params: Mapping[str, Any] | None = None,
    ) -> None:
        self.context_tokens = context_tokens
        self._fixed = estimate_tokens(list(specs)) + answer_reserve(context_tokens, params or {})
        self._sizes_of: Sequence[Message] | None = None
        self._sizes: list[int] = []
        self._reported: tuple[int, int, bool] = (0, 0, True)
        self._pending: Event | None = None

    def fit(
        self, messages: Sequence[Message], output: Sequence[Mapping[str, Any]]
    ) -> Sequence[Message]:
        """`messages` as the next request may send them (the same object when they fit)."""
        if messages is not self._sizes_of:  # sizes once per history, not per request
            self._sizes_of, self._sizes = messages, [message_tokens(m) for m in messages]
        budget = self.context_tokens - self._fixed - estimate_tokens(list(output))
        trimmed = fit_history(messages, budget, sizes=self._sizes)
        self._note(trimmed, budget)
        return trimmed.messages if trimmed.changed else messages

    def _note(self, trimmed: Trimmed, budget: int) -> None:
        seen = (trimmed.results_removed, trimmed.messages_dropped, trimmed.fits)
        if seen == self._reported:
            return
        self._reported = seen
        self._pending = Event(
            CONTEXT_TRIMMED,
            {
                "context_tokens": self.context_tokens,
                "budget": budget,
                "tokens_before": trimmed.tokens_before,
                "tokens_after": trimmed.tokens_after,
                "results_removed": trimmed.results_removed,
                "messages_dropped": trimmed.messages_dropped,
                "fits": trimmed.fits,
            },
        )

    def event(self) -> Event | None:
        """The event for what the last `fit` changed, once (None when nothing new)."""
        event, self._pending = self._pending, None
        return event


class ContextWindow:
    """A model client whose model reads `context_tokens` tokens (a route's setting)."""

    def __init__(self, client: ModelClient, context_tokens: int) -> None:
        self.client = client
        self.context_tokens = context_tokens

    async def open(self, request: ModelRequest) -> ModelStream:
        return await self.client.open(request)

    async def aclose(self) -> None:
        await self.client.aclose()
