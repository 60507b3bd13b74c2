"""A turn whose history is longer than the model's context: trimmed per request, and said."""

from __future__ import annotations

from typing import Any

import pytest

from toolrelay import Relay, tool
from toolrelay.core.prompt.context import RESULT_REMOVED
from toolrelay.engine.context_fit import CONTEXT_TRIMMED, ContextWindow
from toolrelay.testing.scripted_model import ScriptedModel, reply
from toolrelay.testing.sinks import ListSink

pytestmark = pytest.mark.anyio


def _history(exchanges: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for n in range(exchanges):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        history += [
            {"role": "user", "content": f"question {n} " + "detail " * 200},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "data " * 2000},
            {"role": "assistant", "content": f"answer {n}"},
        ]
    return [*history, {"role": "user", "content": "And now?"}]


async def test_a_long_history_is_trimmed_before_each_call_and_the_turn_says_so() -> None:
    @tool
    def look() -> str:
        """Looks."""
        return "seen " * 500

    model = ScriptedModel(reply(calls=[("look", {})]), reply("Fine."))
    relay = Relay(model, [look], context_tokens=8000)
    sink = ListSink()
    history = _history(20)  # about 60,000 tokens
    result = await relay.run(history, sink=sink)
    assert result.text == "Fine."
    first, second = (r.messages for r in model.requests)
    assert first[0] == history[0] and first[-1] == history[-1]  # system and the question kept
    assert len(first) < len(history)
    assert all(m["content"] != RESULT_REMOVED or m["role"] == "tool" for m in first)
    trimmed = [e.data for e in sink.of(CONTEXT_TRIMMED)]
    assert trimmed[0]["fits"] and trimmed[0]["tokens_after"] <= trimmed[0]["budget"]
    assert trimmed[0]["messages_dropped"] > 0 and trimmed[0]["results_removed"] > 0
    assert trimmed[0]["tokens_before"] > 8000 > trimmed[0]["tokens_after"]
    assert len(second) <= len(first)  # the turn's own result takes room from the history
    assert history[3]["content"] == "data " * 2000  # the caller's history is not changed


async def test_a_history_that_fits_is_sent_whole_without_an_event() -> None:
    model = ScriptedModel(reply("Fine."))
    sink = ListSink()
    history = _history(1)
    await Relay(ContextWindow(model, 100_000), []).run(history, sink=sink)  # a route's window
    assert model.requests[0].messages == history
    assert sink.of(CONTEXT_TRIMMED) == []
