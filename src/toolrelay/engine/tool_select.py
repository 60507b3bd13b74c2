"""The tool-selection step for small models (issue 28): a turn is offered only what it needs.

The embedded 0.5B model, offered nine tools, picks the right one for a tool
question but answers the result with JSON or a fragment, and turns "Say hi."
into a call; offered one or two tools (or none) it does much better (measured
in `benchmarks/local_tool_turns.py`, table in docs/performance.md). So a route
with `tool_choice_step` (on by default for the embedded model only) first asks
the model, without tools, which of the offered tools the user's last message
needs, and offers the turn only those.

Rules this module keeps:

1. The step runs once, before the turn's first model call, only when tools are
   offered and the request's `tool_choice` is unset or "auto" (a client that
   requires a call, names a tool or says "none" gets what it asked for).
2. The reply is read for tool names, first mention first, at most
   `max_tools_per_call` of them. A reply that names no offered tool ("none",
   or the model answering the message itself, which is what it does for
   "Name three colours.") offers no tools: the model answers as text. A failed
   call offers every tool, as without the step.
3. Once every tool the step picked has a result in this turn, the next request
   has no tools, so the model answers: shown a result, the small model wrote
   a call again (the same, or the result pasted into its arguments) in most
   turns, which cost a round or ended the turn on a call. A turn that needs
   the same tool twice (two cities) makes both calls in its first batch or
   answers from the first result.
4. While the picked tools are offered, requests go at temperature 0 (the
   answer after the results at the client's): at 0.7 the 0.5B model wrapped
   its call in prose ("Here's the JSON object for the call: {…}") in most
   turns, which is text, not a call (`core.text_calls`); at 0 it wrote the
   bare call for 12 of 13 questions.
5. The step's request is small (names and the first line of each description,
   temperature 0, a few tokens) and its text never reaches the client.
6. The step is asked about the user's last message, and its system message lists the
   user's messages before it (the last two, each cut short): a follow-up such as
   "and in Tokyo?" names no tool, the question before it does. Measured: shown in
   the user message as a conversation (answers included), the model went on with the
   conversation ("In Tokyo it is 15 °C…") instead of naming a tool; listed in the
   system message, it picked the tool for "And in Tokyo?" and "What about AAPL?" and
   none for "Thanks!" after an order question.
7. A chosen tool the message has no word of (not in its name, not in its description's
   first line) gives way to the one other tool whose name the message uses (a word of
   four letters or more, generic verbs such as "get" left out): asked to "Convert 250
   USD to EUR.", the 0.5B picked `calculator` at every setting, with `convert_currency`
   offered. A pick that shares no word is kept when no other tool is named (the
   message "Is it raining?" has no word of `get_weather` and needs it).
8. A response that is wholly calls written as text, at least one of them to a tool not
   offered (a made-up one, or one the step did not pick), is not shown: the model is
   asked again, once, without tools (`core.text_calls.stage`, invariant 5; the text is kept in the turn's
   steps as `invented`). Offered `get_weather` for "Say hi.", the 0.5B wrote
   `{"name": "say_hi", …}` in every run, which reached the client as the answer.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolrelay.core.items import is_call, is_call_output, output_text
from toolrelay.core.stream.reader import BodyReader
from toolrelay.engine.checkpoint import TurnState
from toolrelay.engine.interfaces import Message, ModelClient, ModelRequest
from toolrelay.engine.tasks import plain_text

__all__ = [
    "SELECT_PROMPT",
    "Selection",
    "all_picked_ran",
    "calling_params",
    "chosen_names",
    "named_instead",
    "not_started",
    "only",
    "select_tools",
    "selection_request",
    "step_message",
]

log = logging.getLogger(__name__)

SELECT_PROMPT: Final = (
    "You pick the tool for a user's message. Tools:\n{tools}\n\n"
    "Reply with the name of the tool that helps answer the message. If no tool is related "
    "to the message (a greeting, a definition, a piece of writing), reply none. Never answer "
    "the message yourself: reply with one word."
)
"""The step's system message; `{tools}` is one `- name: description` line per tool.
Measured on the 0.5B model (benchmarks/local_tool_turns.py's prompts, 9 tools): asked to
"decide which tool, if any", it said none for 4 of 13 tool questions; this wording picks
the right tool for 12 of 13 (calculator for a currency conversion) and no tool for 3 of 4
plain questions (get_weather for "Say hi."). Constraining the reply to the names with a
JSON schema (`response_format`) was no better and took 7-12 s a call on one thread."""

CONTEXT_TEXT: Final = "\n\nThe user asked before: {earlier}"
"""Added to the step's system message when the chat has earlier user messages (rule 6)."""
CONTEXT_MESSAGES: Final = 2
"""Earlier user messages the step sees."""
CONTEXT_CHARS: Final = 300
"""Each earlier message is cut to this many characters: the step needs the topic only."""

SELECT_TOKENS: Final = 24
"""Enough for two names; the model stops earlier."""


@dataclass(frozen=True, slots=True)
class Selection:
    """What the step chose: the specs to offer, and what it saw (for the turn's steps)."""

    specs: list[Mapping[str, Any]]
    names: list[str]
    reply: str
    fallback: bool
    """True when the step's call failed (every tool offered, rule 2)."""


def _name(spec: Mapping[str, Any]) -> str:
    inner = spec.get("function")
    return str(inner.get("name") if isinstance(inner, Mapping) else spec.get("name") or "")


def _description(spec: Mapping[str, Any]) -> str:
    inner = spec.get("function")
    text = inner.get("description") if isinstance(inner, Mapping) else spec.get("description")
    return str(text or "").strip().split("\n", 1)[0].strip()


def step_message(messages: Sequence[Message]) -> tuple[str, list[str]]:
    """What the step is asked about: the user's last message, and the user's messages
    before it (the last few, each cut short; rule 6)."""
    users = [plain_text(m.get("content")) for m in messages if m.get("role") == "user"]
    if not users:
        return "", []
    earlier = [_clipped(text) for text in users[:-1] if text][-CONTEXT_MESSAGES:]
    return users[-1], earlier


def _clipped(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CONTEXT_CHARS else f"{text[: CONTEXT_CHARS - 1]}…"


def selection_request(
    messages: Sequence[Message], specs: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
) -> ModelRequest:
    """The step's request: the tools as a list of names, the user's last message, no tools."""
    lines = "\n".join(
        f"- {_name(s)}: {d}" if (d := _description(s)) else f"- {_name(s)}" for s in specs
    )
    asked = {"temperature": 0, "max_tokens": SELECT_TOKENS}
    if "seed" in params:
        asked["seed"] = params["seed"]
    message, earlier = step_message(messages)
    system = SELECT_PROMPT.format(tools=lines)
    if earlier:
        system += CONTEXT_TEXT.format(earlier=" / ".join(earlier))
    return ModelRequest(
        messages=[
            {"role": "system", "content": system},
            {"role": "user", "content": message},
        ],
        params=asked,
    )


def chosen_names(reply: str, names: Sequence[str], limit: int) -> list[str]:
    """The offered names `reply` mentions, first mention first, at most `limit` (rule 2)."""
    found: list[tuple[int, str]] = []
    for name in names:
        match = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", reply)
        if match:
            found.append((match.start(), name))
    return [name for _, name in sorted(found)[: max(1, limit)]]


async def select_tools(
    model: ModelClient,
    messages: Sequence[Message],
    specs: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
    limit: int,
) -> Selection:
    """Ask `model` which of `specs` the last user message needs (module doc)."""
    names = [_name(s) for s in specs]
    try:
        stream = await model.open(selection_request(messages, specs, params))
        reader = BodyReader(stream.format)
        try:
            async for chunk in stream:
                reader.feed(chunk)
        finally:
            await stream.aclose()
        reader.finish()
        read = reader.result()
        if read.error:
            raise ValueError(read.error)
        reply = output_text(read.output).strip()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the step is an optimisation: on failure, every tool (rule 2)
        log.warning("tool selection failed, offering every tool: %s", exc)
        return Selection(list(specs), names, "", fallback=True)
    chosen = named_instead(step_message(messages)[0], chosen_names(reply, names, limit), specs)
    return Selection(only(specs, chosen), chosen, reply, fallback=False)


GENERIC: Final = frozenset(
    [
        "get",
        "set",
        "list",
        "find",
        "fetch",
        "make",
        "create",
        "update",
        "delete",
        "read",
        "write",
        "check",
        "query",
        "info",
        "data",
    ]
)
"""Words of tool names too common to say which tool a message means (rule 7)."""


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 4}


def _uses(message: set[str], words: set[str]) -> bool:
    """The message has one of `words` (or a longer form: "converting" for "convert")."""
    return any(m.startswith(w) for m in message for w in words)


def named_instead(
    message: str, chosen: Sequence[str], specs: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Rule 7: each chosen tool the message has no word of gives way to the one other tool
    whose name the message uses; kept when no tool, or several, are named."""
    said = _words(message)
    by_name = {_name(s): s for s in specs}
    named = [
        name
        for name in by_name
        if _uses(said, {w for w in _words(name.replace("_", " ")) if w not in GENERIC})
    ]
    picked: list[str] = []
    for name in chosen:
        spec = by_name.get(name)
        own = _words(f"{name.replace('_', ' ')} {_description(spec)}") if spec else set()
        others = [n for n in named if n != name and n not in chosen]
        swap = not _uses(said, own) and len(others) == 1
        picked.append(others[0] if swap else name)
    return list(dict.fromkeys(picked))


def only(specs: Sequence[Mapping[str, Any]], names: Collection[str]) -> list[Mapping[str, Any]]:
    """The specs of `names`, in `specs` order."""
    keep = set(names)
    return [s for s in specs if _name(s) in keep]


def not_started(state: TurnState) -> bool:
    """A saved turn that stopped before its step chose and before any model response: the
    step runs when it resumes (a choice is kept in the state from the first checkpoint)."""
    return state.picked is None and not any(s.get("step") == "model" for s in state.steps)


def all_picked_ran(picked: Collection[str], output: Sequence[Mapping[str, Any]]) -> bool:
    """Rule 3: each of the `picked` tools has a call with a result in this turn's `output`."""
    results = {i.get("call_id") for i in output if is_call_output(i)}
    ran = {i.get("name") for i in output if is_call(i) and i.get("call_id") in results}
    return bool(picked) and all(name in ran for name in picked)


def calling_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Rule 4: the request that makes the picked tools' calls decodes greedily."""
    return {**params, "temperature": 0}
