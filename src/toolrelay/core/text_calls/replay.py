"""This turn's tool calls and results, replayed to a model that writes its calls as text.

A route with `text_tool_calls` (the embedded 0.5B model) is offered tools, but
writes its calls as JSON text (`core.text_calls.parse`). Replayed the native way
(an assistant `tool_calls` message, then a `tool` message), its chat template
shows the model its own call again in `<tool_call>` tags and the result as a
`<tool_response>`; the small model then mostly writes the same call again
instead of answering. Measured (`benchmarks/local_tool_turns.py`, docs/performance.md), what
makes it answer with the result is:

- each result as a user message that names the call and asks for the answer,
  restating the user's question (`RESULT_TEXT`, `ASKED_TEXT`), and no
  assistant message holding the call: a call shown in the history is what
  the model copies;
- a call that repeats an earlier call of this turn (same tool, same arguments)
  is not replayed twice (`repeats_of`, which the loop also uses not to run it).

Other items (text, reasoning, code blocks) replay as `core.formats.transcript`
replays them. Pure: items in, messages out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from toolrelay.core.formats.transcript import ReasoningReplay, to_chat_messages
from toolrelay.core.items import is_call, is_call_output
from toolrelay.core.tools.calls import (
    ParsedArguments,
    canonical_arguments,
    filter_to_schema,
    parse_arguments,
)

__all__ = ["RESULT_TEXT", "repeats_of", "replay_as_text"]

RESULT_TEXT: Final = "Result of {name}: {result}"
"""Measured: naming the arguments too (`get_weather({"city":"Paris"})`) made the model
write the call again; so did "The get_weather tool returned: …"."""
ANSWER_TEXT: Final = "Answer my question using this result."
ANSWER_MANY_TEXT: Final = "Answer my question using these results."
ASKED_TEXT: Final = "Using this result, answer in one or two sentences: {question}"
ASKED_MANY_TEXT: Final = "Using these results, answer in one or two sentences: {question}"
"""With the user's question known, the request for the answer restates it. Measured on
the 0.5B (13 tool questions, answer step alone, T=0 and 0.7 with seed 1): the answer held
the result's fact in 24 of 26, against 20 of 26 with `ANSWER_TEXT` (which got "Sorry, but
I can't assist with that." and "2,000,000" for a population of 522,250)."""


Schemas = Mapping[str, Mapping[str, Any] | None]
"""Tool name → the parameters schema its arguments are filtered to before it runs."""


def _signature(call: Mapping[str, Any], schemas: Schemas | None = None) -> tuple[str, str]:
    """Tool name and canonical arguments as the tool would get them (keys its schema does
    not declare left out, as the runner leaves them out): what makes two calls the same."""
    name = str(call.get("name") or "")
    raw = call.get("arguments")
    parsed = parse_arguments(name, raw if isinstance(raw, str) else None)
    if not isinstance(parsed, ParsedArguments):
        return name, str(raw)
    if schemas is None or name not in schemas:
        return name, parsed.canonical
    return name, canonical_arguments(filter_to_schema(parsed.value, schemas[name]))


def repeats_of(
    calls: Sequence[Mapping[str, Any]],
    output: Sequence[Mapping[str, Any]],
    schemas: Schemas | None = None,
) -> dict[str, Mapping[str, Any]] | None:
    """When every one of `calls` repeats a call this turn already has a result for: each
    new call's id → that earlier result item. Otherwise None (something new to run).

    With `schemas`, arguments a tool does not declare do not count (the model, shown a
    result, tends to copy it into the arguments: `{"symbol": "MSFT", "price": 187.42}`)."""
    results = {i.get("call_id"): i for i in output if is_call_output(i)}
    earlier: dict[tuple[str, str], Mapping[str, Any]] = {}
    for item in output:
        if is_call(item) and item.get("call_id") in results:
            earlier.setdefault(_signature(item, schemas), results[item.get("call_id")])
    found: dict[str, Mapping[str, Any]] = {}
    for call in calls:
        result = earlier.get(_signature(call, schemas))
        if result is None:
            return None
        found[str(call.get("call_id"))] = result
    return found or None


def _result_text(output: object) -> str:
    """A result's text (a text-call model reads no images: image parts are left out)."""
    if isinstance(output, str):
        return output
    if not isinstance(output, list):
        return "" if output is None else str(output)
    texts = (p.get("text") for p in output if isinstance(p, Mapping))
    return "\n".join(t for t in texts if isinstance(t, str))


def _result_message(
    calls: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], question: str
) -> dict[str, Any]:
    lines = [
        RESULT_TEXT.format(name=call.get("name"), result=_result_text(result.get("output")))
        for call, result in calls
    ]
    if question:
        lines.append((ASKED_TEXT if len(calls) == 1 else ASKED_MANY_TEXT).format(question=question))
    else:
        lines.append(ANSWER_TEXT if len(calls) == 1 else ANSWER_MANY_TEXT)
    return {"role": "user", "content": "\n".join(lines)}


def replay_as_text(
    output: Sequence[Mapping[str, Any]],
    *,
    reasoning: ReasoningReplay = "none",
    question: str = "",
) -> list[dict[str, Any]]:
    """Messages to append after the history for this turn's items (see the module doc);
    `question`, the user's last message as text, is restated after the results."""
    results = {i.get("call_id"): i for i in output if is_call_output(i)}
    messages: list[dict[str, Any]] = []
    other: list[Mapping[str, Any]] = []
    group: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    seen: set[tuple[str, str]] = set()

    def flush() -> None:
        nonlocal other, group
        messages.extend(to_chat_messages(other, reasoning=reasoning))
        if group:
            messages.append(_result_message(group, question))
        other, group = [], []

    for item in output:
        if is_call(item):
            result = results.get(item.get("call_id"))
            signature = _signature(item)
            if result is not None and signature not in seen:
                seen.add(signature)
                if other:
                    flush()
                group.append((item, result))
        elif not is_call_output(item):
            if group:
                flush()
            other.append(item)
    flush()
    return messages
