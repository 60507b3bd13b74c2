"""`core.prompt.context`: token estimates and the trimming policy, exactly and over random histories."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolrelay.core.prompt.context import (
    IMAGE_TOKENS,
    RESULT_REMOVED,
    estimate_tokens,
    fit_history,
    message_tokens,
)


def _exchange(n: int, words: int = 100) -> list[dict[str, Any]]:
    """A user question, a tool call, its (long) result and the answer."""
    call = {"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"question {n}"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": "word " * words},
        {"role": "assistant", "content": f"answer {n}"},
    ]


SYSTEM = {"role": "system", "content": "Be brief."}


def test_estimates_err_high_for_text_that_is_not_ascii_and_fix_images() -> None:
    assert estimate_tokens("abcdefgh") == 2
    assert estimate_tokens("日本語のテキスト") >= 8  # a token or more per character
    assert estimate_tokens("café") == 2
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 99999}}
    assert estimate_tokens([{"type": "text", "text": "look"}, image]) == 2 + IMAGE_TOKENS


def test_a_history_that_fits_is_left_as_it_is() -> None:
    history = [SYSTEM, *_exchange(1), {"role": "user", "content": "next"}]
    trimmed = fit_history(history, 10_000)
    assert trimmed.messages == history and not trimmed.changed and trimmed.fits


def test_old_tool_results_go_first_then_old_exchanges_and_the_rest_is_kept() -> None:
    history = [SYSTEM, *_exchange(1), *_exchange(2), *_exchange(3)[:3]]  # 3 is being answered
    sizes = [message_tokens(m) for m in history]
    # room for all but the first result: only that one goes
    trimmed = fit_history(history, sum(sizes) - 90)
    tool_contents = [m["content"] for m in trimmed.messages if m["role"] == "tool"]
    assert tool_contents == [RESULT_REMOVED, "word " * 100, "word " * 100]
    assert (trimmed.results_removed, trimmed.messages_dropped, trimmed.fits) == (1, 0, True)
    # room for the system prompt and the exchange being answered only
    tight = fit_history(history, sizes[0] + sum(sizes[9:]))
    assert tight.messages == [SYSTEM, *_exchange(3)[:3]]  # its own result is kept whole
    assert (tight.results_removed, tight.messages_dropped, tight.fits) == (2, 8, True)
    # room for one more exchange than that, and for a bit of the older one: it goes whole
    removed = message_tokens({"role": "tool", "content": RESULT_REMOVED})
    second = sizes[5] + sizes[6] + removed + sizes[8]
    budget = sizes[0] + sum(sizes[9:]) + second + removed + sizes[4]
    one_gone = fit_history(history, budget)
    assert [m.get("content") for m in one_gone.messages][:6] == [
        "Be brief.",
        "question 2",
        None,
        RESULT_REMOVED,
        "answer 2",
        "question 3",
    ]
    # not even that: sent as it would be at best, and said so
    hopeless = fit_history(history, 10)
    assert hopeless.messages == tight.messages and not hopeless.fits
    assert history[3]["content"] == "word " * 100  # the given history is not changed


roles = st.sampled_from(["system", "user", "exchange", "assistant"])


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for n, role in enumerate(draw(st.lists(roles, max_size=12))):
        if role == "exchange":
            history.extend(_exchange(n, draw(st.integers(0, 200))))
        else:
            history.append({"role": role, "content": "x" * draw(st.integers(0, 400))})
    return history


@given(histories(), st.integers(0, 2000))
def test_trimming_keeps_system_the_last_question_and_every_call_with_its_result(
    history: list[dict[str, Any]], budget: int
) -> None:
    trimmed = fit_history(history, budget)
    kept = trimmed.messages
    assert [m for m in kept if m["role"] == "system"] == [
        m for m in history if m["role"] == "system"
    ]
    users = [i for i, m in enumerate(history) if m["role"] == "user"]
    if users:
        tail = history[users[-1] :]
        assert kept[len(kept) - len(tail) :] == tail
    calls = {c["id"] for m in kept for c in m.get("tool_calls") or []}
    results = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
    assert calls == results
    assert trimmed.tokens_after == sum(message_tokens(m) for m in kept)
    assert trimmed.fits == (trimmed.tokens_after <= budget)
    if trimmed.tokens_before <= budget:
        assert kept == history
