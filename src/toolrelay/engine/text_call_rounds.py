"""The loop's two rules for routes whose model writes its calls as text (issue 14).

Both exist because the embedded 0.5B model, shown its own call and the result,
tends to write the same call again instead of answering (measured in
`benchmarks/local_tool_turns.py`; rates in docs/performance.md):

1. The request after a result replays this turn's calls and results as text
   (`core.text_calls.replay.replay_as_text`), not as native `tool_calls`
   and `tool` messages, and restates the user's last message after them.
2. A batch whose every call repeats a call this turn already has a result for
   (same tool, same arguments as the tool would get them) is not run again: each call gets the earlier
   result, and the model is asked once more without tools, so it answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from toolrelay.core.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    function_call_output_item,
    is_call_output,
)
from toolrelay.core.text_calls.replay import repeats_of, replay_as_text
from toolrelay.engine.interfaces import ModelRequest, Tool
from toolrelay.engine.tasks import plain_text

__all__ = ["answered_again", "text_call_request"]


def text_call_request(request: ModelRequest) -> ModelRequest:
    """`request` with this turn's items replayed as text messages (rule 1), once it has a
    result; the whole turn goes in the messages, so no stateful continuation."""
    if not any(is_call_output(i) for i in request.output):
        return request
    return dataclasses.replace(
        request,
        messages=[*request.messages, *replay_as_text(request.output, question=_asked(request))],
        output=(),
        previous_response_id=None,
        new_items_from=0,
    )


def _asked(request: ModelRequest) -> str:
    """The user's last message as plain text, restated with the results (rule 1)."""
    for message in reversed(request.messages):
        if message.get("role") == "user":
            return " ".join(plain_text(message.get("content")).split())
    return ""


def answered_again(
    calls: Sequence[FunctionCallItem],
    output: Sequence[Mapping[str, Any]],
    tools: Mapping[str, Tool],
) -> list[FunctionCallOutputItem] | None:
    """Rule 2: the results of `calls` when every one repeats an answered call of this turn
    (copies of the earlier results, nothing run); None when there is something to run.
    Arguments a tool would not get (its runner filters them out) do not count."""
    schemas = {
        name: tool.spec.parameters
        for name, tool in tools.items()
        if tool.spec.filter_arguments and tool.spec.kind != "mcp"
    }
    earlier = repeats_of(calls, output, schemas)
    if earlier is None:
        return None
    results: list[FunctionCallOutputItem] = []
    for call in calls:
        before = earlier[call["call_id"]]
        result = function_call_output_item(
            call["call_id"], before.get("output") or "", status=str(before.get("status"))
        )
        results.append(result)
    return results
