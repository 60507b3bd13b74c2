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
   `max_tools_per_call` of them. A reply that names none but says "none"
   offers no tools: the model answers as text. A reply that names none and
   does not say "none", or a failed call, offers every tool: the step never
   makes a turn worse than without it.
3. The step's request is small (names and the first line of each description,
   temperature 0, a few tokens) and its text never reaches the client.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolrelay.core.items import output_text
from toolrelay.core.stream.reader import BodyReader
from toolrelay.engine.interfaces import Message, ModelClient, ModelRequest
from toolrelay.engine.tasks import plain_text

__all__ = ["SELECT_PROMPT", "Selection", "chosen_names", "select_tools", "selection_request"]

log = logging.getLogger(__name__)

SELECT_PROMPT: Final = (
    "Decide which tool, if any, is needed to answer the user's message.\n\n"
    "Tools:\n{tools}\n\n"
    "Reply with the tool's name only. If the message can be answered without a tool "
    "(a greeting, general knowledge, writing or explaining something), reply: none"
)
"""The step's system message; `{tools}` is one `- name: description` line per tool."""

SELECT_TOKENS: Final = 24
"""Enough for two names; the model stops earlier."""

_NONE = re.compile(r"\bnone\b|\bno tool", re.I)


@dataclass(frozen=True, slots=True)
class Selection:
    """What the step chose: the specs to offer, and what it saw (for the turn's steps)."""

    specs: list[Mapping[str, Any]]
    names: list[str]
    reply: str
    fallback: bool
    """True when the step could not tell (every tool offered, rule 2)."""


def _name(spec: Mapping[str, Any]) -> str:
    inner = spec.get("function")
    return str(inner.get("name") if isinstance(inner, Mapping) else spec.get("name") or "")


def _description(spec: Mapping[str, Any]) -> str:
    inner = spec.get("function")
    text = inner.get("description") if isinstance(inner, Mapping) else spec.get("description")
    return str(text or "").strip().split("\n", 1)[0].strip()


def _last_user_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return plain_text(message.get("content"))
    return ""


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
    return ModelRequest(
        messages=[
            {"role": "system", "content": SELECT_PROMPT.format(tools=lines)},
            {"role": "user", "content": _last_user_text(messages)},
        ],
        params=asked,
    )


def chosen_names(reply: str, names: Sequence[str], limit: int) -> list[str] | None:
    """The offered names `reply` mentions, first mention first, at most `limit`; [] when it
    names none and says none; None when it names none and does not (rule 2)."""
    found: list[tuple[int, str]] = []
    for name in names:
        match = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", reply)
        if match:
            found.append((match.start(), name))
    if found:
        return [name for _, name in sorted(found)[: max(1, limit)]]
    return [] if _NONE.search(reply) else None


async def select_tools(
    model: ModelClient,
    messages: Sequence[Message],
    specs: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
    limit: int,
) -> Selection:
    """Ask `model` which of `specs` the last user message needs (module doc)."""
    names = [_name(s) for s in specs]
    reply = ""
    try:
        stream = await model.open(selection_request(messages, specs, params))
        reader = BodyReader(stream.format)
        try:
            async for chunk in stream:
                reader.feed(chunk)
        finally:
            await stream.aclose()
        reader.finish()
        reply = output_text(reader.result().output).strip()
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the step is an optimisation: on failure, every tool (rule 2)
        log.warning("tool selection failed, offering every tool: %s", exc)
    chosen = chosen_names(reply, names, limit)
    if chosen is None:
        return Selection(list(specs), names, reply, fallback=True)
    keep = set(chosen)
    return Selection([s for s in specs if _name(s) in keep], chosen, reply, fallback=False)
