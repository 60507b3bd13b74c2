"""Fitting a history into a model's context: estimate its tokens, trim it by one policy.

A route may say how many tokens its model reads (`context_tokens`). Before each model
call the engine asks `fit_history` for a history that fits the tokens left once the
tool specs, the turn's own output so far and a reserve for the answer are counted;
the model then never fails for a history that grew too long.

The policy, in order (documented in docs/configuration.md):

1. Nothing changes while the history fits.
2. Tool results are replaced by a short note, oldest first.
3. Then whole exchanges are dropped, oldest first (a user message with the
   assistant messages and tool results that answered it, so a tool call never
   loses its result).
4. System messages and the last user message, with everything after it (the
   exchange being answered), are always kept; if they alone do not fit, the
   history goes as it is and the result says it does not fit.

Tokens are estimated without a tokenizer (none is model-agnostic): about four
ASCII characters a token, one token per other character, a fixed amount per
image and per message. It errs high on purpose: trimming a little early is
cheap, a provider's "context length exceeded" is not.

Pure: no I/O, no clock; `Message` is a Chat Completions message dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "IMAGE_TOKENS",
    "RESULT_REMOVED",
    "Trimmed",
    "estimate_tokens",
    "fit_history",
    "message_tokens",
]

IMAGE_TOKENS: Final = 1000
"""An image part, whatever its size (providers bound them; base64 length says nothing)."""
MESSAGE_TOKENS: Final = 4
"""Per message: role and separators."""
RESULT_REMOVED: Final = "[This tool result was removed to fit the model's context.]"
_IMAGE_PARTS: Final = frozenset({"image_url", "input_image", "image"})


def estimate_tokens(value: Any) -> int:
    """Tokens of a text, or of every string inside a JSON-like value (images as a fixed sum)."""
    if isinstance(value, str):
        return _text_tokens(value)
    if isinstance(value, Mapping):
        if value.get("type") in _IMAGE_PARTS:
            return IMAGE_TOKENS
        return sum(estimate_tokens(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(estimate_tokens(v) for v in value)
    return 0


def _text_tokens(text: str) -> int:
    chars = len(text)
    if text.isascii():
        return (chars + 3) // 4
    extra = len(text.encode("utf-8", errors="surrogatepass")) - chars
    others = min(chars, (extra * 2 + 2) // 3)  # 2- and 3-byte characters, counted high
    return (chars - others + 3) // 4 + others


def message_tokens(message: Mapping[str, Any]) -> int:
    """A message's estimated tokens: content, tool calls and their arguments, and overhead."""
    total = MESSAGE_TOKENS + estimate_tokens(message.get("content"))
    calls = message.get("tool_calls")
    if calls:
        total += estimate_tokens(calls)
    return total


@dataclass(frozen=True, slots=True)
class Trimmed:
    """What `fit_history` made of a history, and what it took out."""

    messages: list[dict[str, Any]]
    tokens_before: int
    tokens_after: int
    results_removed: int = 0
    messages_dropped: int = 0
    fits: bool = True
    sizes: list[int] = field(default_factory=list, repr=False)
    """The estimated tokens of each kept message (callers may cache them)."""

    @property
    def changed(self) -> bool:
        return bool(self.results_removed or self.messages_dropped)


def _kept_tail(messages: Sequence[Mapping[str, Any]]) -> int:
    """Index of the last user message: it and what follows are never trimmed."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return len(messages)


def _exchanges(messages: Sequence[Mapping[str, Any]], tail: int) -> list[list[int]]:
    """Indexes before `tail`, grouped in exchanges (each starts at a user message, except a
    first one of what came before any), system messages left out: they are kept."""
    groups: list[list[int]] = []
    for index in range(tail):
        role = messages[index].get("role")
        if role in ("system", "developer"):
            continue
        if role == "user" or not groups:
            groups.append([])
        groups[-1].append(index)
    return groups


def fit_history(
    messages: Sequence[Mapping[str, Any]],
    budget: int,
    *,
    sizes: Sequence[int] | None = None,
) -> Trimmed:
    """`messages` trimmed to at most `budget` estimated tokens by the module's policy.

    `sizes` are the messages' estimated tokens when the caller has them already.
    """
    size = list(sizes) if sizes is not None else [message_tokens(m) for m in messages]
    before = total = sum(size)
    kept: list[dict[str, Any]] = [dict(m) for m in messages]
    if total <= budget:
        return Trimmed(kept, before, total, sizes=size)
    tail = _kept_tail(messages)
    removed = 0
    for index in range(tail):
        if total <= budget:
            break
        if kept[index].get("role") == "tool" and kept[index].get("content") != RESULT_REMOVED:
            kept[index]["content"] = RESULT_REMOVED
            new = message_tokens(kept[index])
            total += new - size[index]
            size[index] = new
            removed += 1
    dropped: set[int] = set()
    for group in _exchanges(messages, tail):
        if total <= budget:
            break
        dropped.update(group)
        total -= sum(size[i] for i in group)
    if dropped:
        kept = [m for i, m in enumerate(kept) if i not in dropped]
        size = [s for i, s in enumerate(size) if i not in dropped]
    return Trimmed(kept, before, total, removed, len(dropped), fits=total <= budget, sizes=size)
